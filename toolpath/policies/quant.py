"""Low-bit weights for a loaded transformers model on the CPU: `model.options.weights: fp32 | bf16 | int8 | int4`.

- `fp32`: the model as loaded (GGUF files are de-quantized to fp32 by transformers).
- `bf16`: every parameter cast to bfloat16 (half the memory; fast where the CPU has bf16 instructions).
- `int8`: each nn.Linear's weight stored as int8 with one scale per output channel (symmetric, round to
  nearest); the product runs in torch's own weight-only int8 kernel, `aten._weight_int8pack_mm`.
- `int4`: each nn.Linear's weight stored as 4-bit codes, packed two to a byte, in groups along the input
  dimension (option `int4_group`: 32 by default, 64 or 128), each group with a scale and a float zero point
  (asymmetric min/max); the product runs in torch's int4 CPU kernel, `aten._weight_int4pack_mm_for_cpu`.
  Why 32 and not 128: the local models come from GGUF files whose 4-bit blocks are 32 weights (Q4_1, Q4_K's
  sub-blocks), so a 32-group re-quantizes their de-quantized weights almost exactly, where 64 or 128 mixes
  blocks: SmolLM2-135M's held-out perplexity went from 12.0 (fp32) to 12.6 at group 32, 18.1 at group 64.
  Where the group does not divide a layer's input size, the layer takes the largest smaller one that does; a
  layer the kernel cannot take at all (output size not a multiple of 16) falls back to int8, never silently
  to floats, and the summary names it.

The quantized layers keep only the low-bit tensors (`weight` is deleted), so the memory saving is real.
`lm_head: quantized | float` (option `lm_head`, default quantized) says whether the output projection is
quantized too; when it shares its weight with the input embeddings (SmolLM2, Qwen2.5-0.5B), the embedding
table stays a bf16 tensor (a lookup reads a few rows) and only the head's product reads the low-bit copy.

Chosen by measurement on SmolLM2-135M (2 shared cores, held-out perplexity of pydoc_data.topics, fp32 12.0):
- torch's weight-only kernels with bf16 activations: int8 12.1, int4 (group 32) 12.6; with fp32 activations the
  same kernels were 10-40x slower than plain fp32 layers, so quantized models compute in bf16;
- fbgemm's dynamic int8 linear (torch.ao.nn.quantized.dynamic.Linear, activations quantized per call): fast,
  but perplexity 46: rejected;
- torchao 0.18 installs beside torch 2.13 (`pip install --no-deps`), but its CPU weight-only int4 layout
  (Int4OpaqueTensor) calls the same aten kernel (read in its source; not timed separately): not a dependency;
- a static KV cache (`cache_implementation="static"`) made decoding slower (bf16 5.5 -> 2.4 tokens/s), and
  torch.compile of the forward did not finish compiling within 10 minutes on the busy machine: neither is used.
benchmarks/local_model.py prints each option's load time, speed, memory and perplexity for every local model.
"""

from __future__ import annotations

from typing import Any

from ..spec import INT4_GROUPS, LM_HEAD, WEIGHTS

GROUP = 32  # int4 group size along the input dimension (see above)



def check_weights(value: Any, field: str = "model.options.weights") -> str:
    """The option's value, or a ValueError naming the field and the accepted values."""
    if value not in WEIGHTS:
        raise ValueError(f"{field} must be one of {', '.join(WEIGHTS)}, got {value!r}")
    return value


def check_lm_head(value: Any, field: str = "model.options.lm_head") -> str:
    if value not in LM_HEAD:
        raise ValueError(f"{field} must be one of {', '.join(LM_HEAD)}, got {value!r}")
    return value


def _torch():
    import torch

    return torch


def _module_base():
    from torch import nn

    return nn.Module


