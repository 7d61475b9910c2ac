"""Write the case tables of Omni3D-Bench (VADAR's and VLMEvalKit's scorers) and MindCube, with the official
column taken from running the published scoring code.

    python benchmarks/scoring_cases/make_qa_cases.py --official-src DIR [--omni3d FILE] [--out DIR]

DIR holds the published code as its projects ship it (nothing of it is in this repository):
    vadar_engine.py              VADAR's engine/engine.py (github damianomarsili/VADAR, commit 56018eb); only
                                 Engine.write_summarized_results is taken from it (its imports need a GPU stack)
    vlmevalkit_omni3dbench.py    VLMEvalKit's vlmeval/dataset/utils/omni3dbench.py (needs pandas)
    mindcube_extractors.py       MindCube's src/evaluation/core/extractors.py (commit 6d8fd9a)

Each case is a reply as a model writes it, made from the expected answers of the real questions (Omni3D-Bench:
the annotation file, default ../shared/data/omni3d_bench/annotations_sample.json; MindCube: the shipped sample)
in the shapes models answer in. The toolpath column is what our toolpath mode gives; `kind` names the shape of
a reply where the two differ.
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from toolpath.evals.benchmarks import mindcube as mindcube_bench  # noqa: E402
from toolpath.evals.benchmarks import omni3d_bench  # noqa: E402

NUMBER_WORDS = "zero one two three four five six seven eight nine ten".split()


# ---- the published code, run as shipped ----------------------------------------------------------------

def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def vadar_scorer(src: Path):
    """VADAR's write_summarized_results, taken out of its class (it uses nothing of self), run on a one-row
    CSV per case exactly as VADAR writes it (columns question, image_index, answer_type, ground_truth,
    prediction); the case's credit is whichever summary line is not None."""
    tree = ast.parse((src / "vadar_engine.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "write_summarized_results")
    space: dict = {"csv": csv}
    exec(compile(ast.Module([fn], []), "vadar_engine.py", "exec"), space)
    summarize = space["write_summarized_results"]

    def score(answer, expected, answer_type) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            table, out = Path(tmp) / "r.csv", Path(tmp) / "out.txt"
            with open(table, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["question", "image_index", "answer_type", "ground_truth",
                                                  "prediction"])
                w.writeheader()
                w.writerow({"question": "q", "image_index": "0", "answer_type": answer_type,
                            "ground_truth": expected, "prediction": "" if answer is None else answer})
            try:
                summarize(None, str(table), str(out))
            except ZeroDivisionError:
                return float("nan")  # the published code stops here; recorded as such
            values = [line.split(":", 1)[1].strip() for line in out.read_text().splitlines() if ":" in line]
            got = [float(v) for v in values if v != "None"]
            return got[0] if got else 0.0
    return score


def vlmevalkit_scorer(src: Path):
    import pandas as pd

    mod = _module(src / "vlmevalkit_omni3dbench.py", "vlmevalkit_omni3dbench")

    def score(answer, expected, answer_type) -> float:
        # VLMEvalKit reads the benchmark's TSV, where a column of mixed answers holds strings
        row = pd.DataFrame([{"answer_type": answer_type, "answer": str(expected),
                             "prediction": "" if answer is None else answer}])
        try:
            res = mod.Omni3DBench_acc(row)
        except ZeroDivisionError:
            return float("nan")
        got = [v for v in res.iloc[0].tolist() if v is not None and not pd.isna(v)]
        return float(got[0]) if got else 0.0
    return score


def mindcube_scorer(src: Path):
    mod = _module(src / "mindcube_extractors.py", "mindcube_extractors")

    def score(answer, gt) -> float:
        extracted = mod.extract_answer(answer)
        return float(extracted == gt if extracted else False)
    return score


# ---- replies, in the shapes models write them ----------------------------------------------------------

def int_replies(n: int) -> list[tuple[str, str | None]]:
    word = NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)
    return [("bare", str(n)), ("bare", f" {n}\n"), ("signed", f"+{n}"), ("decimal", f"{n}.0"),
            ("with unit", f"{n} chairs"), ("sentence", f"There are {n} chairs."), ("tagged", f"<ans>{n}</ans>"),
            ("answer tag", f"<answer>{n}</answer>"), ("number word", word), ("labelled", f"Answer: {n}"),
            ("wrong", str(n + 1)), ("wrong", str(max(0, n - 1))), ("working then result", f"2 + {n - 2} = {n}"),
            ("empty", ""), ("none", None), ("hedged", f"about {n}"), ("tagged in prose", f"I count <ans>{n}</ans>")]


def float_replies(g: float) -> list[tuple[str, str | None]]:
    return [("bare", repr(g)), ("rounded", f"{g:.1f}"), ("with unit", f"{g} meters"),
            ("prose", f"approximately {g} meters"), ("tagged", f"<ans>{g}</ans>"),
            ("answer tag", f"<answer>{g}</answer>"),
            ("close", f"{g * 1.08:.3f}"), ("off", f"{g * 1.3:.3f}"), ("far", f"{g * 2.2:.3f}"), ("negated", f"-{g}"),
            ("nan", "nan"), ("inf", "inf"), ("empty", ""), ("none", None), ("scientific", f"{g:e}"),
            ("unit glued", f"{g}m"), ("labelled", f"Answer: {g}"), ("working then result", f"{2 * g} / 2 = {g}")]


def yes_no_replies(gt: str) -> list[tuple[str, str | None]]:
    other = "no" if gt == "yes" else "yes"
    return [("bare", gt), ("capitalised", gt.title()), ("with period", f"{gt.title()}."),
            ("with reason", f"{gt.title()}, it is."), ("sentence", f"The answer is {gt}."),
            ("opinion", f"I think {gt}"),
            ("boolean", "true" if gt == "yes" else "false"), ("boolean", "True" if gt == "yes" else "False"),
            ("tagged", f"<ans>{gt}</ans>"), ("answer tag", f"<answer>{gt}</answer>"), ("wrong", other),
            ("wrong", f"{other.title()}."), ("hedge", "not sure"), ("hedge", "I don't know"), ("hedge", "unknown"),
            ("both", "yes and no"), ("negated word", "Nope"), ("empty", ""), ("none", None),
            ("tagged wrong", f"<ans>{other}</ans>"), ("labelled", f"Answer: {gt}")]


def text_replies(gt: str, wrong: str) -> list[tuple[str, str | None]]:
    return [("bare", gt), ("upper case", gt.upper()), ("title case", gt.title()), ("with article", f"the {gt}"),
            ("with period", f"{gt}."), ("tagged", f"<ans>{gt}</ans>"), ("answer tag", f"<answer>{gt}</answer>"),
            ("labelled", f"Answer: {gt}"), ("sentence", f"It is the {gt}."), ("wrong", wrong), ("empty", ""),
            ("none", None)]


def omni3d_cases(questions: list[dict], official: str) -> list[dict]:
    texts = sorted({q["answer"] for q in questions if q["answer_type"] == "str" and q["answer"] not in ("yes", "no")})
    seen, cases = set(), []
    extra = [{"answer": 0.0, "answer_type": "float"}, {"answer": -2.0, "answer_type": "float"}]
    for i, q in enumerate([*questions, *extra]):
        gt, kind = q["answer"], q["answer_type"]
        if kind == "int":
            replies = int_replies(int(gt))
        elif kind == "float":
            replies = float_replies(float(gt))
        elif gt in ("yes", "no"):
            replies = yes_no_replies(gt)
        else:
            replies = text_replies(gt, texts[(texts.index(gt) + 1) % len(texts)])
        for shape, reply in replies:
            key = (kind, str(gt), reply)
            if key in seen:
                continue
            seen.add(key)
            cases.append({"id": f"q{i:03d}-{len(cases):05d}", "shape": shape,
                          "case": {"answer": reply, "expected": gt, "answer_type": kind, "official": official}})
    return cases


MINDCUBE_REPLIES = [
    ("bare", "{gt}"), ("with period", "{gt}."), ("parenthesised", "({gt})"), ("with option text", "{gt}. Image 3"),
    ("bold", "**{gt}.** Image 3"), ("answer tag", "<Answer>{gt}</Answer>"), ("answer tag", "<answer>{gt}</answer>"),
    ("sentence", "The answer is {gt}"), ("labelled", "Answer: {gt}"), ("my answer", "My answer is {gt}."),
    ("rejects another first", "Not {other}. The answer is {gt}"),
    ("rejects another with period", "{other}. is wrong; the answer is {gt}"),
    ("reasoning then answer", "Image 1 is the front view, so the back is opposite. Answer: {gt}"),
    ("sentence ending in a capital", "The chair is left of image D. The answer is {gt}"),
    ("lowercase", "{low}"), ("option word", "Option {gt}"), ("contraction", "I'd pick {gt}"),
    ("article A", "A chair is in front. The answer is {gt}"), ("empty", ""), ("none", None),
    ("no letter", "None of these"), ("two options", "Between {other} and {gt}, {gt}"),
    ("think then tag", "<think>{other} looks close</think><Answer>{gt}</Answer>"),
    ("tag with option text", "<Answer>{gt}. Image 2</Answer>"), ("wrong", "{other}"), ("wrong with period", "{other}."),
    ("markdown answer", "**Answer:** {gt}"), ("json", '{{"answer": "{gt}"}}'),
]


def mindcube_cases(items: list[dict]) -> list[dict]:
    cases = []
    for item in items:
        gt = item["gt_answer"]
        other = "C" if gt != "C" else "A"
        for shape, template in MINDCUBE_REPLIES:
            reply = None if template is None else template.format(gt=gt, other=other, low=gt.lower())
            cases.append({"id": f"{item['id']}-{len(cases):04d}", "shape": shape,
                          "case": {"answer": reply, "gt_answer": gt}})
    return cases


# ---- tables -------------------------------------------------------------------------------------------

def kind_of(case: dict, shape: str) -> str:
    """Why the two modes differ on a case: a published bug the ground truth triggers, else the reply's shape."""
    expected = case.get("expected")
    if case.get("answer_type") == "float" and isinstance(expected, (int, float)):
        if expected < 0:
            return "negative ground truth (published: every reply passes every threshold)"
        if expected == 0:
            return "ground truth 0 (published: ZeroDivisionError)"
    if case.get("answer_type") == "str" and isinstance(expected, str) and expected != expected.lower():
        return "ground truth not in lower case (published: never equals the lowercased reply)"
    return shape


def finish(cases: list[dict], official_fn, toolpath_fn) -> list[dict]:
    out = []
    for c in cases:
        official = official_fn(c["case"])
        if official != official:  # NaN: the published code raised on this case (a ground truth of 0)
            official, note = 0.0, "the published code stops with ZeroDivisionError on this case"
        else:
            note = ""
        ours = toolpath_fn(c["case"])
        row = {"id": c["id"], "case": c["case"], "official": official, "toolpath": ours,
               "kind": "" if ours == official else kind_of(c["case"], c["shape"])}
        if note:
            row["note"] = note
        out.append(row)
    return out


def write(path: Path, benchmark: str, official_code: str, scorer: str, rows: list[dict]) -> None:
    path.write_text(json.dumps({"benchmark": benchmark, "official_code": official_code, "scorer": scorer,
                                "cases": rows}, indent=0, ensure_ascii=False) + "\n")
    print(f"{path}: {len(rows)} cases, {sum(r['official'] == r['toolpath'] for r in rows)} agree")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official-src", type=Path, required=True)
    ap.add_argument("--omni3d", type=Path, default=ROOT.parent / "shared/data/omni3d_bench/annotations_sample.json")
    ap.add_argument("--out", type=Path, default=ROOT / "tests/data/scoring_cases")
    args = ap.parse_args()
    questions = json.loads(args.omni3d.read_text())["questions"]
    ours = "toolpath.evals.benchmarks.omni3d_bench:score_case"
    for name, make, code in (
            ("vadar", vadar_scorer, "VADAR engine/engine.py Engine.write_summarized_results (github damianomarsili/"
                                    "VADAR, commit 56018eb)"),
            ("vlmevalkit", vlmevalkit_scorer, "VLMEvalKit vlmeval/dataset/utils/omni3dbench.py Omni3DBench_acc "
                                              "(github open-compass/VLMEvalKit, commit 2a8400b)")):
        official = make(args.official_src)
        rows = finish(omni3d_cases(questions, name),
                      lambda c, f=official: f(c["answer"], c["expected"], c["answer_type"]),
                      lambda c: omni3d_bench.score_case(c, "toolpath"))
        suffix = "" if name == "vadar" else f"_{name}"
        write(args.out / f"omni3d_bench{suffix}.json", "omni3d_bench", code, ours, rows)
    items = [json.loads(line) for line in mindcube_bench.SAMPLE_FILE.read_text().splitlines() if line.strip()]
    official = mindcube_scorer(args.official_src)
    rows = finish(mindcube_cases(items), lambda c: official(c["answer"], c["gt_answer"]),
                  lambda c: mindcube_bench.score_case(c, "toolpath"))
    write(args.out / "mindcube.json", "mindcube", "MindCube src/evaluation/core/extractors.py extract_answer and "
          "src/evaluation/evaluator.py (github mll-lab-nu/MindCube, commit 6d8fd9a)",
          "toolpath.evals.benchmarks.mindcube:score_case", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
