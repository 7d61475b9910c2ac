"""Sparse upcycling (Komatsuzaki et al., "Sparse Upcycling", ICLR 2023): a dense model's MLPs become the experts
of MoE layers, and a short training teaches the new routers, so the MoE method has a pretrained-then-upcycled
model to work on (the way many released MoEs were made) besides the tiny one trained from scratch.

Qwen2.5-Coder-0.5B (`local:qwen2.5-coder-0.5b`) has 24 layers of 4,864-wide MLPs; eight full copies in every
layer would be about 2.5 B float32 parameters, more than this machine can train. So only the last `layers`
decoder layers are upcycled: each one's MLP is copied into `experts` experts (plus a little Gaussian noise, so the
copies are not exactly alike), under a new router (a bias-free linear, normal at std 0.02 as Mixtral initialises
it) with Mixtral's routing: softmax over the experts, the top-k kept and renormalised. With identical copies the
upcycled layer computes the dense MLP exactly, whatever the router says; the noise and the training make the
experts, and so the routing, matter. Training updates only the upcycled layers' routers and experts, on the
language-model loss plus the Switch load-balancing loss, over the calibration part of `pydoc_data.topics`;
everything else stays frozen, so the backward pass reaches back only to the first upcycled layer.

The folder keeps what differs from the source model (the upcycled layers' weights), the routers as they were at
initialisation (router_init.safetensors, what the bit allocation reads) and training.json; `load` rebuilds the
model from the source and those weights.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

SOURCE = "local:qwen2.5-coder-0.5b"
FOLDER = "qwen2.5-coder-0.5b-upcycled"
ROUTER_STD = 0.02


class UpcycledMoE(nn.Module):
    """A dense MLP copied into `experts` experts under a router `gate`; the last forward's router logits are kept
    (`router_logits`) for the load-balancing loss and for reading which experts the tokens went to."""

    def __init__(self, mlp: nn.Module, hidden: int, experts: int = 8, top_k: int = 2):
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k {top_k}: expected 1 to the number of experts ({experts})")
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(copy.deepcopy(mlp) for _ in range(experts))
        self.router_logits: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        h = x.reshape(-1, shape[-1])
        logits = self.gate(h)
        self.router_logits = logits
        weights, chosen = torch.topk(torch.softmax(logits.float(), dim=-1), self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(h.dtype)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):  # each expert sees only its tokens (per-expert GPTQ Hessians)
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel():
                out = out.index_add(0, rows, expert(h[rows]) * weights[rows, slot, None])
        return out.reshape(shape)


def upcycled_layers(model, count: int) -> list[int]:
    """The indices of the last `count` decoder layers."""
    from .moe_layout import decoder_layers

    total = len(decoder_layers(model))
    if not 1 <= count <= total:
        raise ValueError(f"layers {count}: the model has {total} decoder layers")
    return list(range(total - count, total))


def upcycle(model, layers: list[int], experts: int = 8, top_k: int = 2, noise: float = 0.01,
            seed: int = 0) -> dict[str, torch.Tensor]:
    """Replace the MLP of each of `layers` with an UpcycledMoE, in place. `noise`: each expert weight gets Gaussian
    noise of `noise` × that weight matrix's standard deviation. Returns the routers as initialised, by name."""
    from .moe_layout import decoder_layers

    gen = torch.Generator().manual_seed(seed)
    hidden = model.config.hidden_size
    decoder = decoder_layers(model)
    for index in layers:
        layer = decoder[index]
        moe = UpcycledMoE(layer.mlp, hidden, experts, top_k)
        with torch.no_grad():
            moe.gate.weight.copy_(torch.randn(moe.gate.weight.shape, generator=gen) * ROUTER_STD)
            if noise:
                for p in moe.experts.parameters():
                    p.add_(torch.randn(p.shape, generator=gen) * (noise * float(p.std())))
        layer.mlp = moe
    return {name: p.detach().clone() for name, p in model.named_parameters() if name.endswith("mlp.gate.weight")}


def moe_modules(model) -> list[UpcycledMoE]:
    return [m for m in model.modules() if isinstance(m, UpcycledMoE)]


