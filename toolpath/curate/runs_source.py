"""`runs:FILTER`: stored runs as items, their conversations in the chat fine-tuning form.

FILTER is comma-separated terms, all of which a run must meet (empty, or `all`: every top-level run):
    status=finished        the run's status (finished, failed, budget_exhausted, interrupted, ...)
    benchmark=arith        runs of an eval of that benchmark
    eval=ID                runs of that eval
    model=local  agent=react  task=ID
    score>=0.5             the run's stored score, with = != > >= < <= (a run with no score never matches)
    limit=N                the N most recent runs that match
"""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path

from .items import CurateError, Item

OPS = {">=": operator.ge, "<=": operator.le, "!=": operator.ne, ">": operator.gt, "<": operator.lt, "=": operator.eq}
TEXT_KEYS = {"status": "status", "model": "model", "agent": "agent", "task": "task_id", "eval": "eval_id",
             "benchmark": "benchmark"}
KEYS = sorted([*TEXT_KEYS, "score", "limit"])
_TERM = re.compile(r"\s*([a-z_]+)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$")


def parse_filter(text: str) -> tuple[list[tuple[str, str, object]], int | None]:
    """(terms as (key, op, value), limit) of a FILTER; CurateError naming the term that is wrong."""
    terms, limit = [], None
    body = text.strip()
    if body in ("", "all"):
        return terms, limit
    for raw in body.split(","):
        m = _TERM.match(raw)
        if not m or not m.group(3):
            raise CurateError(f"runs:{text}: term {raw.strip()!r} is not KEY=VALUE (keys: {', '.join(KEYS)})")
        key, op, value = m.groups()
        if key not in KEYS:
            raise CurateError(f"runs:{text}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key == "limit":
            if op != "=" or not value.isdigit() or int(value) < 1:
                raise CurateError(f"runs:{text}: limit takes a positive whole number, as limit=100")
            limit = int(value)
            continue
        if key == "score":
            try:
                value = float(value)
            except ValueError:
                raise CurateError(f"runs:{text}: score compares with a number, got {value!r}") from None
        elif op not in ("=", "!="):
            raise CurateError(f"runs:{text}: {key} is compared with = or !=, not {op}")
        terms.append((key, op, value))
    return terms, limit


def _matches(run: dict, terms) -> bool:
    for key, op, value in terms:
        have = run.get("score") if key == "score" else run.get(TEXT_KEYS[key])
        if have is None and key == "score":
            return False
        if not OPS[op](have if key == "score" else str(have or ""), value):
            return False
    return True


def chat_messages(messages) -> list[dict]:
    """A run's transcript (state.Message objects) as the chat fine-tuning form OpenAI's fine-tuning and TRL's
    SFTTrainer read: tool calls as {id, type: function, function: {name, arguments: JSON text}}, each tool result
    as a `tool` message naming its call. Images are not carried (their artifacts are files of the store)."""
    out = []
    for m in messages:
        entry: dict = {"role": m.role, "content": m.content}
        if m.tool_calls:
            entry["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}} for c in m.tool_calls]
        if m.role == "tool":
            entry["tool_call_id"] = m.tool_call_id or ""
            entry["name"] = m.name or ""
        out.append(entry)
    return out


def run_text(messages: list[dict]) -> str:
    """What a scorer reads of a run: every turn but the system prompt (the same for every run of an agent), tool
    calls written as NAME(arguments) and tool results after their tool's name."""
    lines = []
    for m in messages:
        if m["role"] == "system":
            continue
        head = f"tool {m.get('name') or ''}".strip() if m["role"] == "tool" else m["role"]
        if m.get("content"):
            lines.append(f"{head}: {m['content']}")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            arguments = fn.get("arguments", "")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            lines.append(f"{head}: {fn.get('name', '')}({arguments})")
    return "\n".join(lines)


def run_items(filter_text: str, home: str | Path | None = None) -> list[Item]:
    """The top-level runs FILTER names, most recent first, each an Item with its conversation."""
    from ..runs import open_store

    terms, limit = parse_filter(filter_text)
    store = open_store(home, readonly=True)
    try:
        benchmarks: dict[str, str] = {}
        items = []
        for run in store.list_runs(limit=1 << 31):
            if run.get("eval_id"):
                if run["eval_id"] not in benchmarks:
                    found = store.get_eval(run["eval_id"])
                    benchmarks[run["eval_id"]] = found["benchmark"] if found else ""
                run["benchmark"] = benchmarks[run["eval_id"]]
            if not _matches(run, terms):
                continue
            messages = chat_messages(store.transcript(run["id"]))
            meta = {k: run.get(k) for k in ("status", "score", "benchmark", "model", "agent", "task_id")}
            items.append(Item(f"run:{run['id']}", run_text(messages), messages, meta))
            if limit is not None and len(items) >= limit:
                break
        return items
    finally:
        store.close()
