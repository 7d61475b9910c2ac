"""FaSTA*'s fast-slow image-editing agent: subtask chain → per subtask a learned subroutine (fast) or A* (slow).

    START → plan ─► subtask ─┬─ more subtasks ─┐ (loops on itself, one node run per subtask)
                     ▲       └────────────────►└─► finish ─► END
                     └───────────────┘

`plan` turns the instruction into a chain of subtasks: by the rule-based grammar (planners/subtasks.py; no
model needed, the default) or, with `agent.params.planner: policy`, by asking the model for a JSON chain
(untrusted: validated, and the grammar is tried when the model's chain is unusable). Each `subtask` step runs
planners.executor.FastSlow: the best subroutine whose preconditions hold, quality-checked after every tool;
on failure A* over the subtask's tools. The step records every choice — the features, the subroutine tried
and where it failed, A*'s expansions, tool calls and search tree — and the edited image as an artifact.
After each subtask the library learns when k new successful traces are in (induction, recorded as its own
step). The answer is JSON: {"image": path of the final PNG, "subtasks": [...], "cost_s", "tool_calls"}.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictBool

from ..state import AgentState, Message
from ..state import initial_state as _common_initial
from .base import Agent, AgentParams
from .events import ToolStep
from .nodes import END, Runtime, Step, budget_exceeded, compile_graph, node, record_step

SYSTEM_PROMPT = """You split an image-editing instruction into subtasks. Reply with one JSON list, one object per
subtask in the order they should run: {"id": "s1", "kind": KIND, "target": {"name": "blue square", "color": "blue",
"shape": "square"}, "params": {...}, "parents": ["s0"]}. KIND is one of recolor {color}, remove, replace {color,
shape}, text_remove {text?}, text_replace {old?, text}, text_add {text, position}, background {color},
upscale {factor}. The target names only what the instruction says: you cannot see the image, so leave out a
colour or shape the instruction does not give ("the circle" is {"name": "circle", "shape": "circle"}). Parents
are the ids of earlier subtasks this one depends on."""


class EditAgentState(AgentState, total=False):
    chain: list[dict]  # the subtasks, as JSON
    index: int  # the next subtask to run
    image: str  # path of the current image (an artifact, or the input)
    results: list[dict]  # SubtaskRun.summary() per subtask done


@dataclass
class EditContext:
    executor: Any = None  # the FastSlow of this process: it holds the library and the priors table


def initial_state() -> AgentState:
    return {**_common_initial(), "chain": [], "index": 0, "image": "", "results": []}


class FastSlowParams(AgentParams):
    alpha: float = Field(1.0, ge=0.0, le=2.0, description="cost–quality trade-off α in [0, 2] of C^α·(2−Q)^(2−α)")
    threshold: float = Field(0.8, ge=0.0, le=1.0, description="a step whose measured quality is under this fails")
    planner: Literal["rules", "policy"] = Field(
        "rules", description="rules (the instruction grammar, no model) or policy (the model writes the chain)")
    fast: StrictBool = Field(True, description="try learned subroutines first; false is pure A*")
    learn: StrictBool = Field(True, description="log traces and induce subroutines")
    k: int = Field(20, gt=0, description="successful traces between two inductions")
    library: str | None = Field(None, description=(
        "the subroutine library file (default $TOOLPATH_HOME/subroutines/library.json); like output, under the "
        "spec's folder, an --allow-path folder or $TOOLPATH_HOME"))
    output: str | None = Field(None, description="also write the final image to this path: relative to the spec's "
                                                 "folder, and under it, an --allow-path folder or $TOOLPATH_HOME")


def _executor(rt: Runtime):
    """One FastSlow per runtime (per process): it holds the library and the priors table."""
    if rt.context.executor is None:
        from ..planners.executor import FastSlow
        from ..planners.library import Library
        from ..planners.subroutines import default_library_path

        p = rt.params
        path = p.library  # absolute, checked where the episode started (reach.py)
        library = Library(Path(path) if path else default_library_path()) if (p.fast or p.learn) else None
        rt.context.executor = FastSlow(library, alpha=p.alpha, threshold=p.threshold, use_fast=p.fast,
                                          learn=p.learn, k=p.k)
    return rt.context.executor


def _record(rt: Runtime, state: AgentState, name: str, content: str, started: float, seconds: float,
            update: dict, images=(), **extra) -> dict:
    """A planner's step: its text as the one message (a tool message for the subtask runs)."""
    msg = Message(role="tool" if name == "tools" else "assistant", content=content, name=name, images=list(images))
    return record_step(rt, state, name, [msg], started, seconds, update, **extra)