class Int8Linear(_module_base()):
    """y = x @ (q * s)^T + b with q int8 [out, in] and s one scale per output channel."""

    def __init__(self, qweight, scales, bias, dtype):
        super().__init__()
        self.in_features, self.out_features = qweight.shape[1], qweight.shape[0]
        self.dtype = dtype  # the activations' dtype; the kernel wants its scales in it
        self.register_buffer("qweight", qweight)
        self.register_buffer("scales", scales.to(dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().to(dtype))

    @classmethod
    def from_float(cls, linear, dtype=None) -> Int8Linear:
        torch = _torch()
        w = linear.weight.detach().float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        q = torch.clamp(torch.round(w / scales[:, None]), -127, 127).to(torch.int8).contiguous()
        return cls(q, scales, linear.bias, dtype or linear.weight.dtype)

    def dequantized(self):
        return self.qweight.float() * self.scales.float()[:, None]

    def forward(self, x):
        torch = _torch()
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(self.dtype).contiguous()
        y = torch.ops.aten._weight_int8pack_mm(x2, self.qweight, self.scales)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per channel"


class Int4Linear(_module_base()):
    """Group-wise asymmetric int4: w ≈ (q - 8) * scale + zero per group of `group` input columns, the codes in
    the CPU kernel's packed layout (uint8, two codes a byte) and scales/zeros as [in / group, out, 2]. Not the
    packed-weights format's codes (bitpack.py, an integer zero point): `aten._weight_int4pack_mm_for_cpu` reads
    only its own layout, made by `_convert_weight_to_int4pack_for_cpu`, with a float zero point."""

    def __init__(self, packed, scales_zeros, bias, in_features, out_features, group, dtype):
        super().__init__()
        self.in_features, self.out_features, self.group, self.dtype = in_features, out_features, group, dtype
        self.register_buffer("packed", packed)
        self.register_buffer("scales_zeros", scales_zeros.to(dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().to(dtype))

    @staticmethod
    def quantize(w, group: int = GROUP):
        """(codes int32 [out, in] in 0..15, scales [out, in/group], zeros [out, in/group]) of a float matrix:
        min/max per group, the zero point in the float domain as the kernel reads it."""
        torch = _torch()
        out_f, in_f = w.shape
        g = w.float().reshape(out_f, in_f // group, group)
        lo, hi = g.amin(dim=-1), g.amax(dim=-1)
        scales = ((hi - lo) / 15).clamp(min=1e-12)
        zeros = lo + scales * 8
        q = torch.clamp(torch.round((g - lo[..., None]) / scales[..., None]), 0, 15).to(torch.int32)
        return q.reshape(out_f, in_f), scales, zeros

    @classmethod
    def from_float(cls, linear, group: int = GROUP, dtype=None) -> Int4Linear:
        torch = _torch()
        w = linear.weight.detach()
        out_f, in_f = w.shape
        q, scales, zeros = cls.quantize(w, group)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), 1)
        scales_zeros = torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous()
        return cls(packed, scales_zeros, linear.bias, in_f, out_f, group, dtype or w.dtype)

    def dequantized(self):
        torch = _torch()
        eye = torch.eye(self.in_features, dtype=self.dtype)
        return self.forward_raw(eye).float().T  # the kernel's own product with the identity: exactly its weights

    def forward_raw(self, x2):
        torch = _torch()
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x2, self.packed, self.group, self.scales_zeros)

    def forward(self, x):
        shape = x.shape
        y = self.forward_raw(x.reshape(-1, shape[-1]).to(self.dtype).contiguous())
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int4 group {self.group}"


def weight_of(linear):
    """The float weight [out, in] of a linear layer, plain or low-bit: code that reads weights (calibration)
    works whatever `model.options.weights` the run chose."""
    if isinstance(linear, (Int8Linear, Int4Linear)):
        return linear.dequantized()
    return linear.weight


def int4_group(linear, group: int = GROUP) -> int | None:
    """The group size the int4 kernel takes for this layer: `group` where it divides the input size, else the
    largest smaller one that does (SmolLM2's hidden size, 576, is 4.5 groups of 128), or None (none does, or
    the output size is not a multiple of 16)."""
    if linear.out_features % 16:
        return None
    return next((g for g in sorted(INT4_GROUPS, reverse=True) if g <= group and linear.in_features % g == 0), None)


