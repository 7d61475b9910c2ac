"""`python(code)`: run Python in the episode's sandboxed, stateful kernel (DeepEyesV2's code tool).

Variables persist between calls within an episode and never leak into another episode. Task images are
preloaded as `image_1, image_2, …` (PIL images). The observation follows DeepEyesV2's template; figures and
shown images come back as artifacts, at most the sandbox's image limit per call. A cell gets the sandbox's
cell_seconds, or less when the run's time budget has less left (ToolContext.deadline).
"""

from __future__ import annotations

from ..deadline import BUDGET_SPENT, seconds_left
from .registry import ToolContext, ToolError, ToolResult, tool


def format_result(res) -> str:
    """DeepEyesV2's observation template for a code cell."""
    parts = ["Code execution result:"]
    parts.append("stdout:\n" + (res.stdout.rstrip() if res.stdout.strip() else "(empty)"))
    if res.value is not None:
        parts.append("value:\n" + res.value)
    err = (res.stderr.rstrip() + ("\n" if res.stderr.strip() and res.error else "")
           + (res.error or "").rstrip()).strip()
    parts.append("stderr:\n" + (err or "(empty)"))
    parts.append(f"Images: {len(res.images)}")
    parts += [f"note: {n}" for n in res.notes]
    return "\n".join(parts)


@tool(timeout=None, cost=1.0, quality=0.9, tags=("code",))
def python(code: str, ctx: ToolContext) -> ToolResult:
    """Run Python code in a sandboxed kernel that keeps its variables between calls. Print what you need;
    the value of a last expression is shown too. Task images are loaded as image_1, image_2, … (PIL).

    Args:
        code: Python source to run
    """
    sandbox = ctx.sandbox
    if sandbox is None or not hasattr(sandbox, "run"):
        raise ToolError("python: this task has no code sandbox; set `sandbox: process` in the task spec")
    own = sandbox.limits.cell_seconds
    timeout = cell_timeout(own, ctx.deadline)
    res = sandbox.run(code, timeout=timeout)
    artifacts = [ctx.artifact(p, name=p.name, mime="image/png") for p in res.images if p.is_file()]
    content = format_result(res)
    if timeout < own and not res.ok:
        content += (f"\nnote: this cell had {timeout:.1f} s, what was left of the run's time budget "
                    f"(limits.max_seconds), not the sandbox's {own:g} s")
    return ToolResult(content=content, artifacts=artifacts, data=res)


def cell_timeout(own: float, deadline: float | None) -> float:
    """The smaller of a cell's own limit and what is left before the step's deadline; ToolError when none is."""
    left = seconds_left(deadline)
    if left is None or left >= own:
        return own
    if left <= 0:
        raise ToolError(f"python: not run: {BUDGET_SPENT}")
    return left