# ---- plan ----------------------------------------------------------------------------------------------

def _chain_from_policy(rt: Runtime, step: int) -> tuple[list | None, str, int, int]:
    """(subtasks or None, what happened, tokens in, tokens out)."""
    from ..planners.subtasks import subtasks_from_policy
    from ..policies.base import PolicyError

    try:
        resp = rt.ask(rt.transcript, [], step=step, seed=rt.spec.seed)
    except PolicyError as err:
        return None, f"the model could not be asked: {err}", 0, 0
    text = resp.raw or resp.text
    try:
        return subtasks_from_policy(text), f"the model's chain: {text.strip()[:500]}", resp.tokens_in, resp.tokens_out
    except ValueError as err:
        return None, f"the model's chain was unusable ({err}); reply was: {text.strip()[:300]}", \
            resp.tokens_in, resp.tokens_out


def make_plan_node(rt: Runtime):
    from langgraph.types import Command

    from ..planners.executor import subtask_to_json
    from ..planners.subtasks import describe_chain, parse_instruction

    def plan_node(state: EditAgentState, st: Step) -> Any:
        started = st.started
        images = rt.spec.inputs.images
        if len(images) != 1:
            return Command(update={"status": "failed", "error": f"the edit agent needs exactly one input image "
                                   f"(inputs.images), got {len(images)}"}, goto=END)
        notes, chain, tin, tout = [], None, 0, 0
        if rt.params.planner == "policy":
            chain, note, tin, tout = _chain_from_policy(rt, state["steps"] + 1)
            notes.append(note)
        if chain is None:
            try:
                chain = parse_instruction(rt.spec.instruction)
                notes.append("chain from the instruction grammar")
            except ValueError as err:
                dt = st.seconds
                update = _record(rt, state, "plan", "\n".join(notes + [str(err)]), started, dt, {},
                                 error=str(err))
                return Command(update={**update, "steps": state["steps"] + 1, "status": "failed",
                                       "error": f"instruction: {err}"}, goto=END)
        text = describe_chain(chain)
        dt = st.seconds
        update = _record(rt, state, "plan", text + "\n(" + "; ".join(notes) + ")", started, dt,
                         {"chain": [subtask_to_json(s) for s in chain], "image": str(images[0]),
                          "steps": state["steps"] + 1, "tokens_in": state["tokens_in"] + tin,
                          "tokens_out": state["tokens_out"] + tout}, tokens_in=tin, tokens_out=tout,
                         chain=[subtask_to_json(s) for s in chain])
        rt.emit(ToolStep(update["steps"], "plan", dt, False, text))
        return Command(update=update, goto="subtask" if chain else "finish")

    return node(rt, plan_node)


# ---- subtask -------------------------------------------------------------------------------------------

def _load(path: str):
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


def _png(image) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def _describe(run) -> str:
    lines = [f"{run.subtask.label}: {run.via}, toolpath {' → '.join(run.path) or '(none)'}, "
             f"quality {run.quality:.2f}, {run.cost:.2f} s, {run.tool_calls} tool calls"]
    if run.fast:
        f = run.fast
        lines.append(f"  fast path: subroutine {f['subroutine']} ({' → '.join(f['tools'])}) "
                     + ("passed" if f["ok"] else f"failed at {f['failed_at']}"))
    elif run.via != "fixed":
        lines.append("  fast path: no subroutine's preconditions hold")
    if run.search is not None:
        s = run.search
        lines.append(f"  A*: {s.expansions} expansions, {s.tool_calls} tool calls, "
                     + ("found" if s.found else f"nothing passed: {s.reason}"))
    lines.append("  features: " + ", ".join(f"{k}={v:.3g}" for k, v in sorted(run.features.items())))
    return "\n".join(lines)


