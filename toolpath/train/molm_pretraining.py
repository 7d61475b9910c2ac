"""Pretraining the tiny graph-LM's encoder on next-atom prediction over RDKit's bundled NCI molecules (the
training split; the held-out split measures it): the causal encoder and its head learn which element comes next
in canonical SMILES order, and that prediction's entropy is what the patcher later cuts at."""

from __future__ import annotations

import random
import time
from dataclasses import asdict
from pathlib import Path

from ..policies.molm import encoder as me
from ..policies.molm import graphs as mg
from .connector_training import warmup_cosine
from .steps import optimizer_step


def pretrain(encoder, head, train: list[mg.MolGraph], heldout: list[mg.MolGraph], *, steps: int, batch: int,
             lr: float, seed: int, progress=None) -> dict:
    """Next-atom prediction over `train`; returns the loss and accuracy on `heldout` with the training figures."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    params = list(encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    sched = warmup_cosine(opt, steps)
    rng = random.Random(seed)
    start, losses = time.monotonic(), []
    encoder.train(), head.train()
    for _step in range(steps):
        graphs = [train[rng.randrange(len(train))] for _ in range(batch)]
        loss = F.cross_entropy(me.next_atom_logits(encoder, head, graphs), me.next_atom_targets(graphs))
        optimizer_step(loss, opt, sched, losses, progress)
    encoder.eval(), head.eval()
    return {"steps": steps, "batch": batch, "size": asdict(encoder.size),
            "final_loss": float(np.mean(losses[-20:])) if losses else None,
            "heldout": next_atom_scores(encoder, head, heldout), "seconds": round(time.monotonic() - start, 1)}


def next_atom_scores(encoder, head, graphs: list[mg.MolGraph], chunk: int = 256) -> dict:
    """Cross-entropy (nats) and accuracy of the next-atom predictions over `graphs`, and the same accuracy of
    always guessing the most common class (the baseline)."""
    import torch
    import torch.nn.functional as F

    total, right, atoms, counts = 0.0, 0, 0, torch.zeros(me.CLASSES)
    with torch.no_grad():
        for i in range(0, len(graphs), chunk):
            part = graphs[i:i + chunk]
            logits, target = me.next_atom_logits(encoder, head, part), me.next_atom_targets(part)
            total += float(F.cross_entropy(logits, target, reduction="sum"))
            right += int((logits.argmax(-1) == target).sum())
            atoms += len(target)
            counts += torch.bincount(target, minlength=me.CLASSES)
    n = max(atoms, 1)
    return {"molecules": len(graphs), "atoms": atoms, "loss": round(total / n, 4), "accuracy": round(right / n, 4),
            "majority_accuracy": round(float(counts.max()) / n, 4)}


def pretrained(cfg, seed: int, train: list, heldout: list, cache: Path | None = None):
    """The encoder and head pretrained as the build's config `cfg` says, and their held-out scores. `cache`: a file
    that holds them (read when it exists, written when not), so a second run skips the same pretraining."""
    import torch

    encoder, head = me.build_encoder(cfg.encoder, seed)
    if cache is not None and cache.exists():
        state = torch.load(cache, weights_only=True)
        try:
            encoder.load_state_dict(state["encoder"]), head.load_state_dict(state["head"])
        except (KeyError, RuntimeError) as err:
            raise ValueError(f"{cache}: not an encoder of this configuration ({err})") from None
        encoder.eval(), head.eval()
        return encoder, head, next_atom_scores(encoder, head, heldout)
    enc = pretrain(encoder, head, train, heldout, steps=cfg.pretrain_steps, batch=cfg.pretrain_batch,
                   lr=cfg.pretrain_lr, seed=seed)
    if cache is not None:
        torch.save({"encoder": encoder.state_dict(), "head": head.state_dict(), "pretrain_steps": cfg.pretrain_steps,
                    "seed": seed}, cache)
    return encoder, head, enc["heldout"]
