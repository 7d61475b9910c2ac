"""The local models on this CPU, per weights option (model.options.weights): load, first token, decode speed,
peak memory and held-out perplexity, all in one run.

    python benchmarks/local_model.py [--models local,local:qwen2.5-coder-0.5b] [--options fp32,int8,int4]
                                     [--tokens 64] [--windows 4] [--threads N] [--json]

Each (model, option) runs in its own subprocess, so each peak memory (ru_maxrss) is that configuration's
alone and no configuration warms another's caches. A model is loaded once first (unmeasured) so a GGUF
file's one-time conversion is not counted as anyone's load. Per configuration:
- load: toolpath's loader (policy.load_seconds): reading the cached safetensors and converting the weights;
- first token: a greedy generate of one token from the fixed prompt, after one warm-up call;
- decode: greedy, the fixed prompt, --tokens new tokens (min = max), tokens/s over the tokens after the first;
- perplexity: --windows windows of 512 tokens of held-out English, the last 20 % of Python's own
  pydoc_data.topics (sorted keys), the same text for every model.
- peak RSS: the process's maximum (ru_maxrss), so it includes the load's conversion and the perplexity pass.
Ratios are against fp32 of the same model in the same run. Models not installed are skipped, saying so;
llama.cpp's row is measured only where llama-cpp-python imports, else the reason is printed.
Timings on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = ("local", "local:qwen2.5-coder-0.5b", "local:qwen2.5-coder-1.5b", "local:gemma3-270m")
OPTIONS = ("fp32", "bf16", "int8", "int4")
PROMPT = "Write a short story about a robot who learns to paint."
WINDOW = 512

CHILD = r"""
import json, math, os, resource, sys, time
cfg = json.loads(sys.argv[1])
import torch
from toolpath.policies.base import load
from toolpath.spec import ModelSpec

# torch: this measures transformers' generate() on the policy's model (benchmarks/engine.py measures the engines)
spec = ModelSpec(name=cfg["model"],
                 options={"engine": "torch", **({} if cfg["option"] is None else {"weights": cfg["option"]})})
t0 = time.perf_counter()
policy = load(spec)
load_s = time.perf_counter() - t0
out = {"load_s": load_s, "policy_load_s": policy.load_seconds}
if cfg["prepare"]:
    print("RESULT " + json.dumps(out)); sys.exit(0)
if cfg["threads"]:
    torch.set_num_threads(cfg["threads"])
