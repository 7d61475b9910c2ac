"""MMSU (Wang et al. 2025): 4-choice questions about spoken clips, from phonetics to paralinguistics.

Two sources of items:

- `--data PATH` (or TOOLPATH_MMSU_DATA): MMSU's release, a JSONL file (or a folder holding one *.jsonl) whose
  audio paths are relative to the file's folder. One object a line; read are

      question                         the question text (required)
      choice_a, choice_b, choice_c, choice_d   the four options (required, non-empty)
      answer_gt                        the right option's text (as MMSU's release has it), or
      answer                           its letter A-D (one of the two is required; both must agree)
      audio_path (or audio)            the clip: a path, or a list of paths for several clips (required)
      task_name (or task)              the task; the category each item is tabled under ("other" without it)
      id                               kept when given, else file:line

  A bad line stops the load naming the file, the line and the field: a benchmark that drops items silently
  changes its own denominator. An audio path outside the data folder or missing is refused the same way.

- otherwise a generated MMSU-style set (mmsu_speech.py: espeak-ng clips, correct by construction) of
  TOOLPATH_MMSU_ITEMS items (default 60), made once per seed under $TOOLPATH_HOME/benchmarks/mmsu/.

Scoring: the shared `choice` scorer (scorers.py) with the item's options: `official` reads the option letter
only; `toolpath` also takes a reply that names no letter but quotes exactly one option's text in full.
The agent gets the clips as inputs.audio (audio_1, …) and the speech tools `transcribe`, `which_was_said` and
`speech_features`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...paths import home
from ...spec import TaskSpec
from ..scorers import SCORERS
from . import Benchmark, BenchmarkDataError, Record, Score, pick, read_json_lines, task_id

DATA_ENV, ITEMS_ENV, AGENT_ENV = "TOOLPATH_MMSU_DATA", "TOOLPATH_MMSU_ITEMS", "TOOLPATH_MMSU_AGENT"
LETTERS = "ABCD"
CHOICES = tuple(f"choice_{c}" for c in "abcd")
TOOLS = ["transcribe", "which_was_said", "speech_features", "final_answer"]
MAX_NEW_TOKENS = 128


def _audio_paths(item: dict) -> list[str] | str:
    """The item's audio paths, or what is wrong with them (a str)."""
    audio = item.get("audio_path", item.get("audio"))
    if isinstance(audio, str) and audio.strip():
        return [audio]
    if isinstance(audio, list) and audio and all(isinstance(a, str) and a.strip() for a in audio):
        return list(audio)
    return "audio_path: expected a path or a list of paths"


def _answer(item: dict) -> str:
    """The right letter; raises ValueError naming the field that is wrong."""
    choices = [item[c].strip() for c in CHOICES]
    letter = None
    if "answer" in item:
        a = str(item["answer"]).strip().strip("()").upper()
        if a not in tuple(LETTERS):
            raise ValueError(f"answer: expected a letter A-D, got {item['answer']!r}")
        letter = a
    if "answer_gt" in item:
        gt = str(item["answer_gt"]).strip()
        if gt not in choices:
            raise ValueError(f"answer_gt: {gt[:60]!r} is not one of the choices")
        by_text = LETTERS[choices.index(gt)]
        if letter is not None and letter != by_text:
            raise ValueError(f"answer {letter} and answer_gt {gt[:60]!r} (choice {by_text}) disagree")
        letter = by_text
    if letter is None:
        raise ValueError("missing field answer_gt (the right choice's text) or answer (its letter)")
    return letter


def read_items(path: Path) -> list[Record]:
    """The records of an MMSU JSONL file (or the one *.jsonl in a folder); BenchmarkDataError naming file, line
    and field on the first bad line."""
    if path.is_dir():
        found = sorted(path.glob("*.jsonl"))
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise BenchmarkDataError(f"{path}: expected one MMSU *.jsonl file in the folder, found {names}")
        path = found[0]
    root = path.parent.resolve()
    records, seen = [], {}
    for n, item in read_json_lines(path, "MMSU item file", "one MMSU item a line"):
        where = f"{path}:{n}"
        if not isinstance(item, dict):
            raise BenchmarkDataError(f"{where}: expected a JSON object, got {type(item).__name__}")
        missing = [k for k in ("question", *CHOICES) if not isinstance(item.get(k), str) or not item[k].strip()]
        if missing:
            raise BenchmarkDataError(f"{where}: missing or empty field(s) {', '.join(missing)}")
        try:
            letter = _answer(item)
        except ValueError as err:
            raise BenchmarkDataError(f"{where}: {err}") from None
        audio = _audio_paths(item)
        if isinstance(audio, str):
            raise BenchmarkDataError(f"{where}: {audio}")
        files = []
        for rel in audio:
            full = (root / rel).resolve()
            if not full.is_relative_to(root):
                raise BenchmarkDataError(f"{where}: audio_path {rel!r} is outside the data folder {root}")
            if not full.is_file():
                raise BenchmarkDataError(f"{where}: audio_path: file not found: {full} (paths are relative to {root})")
            files.append(str(full))
        rid = str(item.get("id") or f"{path.stem}:{n}")
        if rid in seen:
            raise BenchmarkDataError(f"{where}: id {rid!r} repeats line {seen[rid]}")
        seen[rid] = n
        task = str(item.get("task_name", item.get("task", "")) or "other")
        records.append(Record(id=rid, category=task, data={
            "question": item["question"].strip(), "choices": [item[c].strip() for c in CHOICES], "answer": letter,
            "audio": files, "transcripts": item.get("transcripts", [])}))
    if not records:
        raise BenchmarkDataError(f"{path}: no items in the file")
    return records


