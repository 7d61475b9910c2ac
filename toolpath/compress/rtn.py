"""`toolpath compress --method rtn`: round-to-nearest at one bit-width, the baseline GPTQ improves on."""

from __future__ import annotations

from pathlib import Path

from . import gptq
from .options import GroupSize, MethodOptions, WholeBits
from .quant import GROUP_SIZE


class RTNOptions(MethodOptions):
    bits: WholeBits = 4
    group_size: GroupSize = GROUP_SIZE


class RTN:
    """Every linear but the output head rounded to nearest, group by group; no calibration."""

    name = "rtn"
    packs = True  # writes packed low-bit weights
    Options = RTNOptions

    def compress(self, source: str, out: Path, *, options: RTNOptions, log) -> dict:
        from ..policies.packed_weights import save_packed
        from .source import load_source

        model, tokenizer = load_source(source)
        quantized = gptq.quantize_model_rtn(model, gptq.uniform_plan(options.bits), options.group_size)
        info = {"bits": options.bits, "group_size": options.group_size, "calibration": None,
                "quantized_tensors": len(quantized)}
        save_packed(model, tokenizer, quantized, out, {"method": self.name, **info})
        return info


KIND = RTN()
