"""Prefix reuse on either engine: the same 5-step react episodes through a local model with and without
earlier calls' KV state (model.options.prefix_cache_mb), in one run. Prints, per episode, the tokens prefilled
and reused, the wall time, and whether every reply was the same.

    python benchmarks/prefix_reuse.py [--model local] [--engine torch|onnxruntime] [--weights W]
                                      [--max-new-tokens 256] [--json]

Each episode is a real react run (its system prompt, tools and step records) whose moves are fixed: the model is
asked at every step and its reply is what is timed and compared, but the episode goes on with the scripted call,
so both settings see the same five prompts whatever the model writes. The second episode asks another question
with the same system prompt and tools, so it also shows reuse across episodes. Greedy decoding; the two settings
alternate episode by episode; on torch they share one loaded model, on the engine each has its own generator
over the same export.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from toolpath.agents.episode import run_episode
from toolpath.policies import base as policies
from toolpath.policies.base import Response
from toolpath.runs import open_store
from toolpath.spec import ModelSpec, parse_spec
from toolpath.state import ToolCall

EPISODES = [  # (question, the calculator expressions it steps through, the answer)
    ("Compute ((12*7)+5)*3 - 10, one operation per step.", ["12*7", "84+5", "89*3", "267-10"], "257"),
    ("Compute ((9*8)-4)*6 + 11, one operation per step.", ["9*8", "72-4", "68*6", "408+11"], "419"),
]


class Replayed:
    """Asks the real policy at every step (what is measured) and answers with the episode's scripted move; the
    scripted response carries the real one's token counts, so the step records show them."""

    def __init__(self, policy, moves: list[ToolCall]):
        self.policy, self.moves, self.name = policy, moves, policy.name
        self.replies: list[Response] = []

    def respond(self, messages, tools, **generation) -> Response:
        real = self.policy.respond(messages, tools, **generation)
        self.replies.append(real)
        move = self.moves[len(self.replies) - 1]
        return Response(text="", tool_calls=[move], tokens_in=real.tokens_in, tokens_out=real.tokens_out,
                        latency_s=real.latency_s, raw=real.raw, prefill_tokens=real.prefill_tokens,
                        reused_tokens=real.reused_tokens)


def moves(expressions: list[str], answer: str) -> list[ToolCall]:
    calls = [ToolCall(id=f"c{i}", name="calculator", arguments={"expression": e}) for i, e in enumerate(expressions)]
    return calls + [ToolCall(id="done", name="final_answer", arguments={"answer": answer})]


def episode(policy, store, question: str, expressions: list[str], answer: str, max_new_tokens: int) -> dict:
    spec = parse_spec({"id": "prefix-reuse", "instruction": question, "limits": {"max_steps": 5},
                       "model": {"name": policy.spec.name, "max_new_tokens": max_new_tokens}})
    replayed = Replayed(policy, moves(expressions, answer))
    started = time.perf_counter()
    result = run_episode(spec, store, policy=replayed)
    wall = time.perf_counter() - started
    records = [s for s in store.steps(result.run_id) if s["node"] == "policy"]
    return {"status": result.status, "steps": result.steps, "wall_s": round(wall, 2),
            "model_s": round(sum(r.latency_s for r in replayed.replies), 2),
            "tokens_in": sum(r.tokens_in for r in replayed.replies),
            "prefilled": sum(s["payload"]["prefill_tokens"] for s in records),
            "reused": sum(s["payload"]["reused_tokens"] for s in records),
            "replies": [r.raw for r in replayed.replies]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--engine", default="torch", help="torch (default) or onnxruntime")
    ap.add_argument("--weights", default=None, help="model.options.weights (default: the model's own)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from toolpath.policies.hf import HFPolicy

    options = {"engine": args.engine, **({"weights": args.weights} if args.weights else {})}
    reusing = policies.load(ModelSpec(name=args.model, options=options))
    if not isinstance(reusing, HFPolicy):
        raise SystemExit(f"prefix_reuse: {args.model} is not a local text model")
    if reusing.prefix is None:
        raise SystemExit(f"prefix_reuse: {args.model} cannot keep a prefix (its cache cannot be cut to one)")
    if args.engine == "torch":  # the same weights in memory, without the kept state
        plain = HFPolicy(reusing.model, reusing.tokenizer,
                         reusing.spec.model_copy(update={"options": {**reusing.spec.options, "prefix_cache_mb": 0}}),
                         reusing.name)
    else:
        plain = policies.load(ModelSpec(name=args.model, options={**options, "prefix_cache_mb": 0}))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp))  # a throwaway store: the runs are measured, not kept
        for n, (question, expressions, answer) in enumerate(EPISODES, 1):
            off = episode(plain, store, question, expressions, answer, args.max_new_tokens)
            on = episode(reusing, store, question, expressions, answer, args.max_new_tokens)
            rows.append({"episode": n, "steps": on["steps"], "tokens_in": on["tokens_in"],
                         "prefilled_without": off["prefilled"], "prefilled_with": on["prefilled"],
                         "reused_with": on["reused"], "prefill_ratio": round(off["prefilled"] / on["prefilled"], 2),
                         "wall_without_s": off["wall_s"], "wall_with_s": on["wall_s"],
                         "wall_ratio": round(on["wall_s"] / off["wall_s"], 2),
                         "model_without_s": off["model_s"], "model_with_s": on["model_s"],
                         "identical": on["replies"] == off["replies"]})
    report = {"model": args.model, "engine": args.engine, "weights": args.weights,
              "max_new_tokens": args.max_new_tokens, "episodes": rows}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for r in rows:
        print(f"episode {r['episode']} ({r['steps']} steps, {r['tokens_in']} prompt tokens): prefilled "
              f"{r['prefilled_without']} -> {r['prefilled_with']} ({r['prefill_ratio']}x fewer, {r['reused_with']} "
              f"reused); wall {r['wall_without_s']} s -> {r['wall_with_s']} s ({r['wall_ratio']}x); "
              f"replies identical: {r['identical']}")


if __name__ == "__main__":
    main()
