"""The response grammars under generated hostile output (the corpus: tests/security/fuzz_replies.py).

10,000 replies per grammar from a fixed seed: no exception escapes a parser, no parse runs long, every call it
gives is plain JSON, nothing it reads is dropped without an issue, and every reply with an argument that is
not JSON data is reported. Then a few hundred of them drive real react episodes (real SQLite store), for the
two grammars that agent speaks: no run may end `failed` because of what the model wrote.
"""

from __future__ import annotations

import json
import time

import pytest

from toolpath.agents.episode import run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import parse_spec

from .fuzz_replies import GRAMMARS, parse, replies, violations

N, SEED = 10_000, 0
SLOW = 0.5       # CPU seconds for one parse: the largest replies here (300,000 characters) take under 0.1
HOPELESS = 2.0   # what no parse may take at all (a quadratic parser took minutes on these sizes)

@pytest.mark.parametrize("grammar", GRAMMARS)
def test_ten_thousand_generated_replies_per_grammar(grammar):
    crashes, wrong, slow = [], [], []
    reported = must_report = calls = 0
    for i, (text, must) in enumerate(replies(grammar, N, SEED)):
        started = time.thread_time()  # CPU time of this thread: other processes on the machine do not count
        try:
            result = parse(grammar, text)
        except Exception as err:  # noqa: BLE001 — that is the finding
            crashes.append(f"reply {i} {text[:80]!r}: {type(err).__name__}: {err}")
            continue
        spent = time.thread_time() - started
        if spent > SLOW:
            slow.append((round(spent, 3), i, len(text)))
        wrong += [f"reply {i} {text[:80]!r}: {v}" for v in violations(grammar, text, result, must)]
        reported += bool(result.issues)
        must_report += must
        calls += len(getattr(result, "calls", []))
    assert crashes == [], crashes[:5]
    assert wrong == [], wrong[:5]
    # Counted, not asserted one by one, so that a pause of the machine cannot fail the suite; a parser that is
    # not linear in its input shows on every large reply, and over the hopeless bound.
    assert len(slow) <= 2 and all(s < HOPELESS for s, _, _ in slow), slow
    # The corpus itself: hostile values, many broken replies, and valid calls that survived their mutation.
    assert must_report == N // 20 and N // 4 < reported < N
    assert grammar == "fsd" or calls > N // 10


def _react_spec(grammar: str, steps: int):
    return parse_spec({"id": "fuzz", "instruction": "What is 2+3?", "model": "scripted:none.yaml",
                       "agent": {"name": "react", "params": {"format": grammar}},
                       "limits": {"max_steps": steps, "loop_repeats": steps + 1}})


@pytest.mark.parametrize("grammar", ["json", "deepeyes"])
def test_fuzzed_replies_never_fail_a_real_episode(grammar, store):
    outputs = [text for text, _ in replies(grammar, 300, SEED + 1)]
    pos, runs = 0, 0
    while pos < len(outputs):
        chunk = outputs[pos:pos + 25]
        result = run_episode(_react_spec(grammar, len(chunk)), store, policy=ScriptedPolicy(chunk))
        runs += 1
        assert result.status in ("finished", "budget_exhausted", "looping"), (
            f"run {result.run_id} ended {result.status} at reply {pos + result.steps - 1}: {result.error}")
        for step in store.steps(result.run_id):  # what the viewer reads: strict JSON, no NaN
            json.dumps(step["payload"], allow_nan=False)
        pos += max(1, result.steps)
    assert runs >= 2
