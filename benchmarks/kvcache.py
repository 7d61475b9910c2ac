"""KV caches on real local models: bytes per token, perplexity decoded token by token through the cache, and
greedy-token agreement with the full cache (rows 1, 2 and 4 of the KV-cache issue; the sparse kinds' rows come
from benchmarks/kvcache_sparse.py when it is there, in the same run). Each kind's perplexity increase is also
given as a ratio of kivi-2's, measured in the same run; the chanmix-2-* and kivi-2-sink kinds are chanmix-2's
ablations (KINDS).

    TOOLPATH_HOME=/tmp/th-models python benchmarks/kvcache.py [--windows 2] [--window 2048] [--json]

Text: the held-out split of pydoc_data.topics (sorted keys, the last 20 %; chanmix calibrates on the first
80 %). Each window is fed one token at a time, so every prediction reads the cache as decoding would (no
quantized prefill); the windows run as one batch. Baseline, measured in the same run: a DynamicCache (the
model's float32 on the CPU); bytes are compared with what an fp16 DynamicCache stores for the same tokens.
Agreement: the full cache's greedy continuation of a held-out prompt (256 tokens) is fed through each cache;
`agree` is the share of positions where that cache's argmax is the same token, `prefix` the tokens before the
first difference (what free greedy decoding with the cache would share with the full cache's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KINDS = {"kivi-2": ("kivi", {"bits": 2}), "kivi-4": ("kivi", {"bits": 4}), "chanmix-2": ("chanmix", {"bits": 2}),
         "chanmix-fp8": ("chanmix", {"bits": 2, "fp8": True}),
         # ablations of chanmix-2, one change each: KIVI's values instead of the classes' (the value side),
         # no full-precision sink token, and KIVI with the same sink (what the sink alone gives KIVI)
         "chanmix-2-kivi-values": ("chanmix", {"bits": 2, "classes": "keys"}),
         "chanmix-2-no-sink": ("chanmix", {"bits": 2, "sinks": 0}),
         "kivi-2-sink": ("chanmix", {"bits": 2, "classes": "none"})}


def fp16_bytes_per_token(model) -> int:
    text = model.config.get_text_config()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return text.num_hidden_layers * 2 * text.num_key_value_heads * head_dim * 2


def windows(tokenizer, count: int, length: int):
    import torch

    from toolpath.pydoc_text import held_out_text

    ids = tokenizer(held_out_text(), return_tensors="pt")["input_ids"][0]
    if ids.numel() < count * length:
        raise SystemExit(f"the held-out text has {ids.numel()} tokens, fewer than {count} windows of {length}")
    return torch.stack([ids[i * length:(i + 1) * length] for i in range(count)])


def decode_through(model, ids, cache):
    """Feed ids [batch, n] one token at a time; -> (log-probs of each next token [batch, n - 1], argmax [batch, n])."""
    import torch

    nll, top = [], []
    with torch.inference_mode():
        for t in range(ids.shape[1]):
            logits = model(ids[:, t:t + 1], cache=cache, use_cache=True).logits[:, -1].float()
            top.append(logits.argmax(-1))
            if t + 1 < ids.shape[1]:
                nll.append(torch.nn.functional.cross_entropy(logits, ids[:, t + 1], reduction="none"))
    return torch.stack(nll, 1), torch.stack(top, 1)


def load(name: str, threads: int):
    import torch

    from toolpath.policies.local import load_local
    from toolpath.spec import ModelSpec

    policy = load_local(ModelSpec(name=name, options={"engine": "torch"}))  # the kv caches are torch cache layers
    torch.set_num_threads(threads)
    return policy.model.eval(), policy.tokenizer


def measure_model(name: str, model, tok, args) -> dict:
    import torch
    from transformers import DynamicCache

    from toolpath.policies.kvcache import attach
    win = windows(tok, args.windows, args.window)
    prompt = windows(tok, args.windows + 1, args.window)[-1:, :args.prompt]  # a held-out passage of its own
    fp16 = fp16_bytes_per_token(model)
    out: dict = {"model": name, "fp16_bytes_per_token": fp16, "windows": args.windows, "window": args.window,
                 "agree_tokens": args.agree, "kinds": {}}

    started = time.perf_counter()
    full_nll, _ = decode_through(model, win, DynamicCache(config=model.config))
    full_ppl = math.exp(full_nll.mean().item())
    with torch.inference_mode():
        cont = model.generate(prompt, max_new_tokens=args.agree, min_new_tokens=args.agree, do_sample=False,
                              pad_token_id=tok.eos_token_id)
    _, full_top = decode_through(model, cont, DynamicCache(config=model.config))
    out["full"] = {"ppl": full_ppl, "seconds": time.perf_counter() - started}
    print(f"{name}: full cache ppl {full_ppl:.3f} ({out['full']['seconds']:.0f} s)", file=sys.stderr, flush=True)

    for label in args.kinds:
        kind, options = KINDS[label]
        started = time.perf_counter()
        attach(model, kind, options)  # chanmix: calibrates once per model (saved), not timed with the run
        calibrated = time.perf_counter() - started
        started = time.perf_counter()
        cache = attach(model, kind, options)
        nll, _ = decode_through(model, win, cache)
        ppl = math.exp(nll.mean().item())
        per_token = cache.nbytes() / (win.shape[0] * cache.get_seq_length())
        _, top = decode_through(model, cont, attach(model, kind, options))
        ref = full_top[:, args.prompt - 1:-1]  # the predictions of the generated tokens
        got = top[:, args.prompt - 1:-1]
        same = (ref == got)[0]
        prefix = int(same.long().cumprod(0).sum().item())
        row = {"bytes_per_token": per_token, "bytes_vs_fp16": per_token / fp16, "ppl": ppl,
               "ppl_increase": ppl - full_ppl, "agree": same.float().mean().item(), "prefix": prefix,
               "seconds": time.perf_counter() - started, "calibration_seconds": calibrated}
        out["kinds"][label] = row
        print(f"{name}: {label}: {row['bytes_vs_fp16']:.3f}x fp16 bytes, ppl {ppl:.3f} (+{row['ppl_increase']:.3f}), "
              f"agree {row['agree']:.3f}, prefix {prefix} ({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
    kivi = out["kinds"].get("kivi-2")
    if kivi and kivi["ppl_increase"] > 0:
        out["increase_vs_kivi2"] = {label: row["ppl_increase"] / kivi["ppl_increase"]
                                    for label, row in out["kinds"].items() if label != "kivi-2"}
        if "chanmix-2" in out["kinds"]:
            out["chanmix2_increase_vs_kivi2"] = out["increase_vs_kivi2"]["chanmix-2"]
    return out


def sparse_rows(model, tok, args) -> list[dict] | None:
    """The sparse kinds' rows 3-5 (passkey, attention-mass recall and agreement, speed) from
    benchmarks/kvcache_sparse.py, where that module is present, on the model already loaded."""
    path = ROOT / "benchmarks" / "kvcache_sparse.py"
    if not path.is_file() or not args.sparse_rows:
        return None
    spec = importlib.util.spec_from_file_location("kvcache_sparse", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kinds, wanted, rows = ["quest", "icecache"], args.sparse_rows.split(","), []
    if "passkey" in wanted:
        lengths, trials = module.parse_lengths(args.lengths)
        rows += module.passkey_rows(model, tok, kinds, lengths, trials, [64, 256])
    if "recall" in wanted:
        rows += module.recall_rows(model, tok, kinds, [64, 128, 256, 512], args.window, args.agree)
    if "speed" in wanted:
        rows += module.speed_rows(model, tok, kinds, 256, args.window, 32)
    return rows


def available_models() -> list[str]:
    from toolpath.policies.local_models import CATALOG, installed

    return ["local"] + (["local:qwen2.5-coder-0.5b"] if installed(CATALOG["qwen2.5-coder-0.5b"]) else [])


def markdown(results: list[dict]) -> str:
    n = results[0].get("agree_tokens", 256) if results else 256
    lines = [f"| model | cache | bytes/token | × fp16 | ppl | ppl increase | greedy agree ({n}) | same prefix |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['model']} | full (DynamicCache) | {r['fp16_bytes_per_token']} (fp16) | 1.000 | "
                     f"{r['full']['ppl']:.3f} | – | 1.000 | {r.get('agree_tokens', 256)} |")
        for label, k in r["kinds"].items():
            lines.append(f"| {r['model']} | {label} | {k['bytes_per_token']:.0f} | {k['bytes_vs_fp16']:.3f} | "
                         f"{k['ppl']:.3f} | +{k['ppl_increase']:.3f} | {k['agree']:.3f} | {k['prefix']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", help="local model names (default: local, and local:qwen2.5-coder-0.5b "
                                               "when installed)")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    p.add_argument("--windows", type=int, default=2, help="held-out windows (default 2)")
    p.add_argument("--window", type=int, default=2048, help="tokens per window (default 2048)")
    p.add_argument("--agree", type=int, default=256, help="greedy tokens compared (default 256)")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens before them (default 128)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: no spin-waits on a shared CPU)")
    p.add_argument("--sparse-rows", default="passkey,recall,speed",
                   help="rows of benchmarks/kvcache_sparse.py to run too, where it is present ('' for none)")
    p.add_argument("--lengths", default="1024:20,2048:20,4096:20,8192:20",
                   help="passkey lengths and trials (sparse rows), LENGTH:TRIALS,...")
    p.add_argument("--json", action="store_true", help="print one JSON object with every figure")
    args = p.parse_args(argv)
    from toolpath.policies.local import offline

    offline()
    results, sparse = [], {}
    for name in args.models or available_models():
        model, tok = load(name, args.threads)
        results.append(measure_model(name, model, tok, args))
        extra = sparse_rows(model, tok, args)
        if extra is not None:
            sparse[name] = extra
    if args.json:
        print(json.dumps({"results": results, "sparse": sparse or None, "load_average": os.getloadavg()}, indent=1))
    else:
        print(markdown(results))
        for r in results:
            for label, ratio in r.get("increase_vs_kivi2", {}).items():
                goal = " (goal <= 0.5)" if label == "chanmix-2" else ""
                print(f"{r['model']}: {label}'s perplexity increase is {ratio:.2f} of kivi-2's{goal}")
        for name, rows in sparse.items():
            for row in rows:
                print(name, "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