def load_balancing_loss(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss: experts × Σ_e (share of routed slots to e) × (mean router prob of e);
    1 when the routing is uniform."""
    experts = logits.shape[-1]
    probs = torch.softmax(logits.float(), dim=-1)
    chosen = torch.topk(probs, top_k, dim=-1).indices
    share = torch.bincount(chosen.reshape(-1), minlength=experts).float() / chosen.numel()
    return experts * torch.sum(share * probs.mean(dim=0))


def _upcycled_state(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().contiguous() for name, p in model.named_parameters() if ".mlp.gate." in name
            or ".mlp.experts." in name}


def train(out: Path, *, layers: int = 2, experts: int = 8, top_k: int = 2, noise: float = 0.01, steps: int = 60,
          batch: int = 2, seqlen: int = 128, router_lr: float = 1e-3, expert_lr: float = 2e-5, aux: float = 0.01,
          seed: int = 0, threads: int = 1, log: Callable[[str], None] = print) -> dict:
    """Upcycle the source model, train the new layers, and write the folder `out`; returns training.json's data."""
    from safetensors.torch import save_file

    from ..pydoc_text import split_text
    from .source import load_source

    started = time.perf_counter()
    torch.manual_seed(seed)
    model, tokenizer = load_source(SOURCE)
    torch.set_num_threads(threads)  # after loading: the loader sets every core, and on shared cores one is faster
    which = upcycled_layers(model, layers)
    init = upcycle(model, which, experts, top_k, noise, seed)
    for p in model.parameters():
        p.requires_grad_(False)
    routers = [p for n, p in model.named_parameters() if n.endswith("mlp.gate.weight")]
    expert_params = [p for n, p in model.named_parameters() if ".mlp.experts." in n]
    for p in (*routers, *expert_params):
        p.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": routers, "lr": router_lr}, {"params": expert_params, "lr": expert_lr}],
                            betas=(0.9, 0.95), weight_decay=0.0)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(  # linear warm-up, then cosine down to a tenth
        opt, lambda s: (s + 1) / warmup if s < warmup else
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, steps - warmup))))
    ids = tokenizer(split_text()[0], return_tensors="pt")["input_ids"][0]
    gen = torch.Generator().manual_seed(seed)
    blocks = moe_modules(model)
    model.train()
    lm_losses, aux_losses = [], []
    for step in range(steps):
        starts = torch.randint(0, len(ids) - seqlen - 1, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seqlen] for s in starts.tolist()])
        lm = model(input_ids=x, labels=x, use_cache=False).loss
        balance = torch.stack([load_balancing_loss(b.router_logits, top_k) for b in blocks]).mean()
        opt.zero_grad(set_to_none=True)
        (lm + aux * balance).backward()
        torch.nn.utils.clip_grad_norm_([*routers, *expert_params], 1.0)
        opt.step()
        sched.step()
        lm_losses.append(float(lm.detach()))
        aux_losses.append(float(balance.detach()))
        if step % 10 == 0 or step == steps - 1:
            recent = lm_losses[-20:]
            log(f"upcycle: step {step + 1}/{steps} loss {sum(recent) / len(recent):.3f} balance "
                f"{aux_losses[-1]:.3f} ({time.perf_counter() - started:.0f} s)")
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    save_file(_upcycled_state(model), str(out / "upcycled.safetensors"))
    save_file(init, str(out / "router_init.safetensors"))
    info = {"source": SOURCE, "layers": which, "experts": experts, "top_k": top_k, "noise": noise, "steps": steps,
            "batch": batch, "seqlen": seqlen, "router_lr": router_lr, "expert_lr": expert_lr, "aux": aux,
            "seed": seed, "threads": threads, "tokens_seen": steps * batch * seqlen,
            "first_loss": sum(lm_losses[:10]) / len(lm_losses[:10]),
            "final_loss": sum(lm_losses[-20:]) / len(lm_losses[-20:]), "final_balance": aux_losses[-1],
            "seconds": round(time.perf_counter() - started, 1),
            "data": "pydoc_data.topics, sorted keys, first 80 % (the calibration part)"}
    (out / "training.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return info


def load(folder: Path):
    """(model, tokenizer, routers at initialisation by layer) of a folder `train` wrote."""
    from safetensors.torch import load_file

    from .moe_bits import read_router_init
    from .source import load_source

    info_path = folder / "training.json"
    if not info_path.is_file():
        raise ValueError(f"{folder}: not an upcycled model folder (no training.json)")
    info = json.loads(info_path.read_text(encoding="utf-8"))
    model, tokenizer = load_source(info["source"])
    upcycle(model, info["layers"], info["experts"], info["top_k"], noise=0.0)
    state = load_file(str(folder / "upcycled.safetensors"))
    expected = set(_upcycled_state(model))
    if set(state) != expected:
        raise ValueError(f"{folder}/upcycled.safetensors does not hold the upcycled layers' weights "
                         f"({len(state)} tensors, {len(expected)} expected)")
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, tensor in state.items():
            params[name].copy_(tensor)
    return model.eval(), tokenizer, read_router_init(folder / "router_init.safetensors")
