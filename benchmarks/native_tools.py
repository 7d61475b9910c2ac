"""One BFCL-like item through a local model, prompted both ways in one run: through its own chat template and
tool format (`model.options.tool_format: native`) and through toolpath's JSON grammar (`toolpath`). Prints each
reply and the call it was read as.

    python benchmarks/native_tools.py [--model local:qwen2.5-coder-0.5b] [--json]

The item is BFCL simple_python's first: a `calculate_triangle_area(base, height)` tool and "Find the area of a
triangle with a base of 10 units and height of 5 units." Greedy decoding, so a rerun prints the same.
"""

from __future__ import annotations

import argparse
import json
import time

from toolpath.policies import base as policies
from toolpath.spec import ModelSpec
from toolpath.state import Message

TOOL = {"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given its base and height.",
        "parameters": {"type": "object", "properties": {
            "base": {"type": "integer", "description": "The base of the triangle."},
            "height": {"type": "integer", "description": "The height of the triangle."},
            "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"}},
            "required": ["base", "height"]}}
QUESTION = "Find the area of a triangle with a base of 10 units and height of 5 units."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for setting in ("native", "toolpath"):
        policy = policies.load(ModelSpec(name=args.model, max_new_tokens=96, options={"tool_format": setting}))
        started = time.perf_counter()
        r = policy.respond([Message(role="user", content=QUESTION)], [TOOL])
        rows.append({"tool_format": setting, "raw": r.raw, "calls": [[c.name, c.arguments] for c in r.tool_calls],
                     "issues": r.issues, "tokens_in": r.tokens_in, "seconds": round(time.perf_counter() - started, 1)})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for row in rows:
        print(f"{row['tool_format']:9} {row['tokens_in']:4} prompt tokens, {row['seconds']} s\n"
              f"  reply: {row['raw']!r}\n"
              f"  calls: {row['calls']}  issues: {row['issues']}")


if __name__ == "__main__":
    main()
