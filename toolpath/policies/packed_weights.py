"""The packed-weights folder format: a model whose quantized weights are stored as integer codes, zero points and
scales, not floats. `toolpath compress` writes it (save_packed), the hf backend reads it (load_packed) and the
onnxruntime engine places its codes as they are (engines/packed_codes.py).

A quantized matrix W [rows, cols] is cut into groups of `group_size` input columns; each group of a row has a
float16 scale and an integer zero point, w = scale * (code - zero), codes and zero points 1-8 bits wide. Why an
integer zero point, where the kv caches (kvcache/quant.py) and the int4 kernel (quant.py) keep a float one: it is
stored in as few bits as the codes, the group's range always holds 0 so a zero weight stays exact (as GPTQ's
quantizer does), and it is what MatMulNBits reads, so a folder runs on the engine without being rounded again.

Layout (what `model: hf:DIR` loads through HFPolicy.from_path):
  config.json          the model's config plus `toolpath_compression`: format, version, and for each packed
                       weight its shape, bits and group size (per expert for a fused 3-D expert tensor)
  model.safetensors    every other weight as saved by transformers; a packed weight NAME as NAME.codes,
                       NAME.zeros (uint8 bit streams, bitpack.py) and NAME.scales (float16); a fused expert
                       tensor per expert as NAME.<e>.codes / .zeros / .scales
  tokenizer files, generation_config.json

Loading builds the model from its config and de-quantizes each packed weight once, into the model's ordinary
float parameters. Not on the fly: the codes are 1–8 bits wide in groups of 128 and there is no CPU kernel for
such a layout here, so unpacking on every forward would cost more than the matrix product it feeds, and
transformers' fused-expert code reads the 3-D parameters directly; the packed form saves disk and download,
while fast low-bit inference is the business of the backends' `weights` option (int8/int4 kernels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .bitpack import pack, unpack

FORMAT = "toolpath-packed"
VERSION = 1
WEIGHTS = "model.safetensors"


@dataclass
class Quantized:
    """A quantized matrix: codes [rows, cols] (uint8 values < 2**bits), scales and zeros [rows, groups]."""

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    bits: int
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)

    def dequantize(self, dtype=torch.float32) -> torch.Tensor:
        rows, cols = self.codes.shape
        g = self.group_size
        index = torch.arange(cols) // g  # the group of each column
        scales = self.scales.to(dtype)[:, index]
        zeros = self.zeros.to(dtype)[:, index]
        return scales * (self.codes.to(dtype) - zeros)

    def pack(self) -> dict[str, torch.Tensor]:
        """The tensors stored in safetensors: packed codes and zeros (uint8 bit streams), float16 scales."""
        return {"codes": pack(self.codes.reshape(-1), self.bits), "zeros": pack(self.zeros.reshape(-1), self.bits),
                "scales": self.scales.to(torch.float16).contiguous()}

    @classmethod
    def unpack(cls, tensors: dict[str, torch.Tensor], shape: tuple[int, int], bits: int,
               group_size: int) -> Quantized:
        rows, cols = shape
        groups = -(-cols // group_size)
        codes = unpack(tensors["codes"].reshape(-1), bits, rows * cols).reshape(rows, cols)
        zeros = unpack(tensors["zeros"].reshape(-1), bits, rows * groups).reshape(rows, groups)
        return cls(codes, tensors["scales"].float(), zeros, bits, group_size)


def save_packed(model, tokenizer, quantized: dict[str, Any], out: Path, info: dict[str, Any]) -> None:
    """Write `model` to `out` with the weights in `quantized` ({name: Quantized, or {expert: Quantized} for a fused
    3-D tensor}) packed; the rest as floats. `info` goes into config.json beside the tensors' layout."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    layout: dict[str, Any] = {}
    seen: set[int] = set()
    for name, param in model.state_dict().items():
        if param.data_ptr() in seen and name not in quantized:  # a tied weight: the loader re-ties it
            continue
        seen.add(param.data_ptr())
        q = quantized.get(name)
        if q is None:
            tensors[name] = param.detach().contiguous().clone()
        elif isinstance(q, Quantized):
            tensors.update({f"{name}.{k}": v for k, v in q.pack().items()})
            layout[name] = {"shape": list(param.shape), "bits": q.bits, "group_size": q.group_size}
        else:
            experts = {}
            for e in range(param.shape[0]):
                if e in q:
                    tensors.update({f"{name}.{e}.{k}": v for k, v in q[e].pack().items()})
                    experts[str(e)] = {"bits": q[e].bits, "group_size": q[e].group_size}
                else:
                    tensors[f"{name}.{e}.weight"] = param[e].detach().contiguous().clone()
            layout[name] = {"shape": list(param.shape), "experts": experts}
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    config = model.config.to_dict()
    config["toolpath_compression"] = {"format": FORMAT, "version": VERSION, **info, "tensors": layout}
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def packing(folder: Path) -> dict[str, Any] | None:
    """The folder's `toolpath_compression` entry, or None for a plain model folder."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    entry = json.loads(path.read_text(encoding="utf-8")).get("toolpath_compression")
    return entry if isinstance(entry, dict) and entry.get("format") == FORMAT else None


def load_packed(folder) -> Any:
    """The model of a folder save_packed wrote, its packed weights de-quantized to float32; a folder without
    packed weights (a method that writes plain weights) loads as transformers loads it."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(folder)
    entry = packing(folder)
    if entry is None:
        return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, use_safetensors=True)
    if entry.get("version") != VERSION:
        raise ValueError(f"{folder}/config.json: toolpath_compression version {entry.get('version')!r} is not "
                         f"{VERSION}, the one this toolpath reads")
    config = AutoConfig.from_pretrained(str(folder))
    if hasattr(config, "toolpath_compression"):
        delattr(config, "toolpath_compression")
    _check_size(folder, config)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    stored = load_file(str(folder / WEIGHTS))
    tensors = entry.get("tensors")
    if not isinstance(tensors, dict):
        raise ValueError(f"{folder}/config.json: toolpath_compression.tensors must be a mapping")
    packed_names = tuple(f"{name}." for name in tensors)
    state = {k: v for k, v in stored.items() if not k.startswith(packed_names)}
    for name, spec in tensors.items():
        try:
            state[name] = _unpacked(stored, name, spec, folder)
        except (KeyError, TypeError, IndexError, RuntimeError, ValueError) as err:  # a layout its tensors do not fit
            raise ValueError(f"{folder}/config.json: packed weight {name[:200]!r} does not fit {WEIGHTS}: "
                             f"{type(err).__name__}: {str(err)[:200]}") from None
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as err:  # a packed weight of another shape than the config's model has there
        raise ValueError(f"{folder}: its weights do not fit its config.json: {str(err)[:300]}") from None
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    missing = [k for k in missing if k not in tied and not _is_tied(model, k)]
    if missing or unexpected:
        raise ValueError(f"{folder}/{WEIGHTS} does not fit its config: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    model.tie_weights()
    model.eval()
    return model


def _check_size(folder: Path, config) -> None:
    """A ValueError when config.json describes a model far larger than its weights file holds (at 1 bit a weight
    is 1/32 of its float, plus scales): built on the meta device first, so such a config allocates nothing."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        probe = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    need = sum(p.numel() for p in probe.parameters()) * 4
    size = (folder / WEIGHTS).stat().st_size
    if need > 40 * size + 2**20:
        raise ValueError(f"{folder}/config.json describes a model of {need:,} bytes in float32, more than its "
                         f"{WEIGHTS} of {size:,} bytes can hold even at 1 bit a weight")


def _is_tied(model, key: str) -> bool:
    """Whether `key` shares its storage with another parameter (tied embeddings), so it was saved once."""
    params = dict(model.named_parameters(remove_duplicate=False))
    p = params.get(key)
    return p is not None and any(q is p for k, q in params.items() if k != key)


def _whole(value: Any, low: int, high: int | None = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high)


def _unpacked(stored: dict[str, torch.Tensor], name: str, spec: dict[str, Any], folder: Path) -> torch.Tensor:
    def part(prefix: str, shape, bits, group_size) -> torch.Tensor:
        if not (isinstance(shape, list) and len(shape) == 2 and all(_whole(n, 1) for n in shape)
                and _whole(bits, 1, 8) and _whole(group_size, 1)):
            raise ValueError(f"shape {str(shape)[:80]}, bits {str(bits)[:20]} and group size {str(group_size)[:20]} "
                             "are not a matrix's layout (two sizes of at least 1, 1-8 bits, a group of at least 1)")
        try:
            tensors = {k: stored[f"{prefix}.{k}"] for k in ("codes", "zeros", "scales")}
        except KeyError as err:
            raise ValueError(f"{folder}/{WEIGHTS}: packed weight {prefix} lacks {err.args[0]}") from None
        return Quantized.unpack(tensors, tuple(shape), bits, group_size).dequantize()

    shape = spec["shape"]
    if "experts" not in spec:
        return part(name, shape, spec["bits"], spec["group_size"])
    slices = []
    for e in range(shape[0]):
        if str(e) in spec["experts"]:
            s = spec["experts"][str(e)]
            slices.append(part(f"{name}.{e}", shape[1:], s["bits"], s["group_size"]))
        else:
            slices.append(stored[f"{name}.{e}.weight"].float())
    return torch.stack(slices)
