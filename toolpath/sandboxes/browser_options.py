"""What a spec's `sandbox.options` may set for the browser sandbox, and how each option is read: the same
readers serve BrowserOptions (a spec's options, read once before the episode) and BrowserSandbox's constructor
(a Python caller's arguments)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, StrictBool

from .base import SandboxError, SandboxOptions, read_by
from .web_access import allowed_hosts_option


def read_viewport(value) -> tuple[int, int]:
    if value is None:
        return 1280, 720
    try:
        if isinstance(value, str):
            w, h = value.lower().split("x")
        elif isinstance(value, dict):
            w, h = value["width"], value["height"]
        else:
            w, h = value
        w, h = int(w), int(h)
    except (ValueError, TypeError, KeyError):
        raise SandboxError(f"viewport: expected 'WxH', [w, h] or {{'width', 'height'}}, got {value!r}") from None
    if not (100 <= w <= 8192 and 100 <= h <= 8192):
        raise SandboxError(f"viewport: {w}x{h} is out of range (100..8192 pixels a side)")
    return w, h


def read_seconds(name: str, value, default: float) -> float:
    if value is None:
        return default
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise SandboxError(f"{name}: expected seconds, got {value!r}") from None
    if not v >= 0:
        raise SandboxError(f"{name}: expected seconds >= 0, got {value!r}")
    return v


def read_start_url(value) -> str | None:
    if value is not None and (not isinstance(value, str) or
                              urlsplit(value).scheme not in ("http", "https", "file", "data", "about")):
        raise SandboxError(f"start_url: expected an http(s), file, data or about URL, got {value!r}")
    return value


def read_setup_js(value) -> str | None:
    if value is not None and not isinstance(value, str):
        raise SandboxError(f"setup_js: expected a JavaScript snippet (a string), got {type(value).__name__}")
    return value


# Each option's own reading (the constructor's too): a SandboxError naming it, or the value as the browser uses it.
_READ = {"start_url": read_start_url, "allowed_hosts": allowed_hosts_option, "viewport": read_viewport,
         "setup_js": read_setup_js, **{name: (lambda v, name=name: read_seconds(name, v, 0.0))
                                  for name in ("navigation_timeout", "action_timeout", "settle")}}


class BrowserOptions(SandboxOptions):
    start_url: str | None = Field(None, description="the page it opens first: an http(s), file, data or about URL")
    allowed_hosts: Any = Field(None, description="hosts besides the start page's the page may load from")
    viewport: Any = Field(None, description="'WxH', [w, h] or {width, height} (default 1280x720)")
    headless: StrictBool = Field(True, description="no window on the screen")
    navigation_timeout: float | None = Field(None, description="seconds a page load may take (default 30)")
    action_timeout: float | None = Field(None, description="seconds one action may take (default 10)")
    setup_js: str | None = Field(None, description="JavaScript run in every page before its own")
    settle: float | None = Field(None, description="seconds to wait after an action before looking (default 0.05)")

    _read = read_by(_READ)