def _linears(model, lm_head: str) -> list[str]:
    """The full names of the nn.Linear modules to quantize (names, not modules: the caller drops each float
    layer as soon as its low-bit copy replaces it, so the peak memory is one float model, not two)."""
    from torch import nn

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and not (module is head and lm_head == "float")]


def _untie(model) -> None:
    """A head that shares its weight with the embedding table: give the head its own Parameter object, so
    replacing the head leaves the embeddings whole and transformers does not tie them back."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if head is None or emb is None or head.weight is not emb.weight:
        return
    from torch import nn

    head.weight = nn.Parameter(emb.weight.detach(), requires_grad=False)  # same storage, separate parameter
    model.config.tie_word_embeddings = False
    for cfg in (getattr(model.config, "text_config", None),):
        if cfg is not None and hasattr(cfg, "tie_word_embeddings"):
            cfg.tie_word_embeddings = False
    if hasattr(model, "_tied_weights_keys"):
        model._tied_weights_keys = {} if isinstance(model._tied_weights_keys, dict) else []


def apply_weights(model, weights: str = "fp32", lm_head: str = "quantized", group: int = GROUP) -> dict:
    """Convert a loaded model in place to `weights`; returns what was done: {"weights", "lm_head",
    "quantized": n layers, "int8_fallback": names of int4 layers kept at int8, "bytes": parameter + buffer bytes}."""
    check_weights(weights, "weights")
    check_lm_head(lm_head, "lm_head")
    torch = _torch()
    fallback: list[str] = []
    count = 0
    if weights == "bf16":
        model.to(torch.bfloat16)
    elif weights in ("int8", "int4"):
        compute = torch.bfloat16
        if lm_head == "quantized":
            _untie(model)
        with torch.no_grad():
            for full in _linears(model, lm_head):
                parent_name, _, attr = full.rpartition(".")
                parent = model.get_submodule(parent_name) if parent_name else model
                linear = getattr(parent, attr)
                g = int4_group(linear, group) if weights == "int4" else None
                if g is not None:
                    new = Int4Linear.from_float(linear, g, compute)
                else:
                    if weights == "int4":
                        fallback.append(full)
                    new = Int8Linear.from_float(linear, compute)
                setattr(parent, attr, new)
                del linear, new
                count += 1
        # The rest (embeddings, norms, a float head) computes in bf16 too: both kernels are fast only with bf16
        # activations (with fp32 ones they were 10-40x slower than fp32 floats here, see the module's notes).
        model.to(compute)
    return {"weights": weights, "lm_head": lm_head, "quantized": count, "int8_fallback": fallback,
            "bytes": model_bytes(model)}


def load_dtype(spec):
    """The dtype to load the model in for the spec's weights: bf16 for every option but fp32, so the peak
    memory while converting is a bf16 model (quantizing from bf16 rather than fp32 values changes the codes
    by far less than one int8 or int4 step)."""
    torch = _torch()
    return torch.float32 if (spec.options or {}).get("weights", "fp32") == "fp32" else torch.bfloat16


def apply_from_spec(model, spec) -> dict:
    """apply_weights with the spec's `options.weights` (default fp32), `options.lm_head`, `options.int4_group`."""
    options = spec.options or {}
    group = options.get("int4_group", GROUP)
    if group not in INT4_GROUPS:
        raise ValueError(f"model.options.int4_group must be one of {', '.join(map(str, INT4_GROUPS))}, got {group!r}")
    return apply_weights(model, check_weights(options.get("weights", "fp32")),
                         check_lm_head(options.get("lm_head", "quantized")), group)


def model_bytes(model) -> int:
    """Bytes of the model's parameters and buffers, each shared tensor counted once."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        key = (t.untyped_storage().data_ptr(), t.dtype)
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total
