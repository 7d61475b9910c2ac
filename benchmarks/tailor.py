"""GPTailor layer tailoring against layer-dropping baselines, at the same number of removed layers, in one run.

    python benchmarks/tailor.py [--model local] [--keep 0.75] [--trials 30] [--json]

Methods (each removes the same number of decoder layers; SmolLM2-135M: 30 -> 22 at keep 0.75):
  last            drop the last layers
  shortgpt        drop the layers of least block influence (ShortGPT: 1 - cos(input, output)) on the base model
  angular         drop the consecutive block of least angular distance (Gromov et al.) on the base model
  random-sN       drop random layers (several seeds; their mean is reported as `random`)
  shortgpt@CAND   ShortGPT's drop applied to a fine-tuned candidate (its own block influence)
  tailor          the search of toolpath.compress.tailor (candidates: the base and the two default fine-tunes)

Score: the share of the base model's score kept on held-out data never seen by the fine-tunes or the search
(last 20 % of pydoc_data.topics, arithmetic tool-call episodes of a separate seed):
  share = 0.5 * ppl_base / ppl + 0.5 * acc / acc_base
(ppl: perplexity of the English text; acc: next-token accuracy on the assistant's tokens of the episodes).
1.0 is the base model itself.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolpath.compress import tailor, tailor_data  # noqa: E402
from toolpath.compress.tailor_finetune import default_candidates  # noqa: E402
from toolpath.compress.tailor_layers import Composer, Plan, Workbench, angular_block, block_influence, evaluate, share  # noqa: E402
from toolpath.kinds import options as kind_options  # noqa: E402

WEIGHTS = {"ppl": 0.5, "acc": 0.5}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local")
    ap.add_argument("--keep", default="0.75")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-seeds", type=int, default=3)
    ap.add_argument("--finetune-steps", type=int, default=8)
    ap.add_argument("--heldout-blocks", type=int, default=6, help="held-out English blocks of 128 tokens")
    ap.add_argument("--heldout-episodes", type=int, default=6, help="held-out tool-call episodes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def log(t):
        print(f"tailor-bench: {t}", file=sys.stderr, flush=True)

    opts = kind_options(tailor.KIND, {"keep": args.keep, "trials": args.trials, "seed": args.seed,
                                      "finetune_steps": args.finetune_steps}, "compress")
    started = time.perf_counter()
    import torch

    base, tok, key = tailor.load_source(args.model)
    torch.set_num_threads(2)
    paths = default_candidates(base, tok, key, opts.finetune_steps, opts.seed, log)
    names = ["base"] + [p.name.split("-")[-2] for p in paths]
    cands = [tailor.load_candidate(p) for p in paths]
    english = tailor_data.english_blocks(tok, "heldout", args.heldout_blocks, tailor.CALIB_LENGTH)
    episodes = tailor_data.transcripts(tok, "heldout", args.heldout_episodes)
    calib_en, calib_tr = tailor.calibration(tok, opts)
    base_metrics = evaluate(base, english, episodes)
    n = base.config.num_hidden_layers
    n_remove = opts.target_removed(n)
    composer = Composer(base, cands)
    bench = Workbench(composer)
    rows = []

    def measure(method: str, plan: Plan, seconds: float = 0.0, **extra) -> dict:
        m = evaluate(bench.model(plan), english, episodes)
        row = {"method": method, "layers": len(plan.keep), "removed": [i for i in range(n) if i not in plan.keep],
               "ppl": round(m["ppl"], 3), "acc": round(m["acc"], 4), "share": round(share(m, base_metrics, WEIGHTS), 4),
               "search_s": round(seconds, 1), **extra}
        rows.append(row)
        log(f"{method}: share {row['share']} (ppl {row['ppl']}, acc {row['acc']})")
        return row

    def without(removed) -> list[int]:
        return [i for i in range(n) if i not in set(removed)]

    calib = calib_en + calib_tr
    influence = block_influence(base, calib)
    measure("last", Plan(keep=list(range(n - n_remove))))
    measure("shortgpt", Plan(keep=without(sorted(range(n), key=lambda i: influence[i])[:n_remove])))
    measure("angular", Plan(keep=without(angular_block(base, calib, n_remove))))
    for s in range(args.random_seeds):
        measure(f"random-s{s}", Plan(keep=sorted(random.Random(s).sample(range(n), n - n_remove))))
    for k, cand in enumerate(cands):
        own = block_influence(cand, calib)
        onehot = [1.0 if j == k else 0.0 for j in range(len(cands))]
        keep = without(sorted(range(n), key=lambda i: own[i])[:n_remove])
        measure(f"shortgpt@{names[k + 1]}", Plan(keep=keep, merge={i: onehot for i in keep}))
    t = time.perf_counter()
    found = tailor.tailor(base, tok, cands, names, opts, log)
    best = measure("tailor", found["plan"], time.perf_counter() - t, calibration_share=round(found["value"], 4),
                   per_layer=found["plan"].describe(names))
    randoms = [r["share"] for r in rows if r["method"].startswith("random-")]
    baselines = [r for r in rows if r["method"] != "tailor" and not r["method"].startswith("random-")]
    best_baseline = max(baselines + [{"method": "random", "share": sum(randoms) / len(randoms)}],
                        key=lambda r: r["share"])
    result = {"model": args.model, "layers": n, "removed": n_remove, "base": base_metrics, "weights": WEIGHTS,
              "random_mean_share": round(sum(randoms) / len(randoms), 4) if randoms else None,
              "best_baseline": best_baseline["method"],
              "ratio_tailor_to_best_baseline": round(best["share"] / best_baseline["share"], 3)
              if best_baseline["share"] > 0 else None,
              "heldout": tailor_data.describe(len(english), tailor.CALIB_LENGTH, len(episodes), "heldout"),
              "trials": args.trials, "seconds": round(time.perf_counter() - started, 1), "rows": rows}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{args.model}: {n} -> {n - n_remove} layers; "
          f"base ppl {base_metrics['ppl']:.2f}, acc {base_metrics['acc']:.3f}")
    print(f"{'method':<22}{'ppl':>10}{'acc':>8}{'share':>8}")
    for r in sorted(rows, key=lambda r: -r["share"]):
        print(f"{r['method']:<22}{r['ppl']:>10.2f}{r['acc']:>8.3f}{r['share']:>8.3f}")
    print(f"random (mean of {len(randoms)} seeds): {result['random_mean_share']}")
    print(f"tailor / best baseline ({best_baseline['method']}): {result['ratio_tailor_to_best_baseline']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