def make_subtask_node(rt: Runtime):
    from langgraph.types import Command

    from ..planners.executor import subtask_from_json

    def subtask_node(state: EditAgentState, st: Step) -> Any:
        reason = budget_exceeded(state, rt.spec)
        if reason:
            return Command(update={"status": "budget_exhausted", "error": reason}, goto="finish")
        started = st.started
        ex = _executor(rt)
        subtask = subtask_from_json(state["chain"][state["index"]])
        run = ex.run(_load(state["image"]), subtask)
        images, image = [], state["image"]
        if run.ok:
            ref = rt.ctx.artifact(_png(run.state.image), name=f"{subtask.id}_{subtask.kind}.png", mime="image/png")
            images, image = [ref], ref.path
        dt = st.seconds
        summary = run.summary()
        content = _describe(run)
        extra: dict = {"subtask": summary, "features": run.features}
        if run.search is not None:
            extra["search_tree"] = run.search.tree
        if run.fast:
            extra["fast_steps"] = [{"tool": s.tool, "quality": s.quality, "seconds": s.seconds, "error": s.error}
                                   for s in run.fast["steps"]]
        update = _record(rt, state, "tools", content, started, dt,
                         {"index": state["index"] + 1, "image": image, "results": state["results"] + [summary],
                          "steps": state["steps"] + 1},
                         images=images, observations=[{"call_id": subtask.id, "tool": "fast_slow", "content": content,
                                                       "error": not run.ok,
                                                       "artifacts": [a.model_dump() for a in images]}], **extra)
        rt.emit(ToolStep(update["steps"], subtask.kind, dt, not run.ok, content))
        report = ex.learn_if_due()
        if report is not None:
            update = _record(rt, {**state, **update}, "learn", _describe_induction(report), time.time(), 0.0, update,
                             induction=_induction_json(report))
        more = update["index"] < len(state["chain"])
        return Command(update=update, goto="subtask" if more else "finish")

    return node(rt, subtask_node)


def _describe_induction(report) -> str:
    acc = getattr(report, "accepted", [])
    rej = getattr(report, "rejected", [])
    return (f"induction: {len(getattr(report, 'proposed', []))} proposed, {len(acc)} accepted, {len(rej)} rejected, "
            f"{getattr(report, 'cached', 0)} validations reused")


def _induction_json(report) -> Any:
    from dataclasses import asdict, is_dataclass

    return json.loads(json.dumps(asdict(report) if is_dataclass(report) else str(report), default=str))


# ---- finish --------------------------------------------------------------------------------------------

def make_finish_node(rt: Runtime):
    from langgraph.types import Command

    def finish_node(state: EditAgentState, st: Step) -> Any:
        results = state["results"]
        answer = {"image": state["image"], "subtasks": results,
                  "cost_s": round(sum(r["cost_s"] for r in results), 4),
                  "tool_calls": sum(r["tool_calls"] for r in results)}
        out = rt.params.output  # absolute, checked where the episode started (reach.py)
        if out and state["image"]:
            from .reach import copy_checked

            try:
                copy_checked(Path(state["image"]), Path(out))
                answer["output"] = out
            except OSError as err:  # the edited image is kept as the run's artifact all the same
                answer["output_error"] = f"agent.params.output: not written: {err}"
        failed = [r["label"] for r in results if not r["ok"]]
        update: dict = {"answer": json.dumps(answer, ensure_ascii=False)}
        if state["status"] == "running":
            update["status"] = "finished"
            if failed:
                update["error"] = "subtasks that failed (the image is left as it was for them): " + "; ".join(failed)
        return Command(update=update, goto=END)

    return node(rt, finish_node)


class FastSlowAgent(Agent):
    name = "fast_slow"
    Params = FastSlowParams
    written_params = ("library", "output")
    default_tools = []  # edit tools are called by the planners, not by the model
    sandbox = None
    prompt = SYSTEM_PROMPT
    context_type = EditContext
    initial_state = staticmethod(initial_state)

    def needs_policy(self, params: FastSlowParams) -> bool:
        """Only a model-written chain needs a model; the default grammar runs without loading one."""
        return params.planner == "policy"

    def build(self, rt: Runtime, checkpointer=None):
        return compile_graph(rt, EditAgentState, {
            "plan": (make_plan_node(rt), ("subtask", "finish", END)),
            "subtask": (make_subtask_node(rt), ("subtask", "finish")),
            "finish": (make_finish_node(rt), (END,))}, checkpointer)


AGENT = FastSlowAgent()
