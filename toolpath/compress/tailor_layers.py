"""Assembling a tailored model from decoder layers of several candidates, and measuring one.

A plan says, for every decoder layer of the base model, whether it is kept and, if kept, how it is made:
    weights = base + Σ_k merge[k] · (candidate_k − base)          (task arithmetic; merge[k] in [0, 1])
and its output scale s. The output scale is applied, not only searched: it multiplies the layer's attention
output projection (o_proj) and its MLP down projection (down_proj), i.e. both residual branches of the layer:
    h' = h + s·attn(h),   out = h' + s·mlp(h').
s = 1 leaves the layer as it was, s = 0 makes it the identity, and the written model stays a plain
transformers model (the scale lives in the weights). Everything outside the decoder layers (embeddings, final
norm, head) comes from the base model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .tailor_data import Example

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
OUTPUT_PROJECTIONS = ("o_proj", "down_proj")


@dataclass
class Plan:
    keep: list[int]                                   # kept base layer indices, in order
    merge: dict[int, list[float]] = field(default_factory=dict)   # layer -> one scale per fine-tuned candidate
    scale: dict[int, float] = field(default_factory=dict)         # layer -> output scale

    def describe(self, names: list[str]) -> list[dict]:
        """Per kept layer: its source candidate (or 'merge'), merge scales and output scale."""
        rows = []
        for i in self.keep:
            m = self.merge.get(i, [0.0] * (len(names) - 1))
            ones = [k for k, v in enumerate(m) if v == 1.0]
            if all(v == 0.0 for v in m):
                source = names[0]
            elif len(ones) == 1 and sum(m) == 1.0:
                source = names[ones[0] + 1]
            else:
                source = "merge"
            rows.append({"layer": i, "source": source, "merge": {names[k + 1]: round(v, 4) for k, v in enumerate(m)},
                         "output_scale": round(self.scale.get(i, 1.0), 4)})
        return rows


def decoder_layers(model) -> Any:
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no model.layers: tailoring needs a decoder-only transformers "
                         "model (Llama, Qwen2, Gemma3, ...)")
    return layers


def layer_params(model) -> dict[int, dict[str, Any]]:
    """{layer index: {parameter name inside the layer: tensor}} for the decoder layers."""
    out: dict[int, dict[str, Any]] = {}
    for name, tensor in model.state_dict().items():
        m = _LAYER.match(name)
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = tensor
    return out


class Composer:
    """Builds the state dict of a plan from the base model and its task vectors (candidate − base), kept once."""

    def __init__(self, base, candidates: list):
        import torch

        self.base = base
        self.base_layers = layer_params(base)
        self.shared = {k: v for k, v in base.state_dict().items() if not _LAYER.match(k)}
        self.tasks: list[dict[int, dict[str, Any]]] = []
        for n, cand in enumerate(candidates):
            layers = layer_params(cand)
            if set(layers) != set(self.base_layers):
                raise ValueError(f"candidate {n + 1} has {len(layers)} decoder layers, the base model "
                                 f"{len(self.base_layers)}: candidates must be fine-tunes of the base model")
            with torch.no_grad():
                task = {}
                for i, params in self.base_layers.items():
                    task[i] = {}
                    for k, v in params.items():
                        if k not in layers[i] or layers[i][k].shape != v.shape:
                            raise ValueError(f"candidate {n + 1}: layer {i} parameter {k} does not match the base")
                        task[i][k] = layers[i][k].float() - v.float()
            self.tasks.append(task)

    @property
    def n_layers(self) -> int:
        return len(self.base_layers)

    def layer(self, i: int, merge: list[float], scale: float) -> dict[str, Any]:
        """The weights of base layer `i` merged by `merge` (one per candidate) and scaled by `scale`."""
        import torch

        out = {}
        with torch.no_grad():
            for k, v in self.base_layers[i].items():
                w = v.float().clone()
                for lam, task in zip(merge, self.tasks):
                    if lam:
                        w.add_(task[i][k], alpha=float(lam))
                if scale != 1.0 and any(f"{p}." in k for p in OUTPUT_PROJECTIONS):
                    w.mul_(float(scale))
                out[k] = w.to(v.dtype)
        return out

    def state_dict(self, plan: Plan) -> dict[str, Any]:
        n_cand = len(self.tasks)
        sd = dict(self.shared)
        for new, i in enumerate(plan.keep):
            merge = plan.merge.get(i, [0.0] * n_cand)
            if len(merge) != n_cand:
                raise ValueError(f"plan: layer {i} has {len(merge)} merge scales for {n_cand} candidates")
            for k, v in self.layer(i, merge, plan.scale.get(i, 1.0)).items():
                sd[f"model.layers.{new}.{k}"] = v
        return sd

    def config(self, plan: Plan):
        """The base config with the kept layers' count (and per-layer settings such as layer_types subset)."""
        import copy

        cfg = copy.deepcopy(self.base.config)
        n = cfg.num_hidden_layers
        for key, value in list(vars(cfg).items()):
            if isinstance(value, (list, tuple)) and len(value) == n and key.startswith("layer"):
                setattr(cfg, key, [value[i] for i in plan.keep])
        cfg.num_hidden_layers = len(plan.keep)
        return cfg


