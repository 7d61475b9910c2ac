"""Weight compression of local models: `toolpath compress MODEL --method M --out DIR`.

Every method is a function with one contract, imported only when asked for (torch is heavy):

    def compress(source: str, out: pathlib.Path, *, bits: float | None, options: dict[str, str], log) -> dict

`source` is a model name a spec accepts (`local`, `local:NAME`, `hf:PATH`), loaded with
`toolpath.compress.source.load_source`. `out` is an empty folder the method fills with a model folder that
`model: hf:OUT` loads (config.json, tokenizer files, weights). `log(text)` prints one progress line. The
returned dict (JSON-able) is written into compression.json beside method, source, bits, options and seconds.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

METHODS: dict[str, str] = {
    "rtn": "toolpath.compress.gptq:compress_rtn",
    "gptq": "toolpath.compress.gptq:compress_gptq",
    "moe-bits": "toolpath.compress.moe_bits:compress",
    "tailor": "toolpath.compress.tailor:compress",
}


def method(name: str) -> Callable[..., dict[str, Any]]:
    """The compress function of a method, imported on first use."""
    if name not in METHODS:
        raise ValueError(f"unknown compression method {name!r}; methods: {', '.join(sorted(METHODS))}")
    module, _, attr = METHODS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
