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

# What --bits means per method, checked before any work: (lowest, highest, whole numbers only), or None for a
# method that takes no --bits. moe-bits reads an average over experts between its lowest and highest level.
BITS: dict[str, tuple[float, float, bool] | None] = {
    "rtn": (1, 8, True), "gptq": (1, 8, True), "moe-bits": (1.0, 8.0, False), "tailor": None}


def check_bits(name: str, bits: float | None) -> None:
    """A ValueError naming --bits when `bits` is out of the method's range."""
    allowed = BITS.get(name)
    if bits is None:
        return
    if allowed is None:
        raise ValueError(f"--bits: method {name} takes no bit-width")
    lo, hi, whole = allowed
    if not lo <= bits <= hi or (whole and bits != int(bits)):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"--bits for {name} must be {kind} from {lo:g} to {hi:g}, got {bits:g}")


def method(name: str) -> Callable[..., dict[str, Any]]:
    """The compress function of a method, imported on first use."""
    if name not in METHODS:
        raise ValueError(f"unknown compression method {name!r}; methods: {', '.join(sorted(METHODS))}")
    module, _, attr = METHODS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