class Workbench:
    """One model per layer count, reused across a search: each plan is loaded into it in place."""

    def __init__(self, composer: Composer):
        self.composer = composer
        self._models: dict[tuple, Any] = {}

    def model(self, plan: Plan):
        from transformers import AutoModelForCausalLM

        cfg = self.composer.config(plan)
        key = (cfg.num_hidden_layers, repr(getattr(cfg, "layer_types", None)))
        if key not in self._models:
            self._models = {}  # one at a time: a model of the 135M base is half a gigabyte
            shell = AutoModelForCausalLM.from_config(cfg, dtype=self.composer.base.dtype)
            shell.eval()
            self._models[key] = shell
        model = self._models[key]
        model.load_state_dict(self.composer.state_dict(plan), strict=False)
        if getattr(model.config, "tie_word_embeddings", False):
            model.tie_weights()
        _rotary_buffers(model, self.composer.base)
        return model


def _rotary_buffers(model, base) -> None:
    # Buffers outside the state dict (rotary inverse frequencies) follow the base model's, whatever init did.
    base_buffers = dict(base.named_buffers())
    for name, buf in model.named_buffers():
        if name in base_buffers and base_buffers[name].shape == buf.shape:
            buf.copy_(base_buffers[name])


def evaluate(model, english: list[Example], transcripts: list[Example]) -> dict[str, float]:
    """Perplexity on the English blocks and next-token accuracy on the transcripts' assistant tokens."""
    import torch

    nll, count = 0.0, 0
    with torch.inference_mode():
        for ex in english:
            logits = model(ex.ids).logits[0, :-1].float()
            nll += torch.nn.functional.cross_entropy(logits, ex.ids[0, 1:], reduction="sum").item()
            count += ex.ids.shape[1] - 1
        hits, total = _transcript_hits(model, transcripts)
    ppl = math.exp(nll / count) if count else float("nan")
    return {"ppl": ppl if math.isfinite(ppl) else float("inf"), "acc": hits / total if total else 0.0}


def prefix_cache(model, examples: list[Example]):
    """(start, cache): the examples' shared prefix run once, its cache repeated for the batch; (0, None) when
    they share too little for it to pay."""
    from .tailor_data import shared_prefix

    start = shared_prefix(examples)
    if not start:
        return 0, None
    cache = model(examples[0].ids[:, :start], use_cache=True).cache
    cache.batch_repeat_interleave(len(examples))
    return start, cache


def _transcript_hits(model, transcripts: list[Example]) -> tuple[int, int]:
    """Next-token hits and count on the transcripts' scored tokens, in one batch after their shared prefix."""
    from .tailor_data import suffix_batch

    if not transcripts:
        return 0, 0
    start, cache = prefix_cache(model, transcripts)
    ids, scored = suffix_batch(transcripts, start, pad=0)
    logits = model(ids, cache=cache).logits if cache is not None else model(ids).logits
    hits = total = 0
    for j, pos in enumerate(scored):
        pred = logits[j, pos - 1].argmax(-1)
        hits += int((pred == ids[j, pos]).sum())
        total += int(pos.numel())
    return hits, total


def share(metrics: dict[str, float], base: dict[str, float], weights: dict[str, float]) -> float:
    """The share of the base model's score kept: w_ppl · ppl_base/ppl + w_acc · acc/acc_base, over Σw.
    1.0 is the base model; a model better than the base on either part can go above 1."""
    ppl_part = base["ppl"] / metrics["ppl"] if metrics["ppl"] > 0 else 0.0
    acc_part = metrics["acc"] / base["acc"] if base["acc"] > 0 else 0.0
    total = weights.get("ppl", 0.0) + weights.get("acc", 0.0)
    return (weights.get("ppl", 0.0) * ppl_part + weights.get("acc", 0.0) * acc_part) / total


def hidden_states(model, examples: list[Example]) -> list[list[Any]]:
    """Per example: the residual stream before layer 0 and after every decoder layer (no final norm)."""
    import torch

    layers = decoder_layers(model)
    states: list[Any] = []

    def grab(_module, _args, output):
        states.append((output[0] if isinstance(output, tuple) else output).detach().float())

    def grab_input(_module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        states.append(h.detach().float())

    hooks = [layers[0].register_forward_pre_hook(grab_input, with_kwargs=True)]
    hooks += [layer.register_forward_hook(grab) for layer in layers]
    out = []
    try:
        with torch.inference_mode():
            for ex in examples:
                states = []
                model(ex.ids)
                out.append(states)
    finally:
        for h in hooks:
            h.remove()
    return out


def _cosine(a, b):
    import torch

    return torch.nn.functional.cosine_similarity(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), dim=-1)


def block_influence(model, examples: list[Example]) -> list[float]:
    """ShortGPT's block influence of every layer: 1 − mean cosine(input, output) over the tokens."""
    states = hidden_states(model, examples)
    n = len(decoder_layers(model))
    return [float(sum((1 - _cosine(s[i], s[i + 1])).mean() for s in states) / len(states)) for i in range(n)]


def angular_block(model, examples: list[Example], n_remove: int) -> list[int]:
    """The `n_remove` consecutive layers whose input and output are closest in angular distance (Gromov et al.)."""
    import torch

    states = hidden_states(model, examples)
    n = len(decoder_layers(model))
    best, start = float("inf"), 0
    for first in range(n - n_remove + 1):
        cos = sum(_cosine(s[first], s[first + n_remove]).clamp(-1, 1).mean() for s in states) / len(states)
        d = float(torch.arccos(torch.as_tensor(cos)) / math.pi)
        if d < best:
            best, start = d, first
    return list(range(start, start + n_remove))