out["threads"] = torch.get_num_threads()
tok, model = policy.tokenizer, policy.model
if getattr(tok, "chat_template", None):
    enc = tok.apply_chat_template([{"role": "user", "content": cfg["prompt"]}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
else:
    enc = tok(cfg["prompt"], return_tensors="pt")

def generate(n):
    t = time.perf_counter()
    with torch.inference_mode():
        ids = model.generate(**enc, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=tok.eos_token_id)
    return time.perf_counter() - t, ids

generate(2)  # warm-up: first-call allocations and lazy imports
first, _ = generate(1)
total, ids = generate(cfg["tokens"])
new = ids[0, enc["input_ids"].shape[1]:]
out.update(ttft_s=first, decode_s=total - first, tokens=int(new.shape[0]),
           decode_tps=(cfg["tokens"] - 1) / max(total - first, 1e-9), text=tok.decode(new, skip_special_tokens=True))

from toolpath.pydoc_text import held_out_text
all_ids = tok(held_out_text(), return_tensors="pt").input_ids[0]
nll, n = 0.0, 0
t = time.perf_counter()
with torch.inference_mode():
    for i in range(cfg["windows"]):
        x = all_ids[i * cfg["window"]:(i + 1) * cfg["window"]][None]
        logits = model(x).logits.float()
        nll += torch.nn.functional.cross_entropy(logits[0, :-1], x[0, 1:], reduction="sum").item()
        n += x.shape[1] - 1
out.update(ppl=math.exp(nll / n) if n else None, ppl_tokens=n, ppl_s=time.perf_counter() - t,
           peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           weights=getattr(policy, "weights", {}).get("weights"),
           model_mb=getattr(policy, "weights", {}).get("bytes", 0) / 2**20)
print("RESULT " + json.dumps(out))
"""


def child(cfg: dict, timeout: float) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, env=env,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    line = next((text for text in r.stdout.splitlines() if text.startswith("RESULT ")), None)
    if line is None:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {r.returncode}: {tail}"}
    return json.loads(line[7:])


def installed(model: str) -> tuple[bool, str]:
    from toolpath.policies import local_models
    from toolpath.policies.local import availability

    name = model.partition(":")[2]
    if not name:
        return availability()
    m = local_models.model(name)
    return (True, "") if local_models.installed(m) else (False, f"not installed ({m.install_command()})")


def llama_cpp_status() -> str:
    """Why llama.cpp has no row here, or '' where llama-cpp-python imports."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return ("llama.cpp: not measured: llama-cpp-python is not installed (PyPI has no prebuilt wheel of it for "
                "this platform; a source build took 37 min here), so no ratio against it")
    return ""


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    ap.add_argument("--options", default=",".join(OPTIONS), help="comma-separated weights options")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per decode (default 64)")
    ap.add_argument("--windows", type=int, default=4, help="perplexity windows of 512 tokens (default 4)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: toolpath's, one per core)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per configuration")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    options = [o.strip() for o in args.options.split(",") if o.strip()]
    bad = [o for o in options if o not in OPTIONS]
    if bad or args.tokens < 2 or args.windows < 0:
        ap.error(f"--options takes {', '.join(OPTIONS)}; --tokens at least 2; --windows at least 0"
                 + (f" (got {', '.join(bad)})" if bad else ""))
    from pydantic import ValidationError

    from toolpath.spec import ModelSpec

    for model in models:
        try:
            ModelSpec(name=model)
        except ValidationError as err:
            ap.error(f"--models {model!r}: {err.errors()[0]['msg'].removeprefix('Value error, ')}")
    rows, notes = [], []
    for model in models:
        ok, why = installed(model)
        if not ok:
            notes.append(f"{model}: skipped: {why}")
            continue
        prep = child({"model": model, "option": None, "prepare": True}, args.timeout)  # a GGUF is converted once
        if "error" in prep:
            notes.append(f"{model}: skipped: cannot load: {prep['error']}")
            continue
        for option in options:
            cfg = {"model": model, "option": option, "prepare": False, "tokens": args.tokens, "windows": args.windows,
                   "window": WINDOW, "prompt": PROMPT, "threads": args.threads}
            started = time.perf_counter()
            res = child(cfg, args.timeout)
            res.update(model=model, option=option, wall_s=time.perf_counter() - started, load_average=load_average())
            rows.append(res)
            if not args.json:
                print(f"  measured {model} {option}: {res.get('error') or 'ok'} ({res['wall_s']:.0f} s, load average "
                      f"{res['load_average']})", file=sys.stderr, flush=True)
    base = {r["model"]: r for r in rows if r["option"] == "fp32" and "error" not in r}
    for r in rows:
        b = base.get(r["model"])
        if b is None or "error" in r:
            continue
        r["ratio"] = {"decode_tps": r["decode_tps"] / b["decode_tps"], "ttft": r["ttft_s"] / b["ttft_s"],
                      "load": r["load_s"] / b["load_s"], "peak_rss": r["peak_rss_mb"] / b["peak_rss_mb"],
                      "ppl": (r["ppl"] / b["ppl"]) if r.get("ppl") and b.get("ppl") else None}
    llama = llama_cpp_status()
    if llama:
        notes.append(llama)
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes, "threads": args.threads or None, "cpus": os.cpu_count()},
                         indent=1))
        return
    print("| model | weights | load s | first token s | decode tok/s | peak RSS MB | perplexity | "
          "tok/s vs fp32 | ppl vs fp32 | RSS vs fp32 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['option']} | {r['error']} |||||||| ")
            continue
        q = r.get("ratio") or {}
        ppl = f"{r['ppl']:.2f}" if r.get("ppl") else "-"

        def f(k, q=q):
            return f"{q[k]:.2f}" if q.get(k) is not None else "-"

        print(f"| {r['model']} | {r['option']} | {r['load_s']:.1f} | {r['ttft_s']:.2f} | {r['decode_tps']:.1f} | "
              f"{r['peak_rss_mb']:.0f} | {ppl} | {f('decode_tps')} | {f('ppl')} | {f('peak_rss')} |")
    threads = rows[0].get("threads") if rows else None
    print(f"\n{args.tokens} new tokens greedy; perplexity over {args.windows} x {WINDOW} held-out tokens; "
          f"{threads} torch thread(s) on {os.cpu_count()} CPUs; load averages during the runs: "
          f"{', '.join(sorted({r['load_average'] for r in rows}))}")
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
