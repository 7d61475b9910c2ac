"""`toolpath serve` against the same model called in-process: tokens/s and time to the first token, same run.

    python benchmarks/serve.py [--model local] [--tokens 64] [--repeats 3] [--threads N] [--json]

One policy object is loaded once and used both ways, so the only difference is the server: the HTTP request,
the checking of the body, the queue and worker thread, SSE framing and the official `openai` client reading it.
In-process, the first token's time is taken by the same transformers streamer the server streams with.
Rows alternate (in-process, served, streamed) per repeat, so a machine whose load changes hurts all alike;
each figure is the median over the repeats. Tokens/s counts the tokens the model made (usage) over the
wall-clock time of the whole answer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Write a long story about a dragon who learns to cook."


def in_process(policy, tokens: int) -> tuple[float, float, int]:
    """(seconds for the answer, seconds to its first token, tokens made) calling policy.respond directly."""
    from toolpath.serve.chat_request import PLAIN_TEXT
    from toolpath.serve.engine import text_streamer
    from toolpath.state import Message

    first: list[float] = []
    started = time.perf_counter()
    streamer = text_streamer(policy.tokenizer, lambda _text: first or first.append(time.perf_counter()))
    r = policy.respond([Message(role="user", content=PROMPT)], [], max_new_tokens=tokens, temperature=0.0,
                       format=PLAIN_TEXT, streamer=streamer)
    done = time.perf_counter()
    return done - started, (first[0] if first else done) - started, r.tokens_out


def served(client, model: str, tokens: int) -> tuple[float, int]:
    started = time.perf_counter()
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=tokens,
                                       temperature=0)
    return time.perf_counter() - started, r.usage.completion_tokens


def streamed(client, model: str, tokens: int) -> tuple[float, float, int]:
    started, first, made = time.perf_counter(), None, 0
    for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}],
                                                max_tokens=tokens, temperature=0, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content and first is None:
            first = time.perf_counter()
        if chunk.usage:
            made = chunk.usage.completion_tokens
    done = time.perf_counter()
    return done - started, (first or done) - started, made


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="local", help="any model a spec can name (default local: SmolLM2-135M)")
    ap.add_argument("--tokens", type=int, default=64, help="max tokens per answer (default 64)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch threads (default: what the backend sets, all cores); 1 is "
                                                "steadier on a machine shared with other jobs")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    os.environ.setdefault("TOOLPATH_HOME", tempfile.mkdtemp(prefix="toolpath-serve-bench-"))
    import openai

    from toolpath.policies.base import load
    from toolpath.serve.app import ChatServer
    from toolpath.serve.engine import Engine

    policy = load(args.model)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    server = ChatServer(Engine(policy, args.model), port=0).start()
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=600)
    try:
        in_process(policy, 4), served(client, args.model, 4)  # warm-up: first calls pay one-off costs
        rows: dict[str, list] = {"in_process": [], "served": [], "streamed": []}
        for _ in range(args.repeats):
            rows["in_process"].append(in_process(policy, args.tokens))
            rows["served"].append(served(client, args.model, args.tokens))
            rows["streamed"].append(streamed(client, args.model, args.tokens))
    finally:
        server.stop()

    def rate(runs):
        return statistics.median(r[-1] / r[0] for r in runs)

    def ttft(runs):
        return statistics.median(r[1] for r in runs)

    import torch

    out = {"model": args.model, "max_tokens": args.tokens, "repeats": args.repeats, "threads": torch.get_num_threads(),
           "tokens_made": statistics.median(r[-1] for r in rows["served"]),
           "tokens_per_s": {k: round(rate(v), 2) for k, v in rows.items()},
           "first_token_ms": {"in_process": round(ttft(rows["in_process"]) * 1000, 1),
                              "streamed": round(ttft(rows["streamed"]) * 1000, 1)},
           "whole_answer_ms": {k: round(statistics.median(r[0] for r in v) * 1000, 1) for k, v in rows.items()}}
    out["ratio_served_vs_in_process"] = round(out["tokens_per_s"]["served"] / out["tokens_per_s"]["in_process"], 3)
    out["ratio_streamed_vs_in_process"] = round(out["tokens_per_s"]["streamed"] / out["tokens_per_s"]["in_process"], 3)
    out["first_token_overhead_ms"] = round(out["first_token_ms"]["streamed"] - out["first_token_ms"]["in_process"], 1)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.model}, {args.tokens} max tokens, median of {args.repeats}")
    for k in rows:
        first = f"   first token {out['first_token_ms'][k]:8.1f} ms" if k in out["first_token_ms"] else ""
        print(f"  {k:<11} {out['tokens_per_s'][k]:7.2f} tokens/s   "
              f"whole answer {out['whole_answer_ms'][k]:8.1f} ms{first}")
    print(f"ratio served / in-process: {out['ratio_served_vs_in_process']:.3f}  streamed / in-process: "
          f"{out['ratio_streamed_vs_in_process']:.3f}  first-token overhead: {out['first_token_overhead_ms']:.1f} ms")


if __name__ == "__main__":
    main()
