"""Agreement of our scorers with the published ones, per benchmark, over the case tables.

    python benchmarks/scoring_agreement.py [--json | --markdown] [--tables DIR]

Each table under tests/data/scoring_cases holds cases whose official score was produced by running the
benchmark's published scoring code (benchmarks/scoring_cases/ and each table's `official_code` say which).
For every case both of our modes score it now, and the table prints, per benchmark table:

    N          cases
    official   the share where our `official` mode gives the published score (the goal: 100 %)
    toolpath   the share where our `toolpath` mode gives the published score; the rest are listed by kind,
               with how many of them we score higher and lower than the published code
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def agreement(path: Path) -> dict:
    table = json.loads(path.read_text())
    module, _, name = table["scorer"].partition(":")
    score_case = getattr(importlib.import_module(module), name)
    same = {"official": 0, "toolpath": 0}
    higher, lower = Counter(), Counter()
    for case in table["cases"]:
        want = case["official"]
        for mode in same:
            same[mode] += abs(score_case(case["case"], mode) - want) <= 1e-9
        ours = score_case(case["case"], "toolpath")
        if ours > want + 1e-9:
            higher[case["kind"] or "(unnamed)"] += 1
        elif ours < want - 1e-9:
            lower[case["kind"] or "(unnamed)"] += 1
    n = len(table["cases"])
    kinds = sorted(set(higher) | set(lower), key=lambda k: (-(higher[k] + lower[k]), k))
    return {"table": path.stem, "benchmark": table["benchmark"], "official_code": table["official_code"], "n": n,
            "official_agreement": same["official"] / n if n else None,
            "toolpath_agreement": same["toolpath"] / n if n else None,
            "differences": [{"kind": k, "toolpath_higher": higher[k], "toolpath_lower": lower[k]} for k in kinds]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the table as the README shows it")
    ap.add_argument("--tables", type=Path, default=ROOT / "tests" / "data" / "scoring_cases")
    args = ap.parse_args()
    rows = [agreement(p) for p in sorted(args.tables.glob("*.json"))]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if args.markdown:
        print("| table | N | official mode | toolpath mode "
              "| where toolpath mode differs (cases: we score higher / lower) |")
        print("|---|---:|---:|---:|---|")
        for r in rows:
            diffs = "; ".join(f"{d['kind']} {d['toolpath_higher']}/{d['toolpath_lower']}" for d in r["differences"])
            print(f"| {r['table']} | {r['n']} | {r['official_agreement']:.1%} | {r['toolpath_agreement']:.1%} | "
                  f"{diffs.replace('|', '&#124;')} |")
        print("\nThe published code behind each table:\n")
        for r in rows:
            print(f"- {r['table']}: {r['official_code'].replace('|', '&#124;')}")
        return 0
    print(f"{'table':<26} {'N':>6} {'official':>9} {'toolpath':>9}  differences of toolpath mode (higher/lower)")
    for r in rows:
        diffs = "; ".join(f"{d['kind']} {d['toolpath_higher']}/{d['toolpath_lower']}" for d in r["differences"])
        print(f"{r['table']:<26} {r['n']:>6} {r['official_agreement']:>9.1%} {r['toolpath_agreement']:>9.1%}  {diffs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
