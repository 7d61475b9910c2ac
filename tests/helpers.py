"""Test doubles that stand in for a model (never for the code under test) and a side-effect tool."""

import os
import re
from pathlib import Path

from toolpath.policies.base import Response
from toolpath.state import ToolCall
from toolpath.tools.registry import tool


class ArithPolicy:
    """Reads the arithmetic out of the question, calls the calculator, then answers with its result."""

    def __init__(self, spec=None):
        self.name = "python:arith"

    def respond(self, messages, tools, **gen):
        last = messages[-1]
        if last.role == "tool":
            return Response(text="",
                            tool_calls=[ToolCall(id="c2", name="final_answer", arguments={"answer": last.content})],
                            tokens_in=10, tokens_out=5)
        q = next(m.content for m in messages if m.role == "user")
        m = re.search(r"What is (.+?)\?", q)
        expr = m.group(1).replace("times", "*").replace("divided by", "/")
        return Response(text="", tool_calls=[ToolCall(id="c1", name="calculator", arguments={"expression": expr})],
                        tokens_in=20, tokens_out=8)


@tool(timeout=5.0, cost=0.0, quality=1.0)
def tick(label: str) -> str:
    """Append a label to $TICK_FILE: a side effect that shows whether a tool call ran twice.

    Args:
        label: the text to append
    """
    with Path(os.environ["TICK_FILE"]).open("a") as f:
        f.write(label + "\n")
        f.flush()
        os.fsync(f.fileno())
    return f"ticked {label}"


@tool(timeout=0.3)
def slow(seconds: float) -> str:
    """Sleep, to test tool timeouts.

    Args:
        seconds: how long
    """
    import time

    time.sleep(seconds)
    return "done"


class SlowArithPolicy(ArithPolicy):
    """ArithPolicy behind a model that takes TOOLPATH_TEST_LATENCY seconds (default 0.05) per call: I/O-bound
    episodes for the eval runner's parallelism and kill/resume tests."""

    def respond(self, messages, tools, **gen):
        import time

        time.sleep(float(os.environ.get("TOOLPATH_TEST_LATENCY", "0.05")))
        return super().respond(messages, tools, **gen)


class FlakyArithPolicy(ArithPolicy):
    """ArithPolicy whose first call of each episode fails as a transient server error would."""

    def respond(self, messages, tools, **gen):
        from toolpath.policies.base import PolicyError

        if len(messages) <= 2 and not getattr(self, "_failed_once", False):
            self._failed_once = True
            raise PolicyError("503 Service Unavailable (test)", transient=True)
        self._failed_once = False
        return super().respond(messages, tools, **gen)


class HangingPolicy:
    """A model that never answers: the runner's time limit must stop the episode."""

    def __init__(self, spec=None):
        self.name = "python:hang"

    def respond(self, messages, tools, **gen):
        import time

        time.sleep(3600)


from toolpath.evals.benchmarks import Score  # noqa: E402
from toolpath.evals.benchmarks.arith import Arith  # noqa: E402


class TwoModeArith(Arith):
    """arith with a stricter 'official' scorer and weights that differ by mode: toolpath gives every right
    answer 1 with weights 1, 2, 1, 2, …; official gives odd records 0 and weighs them 3. The plumbing of
    scoring modes and weighted scores, seen through a real eval."""

    name = "two_mode_arith"

    def score(self, record, answer):
        base = Arith.score(self, record, answer).value
        odd = int(record.id.rsplit("-", 1)[-1]) % 2 == 1
        if self.scoring == "official":
            return Score(0.0 if odd else base, {"plain": base}, weight=3.0 if odd else 1.0)
        return Score(base, {"plain": base}, weight=2.0 if odd else 1.0)