def generated_folder(seed: int) -> Path:
    return home() / "benchmarks" / "mmsu" / f"seed{seed}"


class MMSU(Benchmark):
    name = "mmsu"
    description = "MMSU: 4-choice spoken language questions (--data: the release; else a generated espeak-ng set)"

    def __init__(self, data: str | Path | None = None, agent: str | None = None, items: int | None = None,
                 categories: list[str] | None = None):
        given = data or os.environ.get(DATA_ENV, "").strip()
        self.data = Path(given).expanduser() if given else None
        self.agent = agent or os.environ.get(AGENT_ENV, "").strip() or "react"
        self.items = items or int(os.environ.get(ITEMS_ENV, "60") or 60)
        self.categories = list(categories or [])  # `--category KIND` (repeatable): only those tasks or kinds

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        if self.data is not None:
            if not self.data.exists():
                raise BenchmarkDataError(f"MMSU data not found: {self.data} (set {DATA_ENV} or pass --data: "
                                         "a JSONL file of items, audio paths relative to it)")
            return pick(self._chosen(read_items(self.data)), limit, seed)
        from .mmsu_speech import EspeakMissing, generate

        try:
            path = generate(generated_folder(seed), self.items, seed)
        except EspeakMissing as err:
            raise BenchmarkDataError(str(err)) from None
        return pick(self._chosen(read_items(path)), limit, 0)

    def _chosen(self, records: list[Record]) -> list[Record]:
        if not self.categories:
            return records
        known = sorted({r.category for r in records})
        unknown = [c for c in self.categories if c not in known]
        if unknown:
            raise BenchmarkDataError(f"--category {', '.join(unknown)}: no such task in the data; "
                                     f"tasks: {', '.join(known)}")
        return [r for r in records if r.category in self.categories]

    def _evaluator(self, record: Record) -> dict:
        return {"name": "choice", "expected": record.data["answer"],
                "options": {"scoring": self.scoring, "choices": record.data["choices"]}}

    def instruction(self, record: Record) -> str:
        """The question, its options, what to call and the form of the answer. A small model answered a
        two-clip question after hearing one clip, so several clips are named in one speech_features call, which
        compares them. Asked for which_was_said "with the options' texts", it made up a list of animals, so the
        options are given as the list to pass. Told it could call either tool on one clip, it called both, then
        repeated the second call; one call is asked for. Asked for the letter alone, it wrote "A" whatever the
        tool had said; asked for the option's text as well, it chose by meaning more often
        (docs/results/mmsu.md), and the letter it writes is what official scoring reads."""
        options = "\n".join(f"{c}. {t}" for c, t in zip(LETTERS, record.data["choices"], strict=True))
        n = len(record.data["audio"])
        names = [f"audio_{i}" for i in range(1, n + 1)]
        listen = ("Listen to audio_1 first with one call: which_was_said with options "
                  f"{json.dumps(record.data['choices'])} when the question is which of them is said, transcribe "
                  "for all that is said, or speech_features for how it is said (speed, pitch, tune, stress)"
                  if n == 1 else
                  f"Listen to the {n} clips first: call speech_features once with audio "
                  f"{json.dumps(names)}; it compares them")
        return (f"{listen}.\n\n{record.data['question']}\n{options}\n\n"
                "Then reply with the option you choose: its text, then its letter in brackets.")

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        # react's first step must call a tool: the model cannot hear the clips, only the tools can. Its last step
        # must answer: after transcribing, a small model went on calling speech_features, then repeated it, and
        # ended its run with no answer though the transcript named the option.
        params = {"first_call": "required", "last_call": "final_answer"}
        agent: Any = {"name": "react", "params": params} if self.agent == "react" else self.agent
        spec: dict[str, Any] = {
            "id": task_id(record.id), "instruction": self.instruction(record),
            "inputs": {"audio": record.data["audio"]}, "limits": {"max_steps": 3},
            "agent": agent, "tools": TOOLS, "evaluator": self._evaluator(record),
            "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id}}
        if model:
            # an answer is an option's text and letter, a call a line of JSON: a small model that went on
            # writing calls after its first spent minutes of a busy CPU on calls that were never run
            spec["model"] = {"name": model, "max_new_tokens": MAX_NEW_TOKENS}
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        ev = self._evaluator(record)
        return Score(SCORERS[ev["name"]](answer, ev["expected"], ev["options"]))
