"""Response grammars: how a model that has no native tool calling writes a call, and how we read it back.

    common.py    the limits on what is read, `Parsed`, the value readers, the `ResponseFormat` protocol
    json.py      `<tool_call>{…}</tool_call>` (registry format `json`, the default)
    native.py    a model's own call format, for a model prompted through its tool-taking chat template
                 (hf.py picks it in place of `json`; it is not a format a spec names)
    deepeyes.py  DeepEyesV2's think-then-one-action grammar (registry format `deepeyes`)
    scalecua.py  ScaleCUA's GUI action grammar (built by the computer_use agent for its mode and screen)
    fsd.py       FSD's grounded answers and the embodied agent's questions (read by parse_fsd, not a call format)

A run picks its format by name through the registry (kind `format`), so a plugin adds one with an entry point
or TOOLPATH_PLUGINS=format:NAME=pkg.module:Class.
"""

from __future__ import annotations

from typing import Any

from ... import registry
from .common import (  # noqa: F401
    MAX_BLOCK_CHARS,
    MAX_CALLS,
    MAX_ISSUES,
    MAX_REPLY_CHARS,
    Parsed,
    ResponseFormat,
    cap_issues,
    loads_lenient,
    make_call,
    python_literal,
    read_reply,
)
from .deepeyes import DeepEyesFormat
from .json import CLOSE, OPEN, JSONFormat, demonstration, issue_feedback, parse_tool_calls, render_tools  # noqa: F401

# The formats loaded so far, by name: the built-in two at once (every text policy falls back to json), any
# other the first time a run names it.
FORMATS: dict[str, Any] = {"json": JSONFormat(), "deepeyes": DeepEyesFormat()}


def get_format(name: str | None):
    """The response format by name; ValueError naming the known ones otherwise."""
    name = name or "json"
    if name not in FORMATS:
        known = registry.declared("format")
        if name not in known:
            raise ValueError(f"unknown response format {name!r}; expected one of {', '.join(known)}")
        made = registry.load("format", name)
        FORMATS[name] = made() if isinstance(made, type) else made
    return FORMATS[name]
