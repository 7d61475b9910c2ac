"""Where the weights GPTQ quantizes live in a decoder layer, in both Mixtral layouts, and their Hessians.

transformers 5.x fuses Mixtral's experts into 3-D tensors: `mlp.experts.gate_up_proj [E, 2I, H]` (gate rows
first, then up), `mlp.experts.down_proj [E, H, I]`, router `mlp.gate.weight [E, H]`. Older checkpoints and
custom models keep one module per expert: `block_sparse_moe.experts.{e}.w1/w3 [I, H]`, `w2 [H, I]`, router
`block_sparse_moe.gate` (a Linear); a dense model upcycled here (upcycle.py) keeps copies of its Llama/Qwen MLPs,
`mlp.experts.{e}.gate_proj/up_proj [I, H]`, `down_proj [H, I]`, router `mlp.gate`. All are read here; everything
else is a plain nn.Linear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

from .hessian import Hessian

_ROUTER_NAMES = ("gate", "router")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")


def is_fused_experts(module: nn.Module) -> bool:
    gu, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    return isinstance(gu, torch.Tensor) and isinstance(down, torch.Tensor) and gu.dim() == 3


def decoder_layers(model) -> list:
    """The decoder layers of a causal LM, in order (model.model.layers, or model.layers)."""
    inner = getattr(model, "model", model)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no decoder layers at model.layers: not a causal LM of the "
                         f"Llama/Qwen/Mixtral family")
    return list(layers)


def _param_names(model) -> dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


def layer_targets(model, layer) -> list[tuple[str, torch.Tensor, int | None]]:
    """(state-dict name, weight, number of experts for a fused 3-D weight else None) of every weight to quantize
    in `layer`: its linears except the router, and fused experts' two tensors."""
    names = _param_names(model)
    out = []
    for mname, module in layer.named_modules():
        if isinstance(module, nn.Linear) and mname.rpartition(".")[2] not in _ROUTER_NAMES:
            out.append((names[id(module.weight)], module.weight, None))
        elif is_fused_experts(module):
            for p in (module.gate_up_proj, module.down_proj):
                out.append((names[id(p)], p, p.shape[0]))
    return out


def expert_of(name: str, expert: int | None) -> int | None:
    """The expert a weight belongs to: the fused slice index, or `experts.{e}.` in a per-expert module's name."""
    if expert is not None:
        return expert
    m = _EXPERT.search(name)
    return int(m.group(1)) if m else None


class HessianHooks:
    """Forward hooks that accumulate each target's input Hessian while a layer runs. A fused experts module gets
    one Hessian per expert: its gate_up input is the hidden states of the tokens routed to that expert, its down
    input the activations act(gate) * up those tokens produce."""

    def __init__(self, model, layer, targets):
        self.hessians: dict[tuple[str, int | None], Hessian] = {}
        self.handles = []
        by_param = {id(p): (name, experts) for name, p, experts in targets}
        for _, module in layer.named_modules():
            if isinstance(module, nn.Linear) and id(module.weight) in by_param:
                name = by_param[id(module.weight)][0]
                self.handles.append(module.register_forward_hook(self._linear_hook(name)))
            elif is_fused_experts(module) and id(module.gate_up_proj) in by_param:
                self.handles.append(module.register_forward_pre_hook(
                    self._experts_hook(module, by_param[id(module.gate_up_proj)][0],
                                       by_param[id(module.down_proj)][0])))

    def _add(self, key, x):
        if key not in self.hessians:
            self.hessians[key] = Hessian(x.shape[-1])
        self.hessians[key].add(x)

    def _linear_hook(self, name):
        def hook(module, args, output):
            self._add((name, None), args[0])
        return hook

    def _experts_hook(self, module, gate_up_name, down_name):
        def hook(mod, args):
            hidden, top_k_index = args[0], args[1]
            hidden = hidden.reshape(-1, hidden.shape[-1])
            for e in range(module.gate_up_proj.shape[0]):
                x = hidden[(top_k_index == e).any(dim=-1)]
                self._add((gate_up_name, e), x)
                gate, up = nn.functional.linear(x, module.gate_up_proj[e]).chunk(2, dim=-1)
                self._add((down_name, e), module.act_fn(gate) * up)
        return hook

    def hessian(self, name: str, expert: int | None) -> torch.Tensor:
        h = self.hessians.get((name, expert))
        if h is None:  # never reached (an expert no calibration token was routed to): GPTQ falls back to RTN
            return torch.zeros(1, 1)
        return h.h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


@dataclass
class MoEBlock:
    """One MoE layer's router and experts, whichever the layout."""

    layer: int
    router_name: str
    router: torch.Tensor  # [E, H]
    w1: list[torch.Tensor]  # each expert's gate projection [I, H] (the reference's variance reads it)


def moe_blocks(model) -> list[MoEBlock]:
    """Every MoE layer of `model`, in order; an empty list for a dense model."""
    names = _param_names(model)
    blocks = []
    for index, layer in enumerate(decoder_layers(model)):
        for _, module in layer.named_modules():
            gate = getattr(module, "gate", None)
            experts = getattr(module, "experts", None)
            if gate is None or experts is None or not isinstance(getattr(gate, "weight", None), torch.Tensor):
                continue
            if is_fused_experts(experts):
                inter = experts.gate_up_proj.shape[1] // 2
                w1 = [experts.gate_up_proj.data[e, :inter] for e in range(experts.gate_up_proj.shape[0])]
            elif isinstance(experts, nn.ModuleList) and all(hasattr(x, "w1") for x in experts):
                w1 = [x.w1.weight.data for x in experts]
            elif isinstance(experts, nn.ModuleList) and all(hasattr(x, "gate_proj") for x in experts):
                w1 = [x.gate_proj.weight.data for x in experts]
            else:
                continue
            blocks.append(MoEBlock(index, names[id(gate.weight)], gate.weight.data, w1))
            break
    return blocks
