"""Replays recorded responses: tests, demos and regression traces, with no model at all.

The file is a YAML list. Each entry is either the model's raw text (parsed with the run's response format,
exactly as a local model's output would be) or a mapping:

    - text: "Let me compute that."
      tool_calls: [{name: calculator, arguments: {expression: "2+3"}}]
      delay: 0.2          # seconds to wait first, to stand in for a model's latency
    - {text: "I know it now.", answer: "5"}      # an explicit final answer
    - "<tool_call>{\"name\": \"final_answer\", \"arguments\": {\"answer\": \"5\"}}</tool_call>"

The n-th response answers the agent's n-th policy step: the `step` every agent passes with its call (its
checkpointed step count, so a resumed run continues where it stopped, and agents that rebuild the prompt
each step, like the computer-use and embodied agents, still get response n at step n). A caller that passes
no step gets the turn counted from the assistant messages of the conversation. Tokens are counted as
whitespace-separated words.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from ..state import Message, NotPlainJSON, ToolCall, plain_json
from .base import PolicyError, Response, word_count
from .formats import FORMATS


class ScriptedPolicy:
    def __init__(self, responses: list[Any], source: str = "<script>"):
        self.name = f"scripted:{source}"
        self.source = source
        self.responses = [self._check(i, r) for i, r in enumerate(responses)]

    @classmethod
    def from_spec(cls, spec) -> ScriptedPolicy:
        """`scripted:FILE`: the responses listed in a YAML file."""
        return cls.from_file(spec.name.partition(":")[2])

    @classmethod
    def from_file(cls, path: str) -> ScriptedPolicy:
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PolicyError(f"scripted policy: file not found: {path}") from None
        except (OSError, yaml.YAMLError) as err:
            raise PolicyError(f"scripted policy: cannot read {path}: {err}") from None
        if not isinstance(data, list):
            raise PolicyError(f"scripted policy {path}: expected a YAML list of responses, got {type(data).__name__}")
        return cls(data, source=str(p))

    def _check(self, i: int, r: Any) -> dict:
        if isinstance(r, str):
            return {"raw": r}
        if not isinstance(r, dict):
            raise PolicyError(f"scripted policy {self.source}: response {i + 1} must be a string or a mapping")
        unknown = set(r) - {"text", "tool_calls", "answer", "delay", "tokens_in", "tokens_out"}
        if unknown:
            raise PolicyError(f"scripted policy {self.source}: response {i + 1} has unknown keys {sorted(unknown)}")
        # A script's own calls must be plain JSON data too (YAML has .nan and dates): say so at load, not mid-run.
        for j, c in enumerate(r.get("tool_calls") or []):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise PolicyError(f"scripted policy {self.source}: response {i + 1}, tool call {j + 1} needs a name")
            try:
                plain_json(c.get("arguments") or {})
            except NotPlainJSON as err:
                raise PolicyError(f"scripted policy {self.source}: response {i + 1}, "
                                  f"tool call {j + 1}: {err}") from None
        return r

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        turn = self._turn(messages, generation.get("step"))
        if turn >= len(self.responses):
            raise PolicyError(f"scripted policy {self.source}: ran out of responses at turn {turn + 1} "
                              f"(it has {len(self.responses)})")
        r = self.responses[turn]
        started = time.perf_counter()
        if r.get("delay"):
            time.sleep(float(r["delay"]))
        prompt_words = sum(word_count(m.content) for m in messages)
        answer = None
        if "raw" in r:
            fmt = generation.get("format") or FORMATS["json"]
            parsed = fmt.parse(r["raw"], id_prefix=f"call{turn + 1}")
            text, calls, issues, raw, answer = parsed.content, parsed.calls, parsed.issues, r["raw"], parsed.answer
        else:
            calls = [ToolCall(id=f"call{turn + 1}_{j + 1}", name=c["name"], arguments=c.get("arguments") or {})
                     for j, c in enumerate(r.get("tool_calls") or [])]
            text, issues, raw = r.get("text", ""), [], r.get("text", "")
            if r.get("answer") is not None:
                answer = str(r["answer"])
        return Response(text=text, tool_calls=calls, issues=issues, raw=raw, answer=answer,
                        tokens_in=int(r.get("tokens_in", prompt_words)),
                        tokens_out=int(r.get("tokens_out", word_count(raw) + 3 * len(calls))),
                        latency_s=time.perf_counter() - started)

    @staticmethod
    def _turn(messages: list[Message], step: Any) -> int:
        """The 0-based index of the response to give: the agent's step less one, else the assistant turns so far."""
        if step is None:
            return sum(1 for m in messages if m.role == "assistant")
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise PolicyError(f"scripted policy: step must be a positive integer, got {step!r}")
        return step - 1
