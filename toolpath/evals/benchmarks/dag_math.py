"""DAG-MATH: math problems solved as a graph of steps, scored on the answer and on the graph.

The model is asked (evals/dag/prompt.py) for the DAG-MATH format: a JSON list of steps, each with its id, the
earlier steps it uses and one statement, the last stating `The final answer is $\\boxed{...}$`. The react agent
with no tools passes the problem to the model; its reply is the answer.

Score: 1 when the boxed answer equals the problem's (evals/dag/answer.py: math-verify, else sympy), whatever the
graph is like: plain accuracy, so it can be put beside the graph's figures. Both scoring modes score alike (the
official repository publishes the format and its data, not a scorer of answers). Metrics per sample, averaged
over the set:

    correct     the score
    valid       the reply keeps the format's rules (a JSON list of steps, ids increasing, only earlier steps used,
                one boxed answer, last): format validity
    closed      valid and every step but the last used later
    prr         closed and correct: its mean is the Perfect Reasoning Rate
    closeness   the share of steps (the last aside) used later, over the replies that are lists of steps at all

Data:
    default      problems generated from the seed (evals/dag/problems.py): shopping, speed, equation, share and
                 discount word problems with exact answers, one kind per category
    --data PATH  the official formatted set as JSON lines: each line an object with the problem
                 (`problem_text` or `problem`) and its answer (`final_answer` or `answer`); `problem_id`/`sample_id`
                 name the record, `domain` or `difficulty` its category; the gold `steps` are not shown to the model
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...spec import TaskSpec
from ..dag.answer import boxed, equal
from ..dag.metrics import check_text
from ..dag.problems import problems
from ..dag.prompt import instruction
from . import Benchmark, BenchmarkDataError, Record, Score, pick, read_json_lines, task_id

N_RECORDS = 50  # generated without --limit
MAX_NEW_TOKENS = 1024  # a graph of ten steps with a sentence each fits


def _category(row: dict) -> str:
    domain = row.get("domain")
    if isinstance(domain, list) and domain and isinstance(domain[0], str):
        return domain[0].split("->")[0].strip()[:40] or "official"
    if isinstance(row.get("difficulty"), (int, float)) and not isinstance(row["difficulty"], bool):
        return f"difficulty {row['difficulty']:g}"
    return "official"


def _first_text(row: dict, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            return value
    return None


def read_formatted(path: Path) -> list[Record]:
    """The records of a formatted-set JSONL file; a BenchmarkDataError naming the file and line of a bad row."""
    hint = "one object a line with problem_text and final_answer"
    out = []
    for n, row in read_json_lines(path, "DAG-MATH data", hint):
        where = f"{path}:{n}"
        if not isinstance(row, dict):
            raise BenchmarkDataError(f"{where}: a JSON {type(row).__name__}, not an object ({hint})")
        problem, answer = _first_text(row, ("problem_text", "problem")), _first_text(row, ("final_answer", "answer"))
        if problem is None or answer is None:
            missing = " and ".join(k for k, v in (("problem_text", problem), ("final_answer", answer)) if v is None)
            raise BenchmarkDataError(f"{where}: no {missing} ({hint})")
        name = "-".join(str(row[k]) for k in ("problem_id", "sample_id") if k in row) or f"line{n}"
        out.append(Record(id=f"dag-math-{name}", category=_category(row), data={"problem": problem, "answer": answer}))
    if not out:
        raise BenchmarkDataError(f"{path}: no problems in the file ({hint})")
    return out


class DagMath(Benchmark):
    name = "dag_math"
    description = "math word problems solved as a DAG of steps: accuracy, format validity, closeness, PRR"

    def __init__(self, data: str | Path | None = None):
        self.data = Path(data) if data is not None else None

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        if self.data is not None:
            if not self.data.is_file():
                raise BenchmarkDataError(f"DAG-MATH data {self.data}: no such file (--data takes a JSONL file)")
            return pick(read_formatted(self.data), limit, seed)
        n = N_RECORDS if limit is None else limit
        return [Record(id=p["id"], category=p["kind"], data={"problem": p["problem"], "answer": p["answer"]})
                for p in problems(n, seed)]

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        spec = {"id": task_id(record.id), "instruction": instruction(record.data["problem"]),
                "agent": {"name": "react"}, "tools": [], "limits": {"max_steps": 2},
                "model": {"name": model or "local", "max_new_tokens": MAX_NEW_TOKENS}, "evaluator": None,
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                             "answer": record.data["answer"]}}
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        text = answer or ""
        graph = check_text(text)
        said = graph.answer if graph.answer is not None else boxed(text)  # accuracy reads a boxed answer anywhere
        correct = equal(said, record.data["answer"])
        metrics = {"correct": float(correct), "valid": float(graph.valid), "closed": float(graph.closed),
                   "prr": float(graph.closed and correct)}
        if graph.closeness is not None:
            metrics["closeness"] = graph.closeness
        first = graph.violations[0] if graph.violations else None
        why = (f"answer {said!r} {'=' if correct else '≠'} {record.data['answer']!r}; "
               + ("closed" if graph.closed else f"{len(graph.violations)} violation(s), first {first}"))
        return Score(float(correct), metrics, why)

