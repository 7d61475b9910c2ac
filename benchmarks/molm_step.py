"""What one connector training step of the tiny graph-LM costs, the way it was (dialogs padded to the longest in
the batch, AdamW's foreach path, glibc handing large freed blocks back to the system) against the way it is
(dialogs packed end to end, fused AdamW, freed memory kept for reuse: toolpath/train/connector_training.py), on
the same batches of the build's configuration with SmolLM2-135M-Instruct.

    python benchmarks/molm_step.py [--steps N] [--molecules M] [--json]

Both ways train the same fresh connector (a randomly initialised encoder: its states' values do not change the
step's cost) from the same seed; the baseline runs first, because keeping freed memory cannot be undone in a
process. Reported: seconds per step of each way (after one warm-up step), their ratio, the tokens the LM runs
per step each way, and the first batch's loss each way (the same to rounding: packing changes no result).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def measure(model, train, facts, *, packed: bool, steps: int, seed: int) -> dict:
    import torch

    from toolpath.evals.benchmarks import molqa_data as qa
    from toolpath.train import connector_training as ct
    from toolpath.train.heap import reuse_freed_memory

    cfg_batch, max_turns = 8, 3
    states, patch_ids = model.prepare(train)
    per_graph = torch.split(states, [g.size for g in train])
    ct.freeze(model.lm)
    embed = model.lm.get_input_embeddings()
    groups = [{"params": ct.trainable(embed.parameters()), "lr": 2e-5},
              {"params": ct.trainable(model.connector.parameters()), "lr": 1e-3}]
    if packed:
        reuse_freed_memory()
    opt = torch.optim.AdamW(groups, weight_decay=0.0, fused=packed)
    lm = ct.ChatLM(embed, model.lm.model, model.lm.lm_head)
    rng = random.Random(seed)
    times, tokens, losses = [], [], []
    model.connector.train(), model.lm.train()
    for _ in range(steps + 1):
        idx = [rng.randrange(len(train)) for _ in range(cfg_batch)]
        enc = [ct.encode_dialog(model.tokenizer, [(q.text, q.answer) for q in
                                                  qa.pick(rng, list(facts[i]), rng.randint(1, max_turns))],
                                model.connector.tokens(patch_ids[i]), placeholder=model.config.placeholder,
                                item="graph") for i in idx]
        start = time.perf_counter()
        if packed:
            ids, labels, positions = ct.pack(enc)
            mask = None
        else:
            (ids, labels, mask), positions = ct.collate(enc, model.tokenizer.pad_token_id), None
        vectors = model.connector(torch.cat([per_graph[i] for i in idx]), [train[i].size for i in idx],
                                  [patch_ids[i] for i in idx])
        loss, _ = ct.answer_loss(lm, ids, labels, mask, model.placeholder_id, vectors, positions)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        tokens.append(int(ids.numel()))
        losses.append(float(loss.detach()))
    return {"seconds_per_step": round(sum(times[1:]) / steps, 3), "lm_tokens_per_step": sum(tokens[1:]) / steps,
            "first_loss": round(losses[0], 5)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps of each way (after one warm-up)")
    ap.add_argument("--molecules", type=int, default=600, help="NCI molecules the batches are drawn from")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.steps < 1 or args.molecules < 20:
        ap.error("--steps must be at least 1 and --molecules at least 20")
    import os

    import torch

    from toolpath.policies.molm import encoder as me
    from toolpath.train import tiny_molm as tm
    from toolpath.train.tiny_vlm import default_lm_folder

    cfg = dataclasses.replace(tm.BuildConfig(), molecules=args.molecules)
    torch.set_num_threads(cfg.threads)
    train, _, facts, _ = tm.data(cfg, args.seed)
    lm_folder = default_lm_folder()
    out = {}
    for way, packed in (("padded", False), ("packed", True)):  # the baseline first: see the docstring
        encoder, head = me.build_encoder(cfg.encoder, args.seed)
        model = tm.assemble(cfg, "dynamic", encoder, head, lm_folder, args.seed)
        out[way] = measure(model, train, facts, packed=packed, steps=args.steps, seed=args.seed)
        del model
    out["speedup"] = round(out["padded"]["seconds_per_step"] / out["packed"]["seconds_per_step"], 2)
    out |= {"steps": args.steps, "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for way in ("padded", "packed"):
            f = out[way]
            print(f"{way}: {f['seconds_per_step']} s a step, {f['lm_tokens_per_step']} LM tokens, "
                  f"first loss {f['first_loss']}")
        print(f"packed is x{out['speedup']} as fast; load average {out['load_average']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
