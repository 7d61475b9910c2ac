"""Expert-wise bit allocation (moe-bits) on Qwen2.5-Coder-0.5B sparse-upcycled into a MoE, against uniform,
random, reversed and usage-ordered allocations at equal average bits.

    python benchmarks/upcycle_moe.py [--json] [--averages 2.0,2.25,2.5] [--seeds 3] [--windows 8]
                                     [--steps 60] [--model DIR]

The model of toolpath/compress/upcycle.py (upcycled and trained first if its folder is missing): the last
2 decoder layers' MLPs copied into 8 experts each, top-2, after a short training of those layers. One run
measures held-out perplexity (the last 20 % of pydoc_data.topics, windows of 256 tokens) for fp32 and, at each
average, every expert quantized with GPTQ at its bits from
  paper     the router-norm-change order with the max-variance adjustment (toolpath compress --method moe-bits)
  reversed  the paper's order backwards
  usage     the experts by the share of calibration tokens routed to them, busiest first (a reference order)
  random    the same counts per level, experts shuffled (N seeds: mean, min, max)
and uniform GPTQ at 2 and 3 bits. Levels 1/2/3 bits, group size 128; only the experts are quantized (attention
and the 22 dense layers stay in float), so the rows differ in nothing but which expert gets which bits.

Two shortcuts keep it within a CPU's reach, neither changes what is compared: the dense layers before the first
upcycled one are the same float layers in every row, so their outputs are computed once and the rows run only
the upcycled tail; and each expert is quantized once at each level from the float model's Hessians (GPTQ with
Hessians from the float tail, not the partly quantized one), so a row only picks, per expert, which of the three
quantized copies it uses. Also reported per layer: the Spearman correlation between each expert's router-norm
change and its share of routed calibration tokens (positive on the tiny MoE trained from scratch, which is why
the paper's order lost there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

from toolpath.compress.gptq import _first_layer_inputs, gptq_quantize
from toolpath.compress.moe_bits import allocate, bits_by_rank, solve_three_level_counts
from toolpath.compress.moe_layout import HessianHooks, decoder_layers, layer_targets, moe_blocks
from toolpath.compress.text import calibration_batches
from toolpath.compress.upcycle import FOLDER, load, moe_modules, train
from toolpath.paths import models_dir
from toolpath.policies.packed_weights import Quantized
from toolpath.pydoc_text import split_text

LEVELS = (1, 2, 3)
WINDOW = 256


def ensure(folder: Path | None, steps: int, log) -> Path:
    """The upcycled model's folder, trained first when it is missing."""
    folder = folder or models_dir() / FOLDER
    if not (folder / "training.json").is_file():
        train(folder, steps=steps, log=log)
    return folder


class Tail:
    """The upcycled layers and the head, run from the cached inputs of the first upcycled layer."""

    def __init__(self, model, first: int):
        self.model = model
        self.layers = decoder_layers(model)[first:]
        self.first = first

    def run(self, inputs, layers=None):
        outs = []
        with torch.inference_mode():
            for x, kw in inputs:
                for layer in layers or self.layers:
                    y = layer(x, **kw)
                    x = y[0] if isinstance(y, tuple) else y
                outs.append(x)
        return outs

    def perplexity(self, inputs, ids: torch.Tensor, chunk: int) -> float:
        total, count = 0.0, 0
        with torch.inference_mode():
            for i, h in enumerate(self.run(inputs)):
                logits = self.model.lm_head(self.model.model.norm(h)).float()
                labels = ids[i * chunk:(i + 1) * chunk]
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                         labels[:, 1:].reshape(-1), reduction="sum")
                total += float(loss)
                count += labels[:, 1:].numel()
        return float(torch.exp(torch.tensor(total / count)))


def routed_share(tail: Tail, calib_inputs) -> dict[int, list[float]]:
    """Per upcycled layer, the share of top-k slots of the calibration tokens each expert got (float model)."""
    blocks = moe_modules(tail.model)
    counts = [torch.zeros(len(b.experts)) for b in blocks]
    for inp in calib_inputs:
        tail.run([inp])
        for c, b in zip(counts, blocks):
            chosen = torch.topk(b.router_logits, b.top_k, dim=-1).indices.reshape(-1)
            c += torch.bincount(chosen, minlength=len(b.experts)).float()
    return {tail.first + i: (c / c.sum()).tolist() for i, c in enumerate(counts)}


