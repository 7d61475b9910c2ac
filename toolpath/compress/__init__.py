"""Weight compression of local models: `toolpath compress MODEL --method M --out DIR`.

A method is a compressor kind (toolpath/kinds.py), registered under its name in the registry (the only table of
methods; a plugin adds one with `TOOLPATH_PLUGINS=compressor:NAME=module:KIND`):

    name      what `--method` calls it
    Options   its pydantic options (`--bits N` is its `bits` field, `--option KEY=VALUE` the others), checked
              before any model is loaded
    packs     whether it writes packed low-bit weights (policies/packed_weights.py) or plain ones
    compress(source: str, out: pathlib.Path, *, options: Options, log) -> dict

`source` is a model name a spec accepts (`local`, `local:NAME`, `hf:PATH`), loaded with
`toolpath.compress.source.load_source`. `out` is an empty folder the method fills with a model folder that
`model: hf:OUT` loads (config.json, tokenizer files, weights). `log(text)` prints one progress line. The
returned dict (JSON-able) is written into compression.json beside method, source, bits, options and seconds.
"""

from __future__ import annotations

from typing import Any


def compressor(name: str) -> Any:
    """The compressor registered as `name`, a built-in method or a plugin's; a RegistryError naming the methods
    when there is none, a NotAKind naming what a plugin's object lacks."""
    from ..kinds import check_kind
    from ..registry import load

    return check_kind(load("compressor", name), "compressor", name)
