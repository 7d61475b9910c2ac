"""A conversation's later user turns: the task's `followups`, each sent when the model answers the one before.

A task is one user message (its instruction) unless its spec lists `followups`: then a reply that answers
(plain text, no call) is not the end of the run but of a turn, and the next follow-up arrives as the user's
message, until the last one is answered. The run's answer is then the whole conversation as JSON,

    {"turns": [{"steps": [[{"name", "arguments"}, ...], ...], "reply": "..."}, ...]}

each turn's tool calls step by step and the reply that ended it, because what a multi-turn task is judged on
(BFCL's multi-turn categories: the calls each turn made) is more than its last reply.

Which follow-ups were sent is read from the transcript, never kept aside, so a resumed run goes on from where
its store says it was.
"""

from __future__ import annotations

import json
from typing import Any

from ..state import Message

TURNS_KEY = "turns"


def turns(transcript: list[Message], followups: list[str]) -> list[dict]:
    """The conversation so far, turn by turn: each turn's steps of tool calls and its reply (see the module's
    doc). A turn begins at the task's instruction or at the next follow-up, as the transcript stores it."""
    texts = [Message(role="user", content=f).content for f in followups]
    out: list[dict] = [{"steps": [], "reply": ""}]
    users = 0
    for m in transcript:
        if m.role == "user":
            users += 1  # the first is the task's own message
            if users > 1 and len(out) <= len(texts) and m.content == texts[len(out) - 1]:
                out.append({"steps": [], "reply": ""})
        elif m.role == "assistant":
            if m.tool_calls:
                out[-1]["steps"].append([{"name": c.name, "arguments": c.arguments} for c in m.tool_calls])
            else:
                out[-1]["reply"] = m.content
    return out


def answer_or_next_turn(rt: Any, answer: str, messages: list[Message]) -> dict:
    """The policy step's update for a reply that answers: the run finishes with `answer`, or, while follow-ups
    are left, the next one is added to the step's `messages` and the run goes on."""
    followups = rt.spec.followups
    if not followups:
        return {"status": "finished", "answer": answer}
    so_far = turns(rt.transcript + messages, followups)
    if len(so_far) <= len(followups):
        messages.append(Message(role="user", content=followups[len(so_far) - 1]))
        return {}
    return {"status": "finished", "answer": json.dumps({TURNS_KEY: so_far}, ensure_ascii=False)}


def read_conversation(answer: Any) -> list[dict] | None:
    """The turns of a conversation answer, or None for an answer that is not one (a run that ended early)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except (ValueError, RecursionError):
            return None
    turns = answer.get(TURNS_KEY) if isinstance(answer, dict) else None
    if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("steps"), list)
                                              for t in turns):
        return None
    return turns