def quantized_bank(tail: Tail, calib_inputs, log) -> dict[str, dict[int, Quantized]]:
    """{expert weight name: {bits: codes}}: every expert weight GPTQ-quantized at each level from the float
    tail's Hessians, layer by layer (kept as codes: a quarter of the memory of float copies)."""
    bank: dict[str, dict[int, Quantized]] = {}
    inputs = calib_inputs
    for layer in tail.layers:
        targets = [t for t in layer_targets(tail.model, layer) if ".experts." in t[0]]
        with HessianHooks(tail.model, layer, targets) as hooks:
            outs = tail.run(inputs, [layer])
            for name, param, _ in targets:
                h = hooks.hessians.get((name, None))
                # an expert no calibration token reached has no Hessian: a zero one makes GPTQ fall back to RTN
                h = h.h if h is not None else torch.zeros(param.shape[1], param.shape[1])
                bank[name] = {b: gptq_quantize(param.data, h, b) for b in LEVELS}
        inputs = [(y, kw) for y, (_, kw) in zip(outs, inputs)]
        log(f"quantized {len(targets)} expert weights of a layer at {LEVELS} bits")
    return bank


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--averages", default="2.0,2.25,2.5")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nsamples", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--windows", type=int, default=8, help=f"held-out windows of {WINDOW} tokens (default 8)")
    ap.add_argument("--steps", type=int, default=60, help="training steps when the model is made (default 60)")
    ap.add_argument("--model", type=Path, help=f"an upcycled model folder (default $TOOLPATH_HOME/models/{FOLDER})")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.windows < 1 or args.seeds < 1:
        ap.error("--windows and --seeds must be at least 1")
    torch.set_num_threads(args.threads)
    averages = [float(a) for a in args.averages.split(",")]

    def say(s):
        print(s, file=sys.stderr, flush=True)

    started = time.perf_counter()
    folder = ensure(args.model, args.steps, say)
    model, tok, init = load(folder)
    torch.set_num_threads(args.threads)  # again: the loader sets every core (GPTQ's many small steps crawl then)
    first = min(init)
    tail = Tail(model, first)
    chunk = 2
    held = tok(split_text()[1], return_tensors="pt")["input_ids"][0]
    if len(held) < args.windows * WINDOW:
        ap.error(f"--windows {args.windows}: the held-out text has {len(held) // WINDOW} windows")
    held = held[:args.windows * WINDOW].reshape(args.windows, WINDOW)
    first_layer = decoder_layers(model)[first]
    held_inputs = _first_layer_inputs(model, first_layer, held, chunk)
    calib_inputs = _first_layer_inputs(model, first_layer, calibration_batches(tok, args.nsamples, args.seqlen), 8)
    say(f"cached the float prefix's outputs ({time.perf_counter() - started:.0f} s)")

    share = routed_share(tail, calib_inputs)
    blocks = {b.layer: b for b in moe_blocks(model)}
    change = {layer: (blocks[layer].router.norm(dim=1) - init[layer].norm(dim=1)).tolist() for layer in blocks}
    usage = {layer: round(float(spearmanr(change[layer], share[layer]).statistic), 3) for layer in blocks}
    say(f"router-norm change vs routed share, Spearman per layer: {usage}")

    def ppl() -> float:
        return tail.perplexity(held_inputs, held, chunk)

    # Every allocation is fixed before any expert is swapped for a quantized copy: the paper's variance
    # adjustment reads the float weights.
    experts = len(init[first])
    plans: list[tuple[str, float, dict]] = [
        (f"gptq uniform {b}-bit", b, {layer: {e: b for e in range(experts)} for layer in blocks}) for b in (2, 3)]
    orders = {}
    for avg in averages:
        counts = solve_three_level_counts(experts, avg, LEVELS[2], LEVELS[1], LEVELS[0])
        paper_bits, orders[avg] = allocate(model, avg, LEVELS, "combined", init)
        busiest = {layer: sorted(range(experts), key=lambda e, s=share[layer]: -s[e]) for layer in blocks}
        plans += [("paper", avg, paper_bits), ("reversed", avg, allocate(model, avg, LEVELS, "reversed", init)[0]),
                  ("usage (busiest first)", avg,
                   {layer: bits_by_rank(busiest[layer], counts, LEVELS) for layer in blocks})]
        plans += [(f"random seed {seed}", avg, allocate(model, avg, LEVELS, "random", init, seed=seed)[0])
                  for seed in range(args.seeds)]

    fp32 = ppl()
    say(f"fp32: {fp32:.3f} ({time.perf_counter() - started:.0f} s)")
    bank = quantized_bank(tail, calib_inputs, say)
    say(f"bank done ({time.perf_counter() - started:.0f} s)")
    params = dict(model.named_parameters())

    def with_bits(bits: dict[int, dict[int, int]]) -> float:
        with torch.no_grad():
            for name, levels in bank.items():
                layer = int(name.split("layers.")[1].split(".")[0])
                expert = int(name.split("experts.")[1].split(".")[0])
                params[name].copy_(levels[bits[layer][expert]].dequantize(params[name].dtype))
        return ppl()

    measured = []
    for label, avg, bits in plans:
        measured.append((label, avg, with_bits(bits)))
        say(f"{label} at {avg:g}: {measured[-1][2]:.3f} ({time.perf_counter() - started:.0f} s)")
    rows: list[dict] = [{"row": "fp32", "average": 32, "ppl": fp32}]
    for label, avg, value in measured:
        if label.startswith("gptq"):
            rows.append({"row": label, "average": avg, "ppl": value})
    for avg in averages:
        counts = solve_three_level_counts(experts, avg, LEVELS[2], LEVELS[1], LEVELS[0])
        here = [(label, value) for label, a, value in measured if a == avg and not label.startswith("gptq")]
        for label, value in here:
            if not label.startswith("random"):
                rows.append({"row": label, "average": avg, "counts": counts, "ppl": value,
                             **({"orders": orders[avg]} if label == "paper" else {})})
        rand = [value for label, value in here if label.startswith("random")]
        rows.append({"row": f"random ({args.seeds} seeds)", "average": avg, "counts": counts,
                     "ppl": statistics.mean(rand), "min": min(rand), "max": max(rand), "all": rand})
    for r in rows:
        r["ratio"] = r["ppl"] / fp32
    result = {"rows": rows, "change_vs_share_spearman": usage, "routed_share": share, "router_norm_change": change,
              "levels": LEVELS, "quantized": "experts only (attention and dense layers in float)",
              "calibration": {"nsamples": args.nsamples, "seqlen": args.seqlen},
              "held_out": {"windows": args.windows, "seqlen": WINDOW}, "model": str(folder),
              "training": json.loads((folder / "training.json").read_text()),
              "seconds": round(time.perf_counter() - started)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    from moe_bits import print_table  # benchmarks/moe_bits.py, beside this script: the same table

    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
