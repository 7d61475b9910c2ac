"""The response grammars under generated hostile output: crashes, reported issues and parse times, and the
inputs that once made the parsers quadratic, each against a plain regex scan of the same text in the same run.

    python benchmarks/fuzz_grammars.py [--n 10000] [--seed 0] [--json]

Part 1: `--n` replies per grammar (JSON, DeepEyesV2, ScaleCUA, FSD) from tests/security/fuzz_replies.py (valid
replies cut, spliced, repeated, with hostile fragments put in; one in twenty with an argument value that is not
JSON; one in two hundred 20,000-300,000 characters long). Per grammar: replies, crashes (an exception out of
the parser), violations (a check of fuzz_replies.violations failed: a call that is not plain JSON, a call or
block dropped without an issue, a bad reply not reported), replies with issues, calls read, the median and the
largest parse time, and the parse time of all replies against the baseline: one `re.findall` of tags and
brackets over the same text.

Part 2: the inputs an adversarial probe found quadratic (1 MB of `{`, `<code>` x 160k, ...) and the ones the
fuzzing found: the time at the full size against the baseline scan of the same text, the first issue the model
is told, and the growth of the time when the input doubles (2 for a linear parser, 4 for a quadratic one),
measured on sizes the parser reads whole (up to MAX_REPLY_CHARS; past it the rest is not read).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from security.fuzz_replies import GRAMMARS, parse, replies, violations  # noqa: E402

from toolpath.policies.formats import FORMATS, MAX_REPLY_CHARS, parse_tool_calls  # noqa: E402
from toolpath.policies.formats.fsd import parse_fsd  # noqa: E402
from toolpath.policies.formats.scalecua import ScaleCUAFormat  # noqa: E402

_SCAN = re.compile(r"</?[A-Za-z_]+>|[{}\[\]()]")  # the baseline: one linear pass of the tags and brackets


def baseline(text: str) -> int:
    return len(_SCAN.findall(text))


def timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def fuzz(grammar: str, n: int, seed: int) -> dict:
    times, base, crashes, wrong, reported, calls = [], [], [], [], 0, 0
    for i, (text, must) in enumerate(replies(grammar, n, seed)):
        base.append(timed(baseline, text)[0])
        try:
            spent, result = timed(parse, grammar, text)
        except Exception as err:  # noqa: BLE001 — counted: that is what this measures
            crashes.append(f"reply {i}: {type(err).__name__}: {err}")
            continue
        times.append(spent)
        wrong += violations(grammar, text, result, must)
        reported += bool(result.issues)
        calls += len(getattr(result, "calls", []))
    return {"grammar": grammar, "replies": n, "crashes": len(crashes), "violations": len(wrong),
            "with_issues": reported, "calls": calls, "median_ms": statistics.median(times) * 1000,
            "max_ms": max(times) * 1000, "total_s": sum(times), "baseline_s": sum(base),
            "ratio": sum(times) / sum(base), "first_crashes": crashes[:3], "first_violations": wrong[:3]}


DE = FORMATS["deepeyes"]
SC = ScaleCUAFormat(mode="direct")


def _trace(points: int) -> str:
    return "<point>[" + ", ".join(["[1, 2]"] * points) + "]</point>"


# (name, parser, text for a size, full size, what the issue measured before: seconds)
CASES = [
    ("JSON: 1 MB of '{'", parse_tool_calls, lambda k: "{" * k, 2**20, "over 120 s"),
    ("JSON: <tool_call> x 90k", parse_tool_calls, lambda k: "<tool_call>" * k, 90_000, "68 s (DeepEyesV2)"),
    ("JSON: '```' then spaces", parse_tool_calls, lambda k: "```" + " " * k, 1_000_000, "new"),
    ("DeepEyesV2: <code> x 160k", DE.parse, lambda k: "<code>" * k, 160_000, "107 s"),
    ("DeepEyesV2: <tool_call> x 90k", DE.parse, lambda k: "<tool_call>" * k, 90_000, "68 s"),
    ("DeepEyesV2: <answer>x</answer> x 55k", DE.parse, lambda k: "<answer>x</answer>" * k, 55_000, "31 s"),
    ("ScaleCUA: click(x=----...1), 100k signs", SC.parse, lambda k: "<action>click(x=" + "-" * k + "1)", 100_000,
     "MemoryError"),
    ("ScaleCUA: moveTo lines x 50k", SC.parse, lambda k: "<action>" + "moveTo(x=1, y=2)\n" * k, 50_000, "new"),
    ("FSD: <point> x 100k", parse_fsd, lambda k: "<point>" * k, 100_000, "66 s"),
    ("FSD: a trace of 10^6 points", parse_fsd, _trace, 1_000_000, "over 120 s"),
    ("FSD: '<' then spaces", parse_fsd, lambda k: "<" + " " * k + "x", 1_000_000, "new"),
]


def _best(read, text: str) -> float:
    return min(timed(read, text)[0] for _ in range(3))


def quadratic_cases() -> list[dict]:
    """Each case at its full size, and at a quarter, a half and all of the largest size a parser reads whole
    (MAX_REPLY_CHARS): the growth between the last two is what linear means."""
    out = []
    for name, read, make, size, before in CASES:
        unit = len(make(1000)) / 1000
        whole = min(size, int(MAX_REPLY_CHARS / unit) - 1)
        sizes = [whole // 4, whole // 2, whole]
        seconds = [_best(read, make(k)) for k in sizes]
        text = make(size)
        full = _best(read, text)
        scan = _best(baseline, text)
        out.append({"case": name, "before": before, "chars": len(text), "seconds": full, "baseline_s": scan,
                    "ratio": full / max(scan, 1e-9), "read_whole_chars": [len(make(k)) for k in sizes],
                    "read_whole_seconds": seconds, "growth": seconds[2] / max(seconds[1], 1e-9),
                    "issue": (read(text).issues or ["(none)"])[0]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="replies per grammar (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    warnings.simplefilter("error")  # a parser that lets Python warn about model text shows as a crash
    fuzzed = [fuzz(g, args.n, args.seed) for g in GRAMMARS]
    cases = quadratic_cases()
    if args.json:
        print(json.dumps({"fuzz": fuzzed, "quadratic_cases": cases}, indent=2))
        return 0 if all(r["crashes"] == r["violations"] == 0 for r in fuzzed) else 1
    print(f"{args.n:,} generated replies per grammar, seed {args.seed}")
    print(f"{'grammar':10s} {'replies':>8s} {'crashes':>8s} {'violations':>10s} {'with issues':>12s} {'calls':>7s} "
          f"{'median ms':>10s} {'max ms':>8s} {'total s':>8s} {'x scan':>7s}")
    for r in fuzzed:
        print(f"{r['grammar']:10s} {r['replies']:>8,} {r['crashes']:>8} {r['violations']:>10} {r['with_issues']:>12,} "
              f"{r['calls']:>7,} {r['median_ms']:>10.3f} {r['max_ms']:>8.1f} {r['total_s']:>8.2f} {r['ratio']:>7.1f}")
        for line in r["first_crashes"] + r["first_violations"]:
            print("   ", line[:200])
    print("\nInputs that made the old parsers quadratic: seconds at the full size (x scan: against one regex scan "
          "of the same text), and the growth of the time when the input doubles, measured where a reply is read "
          "whole (2: linear, 4: quadratic)")
    for c in cases:
        print(f"  {c['case']:42s} {c['chars']:>10,} chars {c['seconds']:7.3f} s  x scan {c['ratio']:6.1f}  "
              f"growth {c['growth']:4.1f}  before: {c['before']}")
        print(f"  {'':42s} issue: {c['issue'][:110]}")
    return 0 if all(r["crashes"] == r["violations"] == 0 for r in fuzzed) else 1


if __name__ == "__main__":
    sys.exit(main())
