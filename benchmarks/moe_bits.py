"""Expert-wise bit allocation (moe-bits) against uniform, random and reversed allocations, on the tiny MoE.

    python benchmarks/moe_bits.py [--json] [--averages 2.0,2.25,2.5] [--seeds 5] [--nsamples 32] [--seqlen 128]

One run: the model of benchmarks/train_tiny_moe.py (trained first if missing), held-out perplexity on the last
20 % of pydoc_data.topics for fp32, RTN, and, at each average bit-width, GPTQ with the experts' bits from
  paper     the router-norm-change order with the max-variance adjustment (toolpath compress --method moe-bits)
  random    the same counts per level, experts shuffled (N seeds: mean, min, max)
  reversed  the paper's order backwards (the least sensitive experts get the most bits)
and uniform GPTQ (every expert at the same bits). Levels 1/2/3 bits; attention at 4 bits GPTQ in every row
(the reference's attention level); group size 128 (the tiny model's rows hold exactly one group).
Ratios are perplexity over the fp32 perplexity measured in the same run.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_tiny_moe import ensure  # noqa: E402

from toolpath.compress.gptq import quantize_model_gptq, quantize_model_rtn  # noqa: E402
from toolpath.compress.moe_bits import allocate, allocation_plan, read_router_init, solve_three_level_counts  # noqa: E402
from toolpath.compress.text import calibration_batches, perplexity  # noqa: E402

LEVELS = (1, 2, 3)
ATTN_BITS = 4


def routing_diagnostic(model, calib: torch.Tensor, init: dict[int, torch.Tensor]) -> dict[int, float]:
    """Per MoE layer, the Spearman correlation between each expert's router-norm change and the share of
    calibration tokens routed to it: what the sensitivity signal says about how much an expert is used."""
    from toolpath.compress.moe_layout import moe_blocks

    with torch.inference_mode():
        logits = model(input_ids=calib, output_router_logits=True).router_logits
    out = {}
    for block, layer_logits in zip(moe_blocks(model), logits):
        chosen = torch.topk(layer_logits, 2, dim=-1).indices.reshape(-1)
        share = torch.bincount(chosen, minlength=block.router.shape[0]).float().tolist()
        change = (block.router.norm(dim=1) - init[block.layer].norm(dim=1)).tolist()
        out[block.layer] = round(float(spearmanr(change, share).statistic), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--averages", default="2.0,2.25,2.5")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nsamples", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--windows", type=int, default=48, help="held-out windows of 256 tokens (default 48)")
    ap.add_argument("--model", type=Path, help="a trained tiny-moe folder (default $TOOLPATH_HOME/models/tiny-moe)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: the tiny model's small operations are faster on one "
                         "thread than on two busy cores)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    averages = [float(a) for a in args.averages.split(",")]

    def say(s):
        print(s, file=sys.stderr, flush=True)

    started = time.perf_counter()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure(args.model, log=say)
    tok = AutoTokenizer.from_pretrained(str(folder))
    base = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    state = {k: v.clone() for k, v in base.state_dict().items()}
    init = read_router_init(folder / "router_init.safetensors")
    calib = calibration_batches(tok, args.nsamples, args.seqlen, seed=0)

    def fresh():
        base.load_state_dict(state)
        return base

    def ppl(model) -> float:
        return perplexity(model, tok, seqlen=256, max_windows=args.windows)

    def gptq_with(bits: dict[int, dict[int, int]]) -> float:
        model = fresh()
        quantize_model_gptq(model, calib, allocation_plan(bits, ATTN_BITS))
        return ppl(model)

    usage = routing_diagnostic(fresh(), calib, init)
    say(f"router-norm change vs share of tokens routed, Spearman per layer: {usage}")
    rows: list[dict] = []
    fp32 = ppl(fresh())
    rows.append({"row": "fp32", "average": 32, "ppl": fp32})
    say(f"fp32: {fp32:.3f}")
    experts = init[0].shape[0]
    layers = sorted(init)
    for b in (2, 3):
        model = fresh()
        quantize_model_rtn(model, lambda name, e, b=b: b if (e is not None or ".experts." in name) else ATTN_BITS)
        rows.append({"row": f"rtn uniform {b}-bit", "average": b, "ppl": ppl(model)})
        say(f"rtn {b}: {rows[-1]['ppl']:.3f}")
    for b in (2, 3):
        rows.append({"row": f"gptq uniform {b}-bit", "average": b,
                     "ppl": gptq_with({layer: {e: b for e in range(experts)} for layer in layers})})
        say(f"gptq uniform {b}: {rows[-1]['ppl']:.3f}")
    for avg in averages:
        counts = solve_three_level_counts(experts, avg, LEVELS[2], LEVELS[1], LEVELS[0])
        paper_bits, orders = allocate(fresh(), avg, LEVELS, "combined", init)
        paper = gptq_with(paper_bits)
        reversed_bits, _ = allocate(fresh(), avg, LEVELS, "reversed", init)
        rev = gptq_with(reversed_bits)
        rand = []
        for seed in range(args.seeds):
            random_bits, _ = allocate(fresh(), avg, LEVELS, "random", init, seed=seed)
            rand.append(gptq_with(random_bits))
        rows.append({"row": "paper", "average": avg, "counts": counts, "ppl": paper, "orders": orders})
        rows.append({"row": "reversed", "average": avg, "counts": counts, "ppl": rev})
        rows.append({"row": f"random ({args.seeds} seeds)", "average": avg, "counts": counts,
                     "ppl": statistics.mean(rand), "min": min(rand), "max": max(rand), "all": rand})
        say(f"avg {avg}: paper {paper:.3f} reversed {rev:.3f} random {statistics.mean(rand):.3f} "
            f"[{min(rand):.3f}, {max(rand):.3f}]")
    for r in rows:
        r["ratio"] = r["ppl"] / fp32
    result = {"rows": rows, "change_vs_usage_spearman": usage, "levels": LEVELS, "attn_bits": ATTN_BITS,
              "calibration": {"nsamples": args.nsamples, "seqlen": args.seqlen}, "model": str(folder),
              "training": json.loads((folder / "training.json").read_text()),
              "seconds": round(time.perf_counter() - started)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print_table(rows)
    return 0


def print_table(rows: list[dict]) -> None:
    """The allocation rows as the results page's markdown table (random rows with their seeds' range)."""
    print("| allocation | avg bits | (low, mid, high) | held-out ppl | ratio to fp32 |")
    print("|---|---|---|---|---|")
    for r in rows:
        extra = f" (min {r['min']:.2f}, max {r['max']:.2f})" if "min" in r else ""
        counts = str(tuple(r["counts"])) if "counts" in r else ""
        print(f"| {r['row']} | {r['average']:g} | {counts} | {r['ppl']:.2f}{extra} | {r['ratio']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
