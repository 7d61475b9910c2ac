"""ScaleCUA's computer-use agent: screenshot → one step in the unified GUI action space → executed on the screen.

    START → observe → policy ─┬─ actions ─► act ─┬─► observe …
                              │                  └─ response / terminate / budget ─► finish → END
                              └─ bad reply (told what was wrong) ─► observe

Modes (agent.params.mode): `grounding` (one screenshot in, one point out; no sandbox: the screenshot is the
task's input image, the answer is JSON {"point": [x, y]} in its pixels or {"refused": true}), `direct`
(<operation> + <action> per step) and `reasoned` (<think> first). Each step the policy sees what ScaleCUA's
model sees: the system prompt for the platform, the task, the history as "Step i: <operation>", and the
current screenshot only; a policy that declares `observes = (..., "dom")` also gets the page's elements as
JSON lines, boxes in its own coordinates.

The model's coordinates (agent.params.coordinates: absolute pixels of the smart-resized screenshot,
normalized, or grid1000) are converted to screen pixels by toolpath.coords before an action runs, and the
step records both. A line that cannot be parsed or converted is reported back; the other lines still run.
A step's actions share what is left of the run's max_seconds: each gets the deadline (a wait is cut short,
typing stops), none starts once it has passed, and those are reported as not run before the run ends as
budget_exhausted.
When the episode ends on a browser, the probes the spec's evaluator asks for (evaluator.options.probes) are
evaluated in the live page and recorded as the run's final state, which environment-scored benchmarks
(WebArena, MiniWoB++) score.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from ..coords import CONVENTIONS, MAX_PIXELS, MIN_PIXELS
from ..deadline import BUDGET_SPENT
from ..policies.base import observes
from ..policies.formats.scalecua import MODES
from ..state import AgentState, Message, ToolCall
from ..state import initial_state as _common_initial
from ..tools.gui import PLATFORMS
from .base import Agent, AgentParams
from .events import PolicyStep
from .nodes import (
    END,
    Runtime,
    Step,
    budget_exceeded,
    compile_graph,
    execute_calls,
    loop_update,
    node,
    not_run_summary,
    out_of_time,
    run_call,
)

_PLATFORM_PROMPT = {
    "desktop": "You are a GUI agent operating a computer desktop (Linux, X11) with mouse and keyboard.",
    "web": "You are a GUI agent operating a web browser with mouse and keyboard.",
    "phone": "You are a GUI agent operating a mobile phone through touch and text input.",
}
SYSTEM_PROMPT = _PLATFORM_PROMPT["desktop"]  # without a spec; system_prompt names the run's platform
POINTING = ("click", "doubleClick", "rightClick", "moveTo", "long_press")  # actions whose point grounding answers
# What one step keeps of a model's reply for the prompts after it: a long <operation> would be re-sent (and
# checkpointed) at every later step, and a reply of thousands of failing lines would fill the next prompt.
MAX_OPERATION_CHARS = 1000
MAX_FAILURES_SHOWN = 20
_SANDBOX_PLATFORM = {"browser": "web", "desktop": "desktop"}


class ComputerUseParams(AgentParams):
    # mode and platform default to what the spec's sandbox shows (ComputerUse.check_spec); these are the
    # defaults without one: a screenshot to ground a point in.
    mode: Literal[MODES] = Field("grounding", description="grounding, direct (default with a GUI sandbox) or "
                                                          "reasoned")
    platform: Literal[tuple(PLATFORMS)] = Field("desktop", description="web, desktop or phone (default: from the "
                                                                       "sandbox, desktop without one)")
    coordinates: Literal[CONVENTIONS] = Field("absolute", description="absolute (pixels of the smart_resized "
                                                                      "screenshot), normalized or grid1000")
    min_pixels: int = Field(MIN_PIXELS, gt=0, description="smart_resize's lower bound on the model image's area")
    max_pixels: int = Field(MAX_PIXELS, gt=0, description="smart_resize's upper bound on the model image's area")
    history: int | None = Field(None, ge=0, description="how many earlier operations the prompt lists (default "
                                                        "all)")

    @model_validator(mode="after")
    def _pixel_bounds(self):
        if self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels ({self.min_pixels}) is above max_pixels ({self.max_pixels})")
        return self


class ComputerUseState(AgentState, total=False):
    operations: list[str]  # "Step i" history: the operation of each policy step
    feedback: str  # what was wrong with the last reply or its actions, shown once in the next prompt
    screen: list[int]  # size of the current screenshot
    shot: dict  # ArtifactRef of the current screenshot
    elements: list[dict]  # the page's elements at the last observation (web)


@dataclass
class ComputerUseContext:
    format: Any = None  # the run's ScaleCUAFormat, made once the action space is known


def initial_state() -> AgentState:
    return {**_common_initial(), "operations": [], "feedback": "", "screen": [], "shot": {}, "elements": []}


def _format(rt: Runtime):
    if rt.context.format is None:
        from ..policies.formats.scalecua import ScaleCUAFormat

        p = rt.params
        rt.context.format = ScaleCUAFormat(mode=p.mode, platform=p.platform, convention=p.coordinates,
                                           min_pixels=p.min_pixels, max_pixels=p.max_pixels, schemas=rt.schemas)
    return rt.context.format


# ---- observe ------------------------------------------------------------------------------------------

def _observe(rt: Runtime) -> tuple[bytes, dict]:
    """(PNG, facts) of the current screen: the sandbox's, or in grounding mode the task's input image."""
    box = rt.ctx.sandbox
    if box is not None and callable(getattr(box, "screenshot", None)):
        return box.screenshot(), (box.observe() if callable(getattr(box, "observe", None)) else {})
    images = list(rt.ctx.images.values())
    if not images:
        raise ValueError("grounding needs the screenshot as the task's input image (inputs.images)")
    return images[0].read_bytes(), {}


def make_observe_node(rt: Runtime):
    from langgraph.types import Command
    from PIL import Image

    def observe_node(state: ComputerUseState, st: Step) -> Any:
        try:
            png, facts = _observe(rt)
            with Image.open(io.BytesIO(png)) as im:
                size = list(im.size)
        except Exception as err:  # noqa: BLE001 — a screen that cannot be read ends the run, named
            from ..sandboxes.base import SandboxError

            what = str(err) if isinstance(err, (SandboxError, ValueError)) else f"{type(err).__name__}: {err}"
            return Command(update={"status": "failed", "error": f"observe: {what}"}, goto="finish")
        n = state["steps"] + 1
        ref = rt.store.put_artifact(png, name=f"screen_{n}.png", mime="image/png")
        lines = [f"{size[0]}x{size[1]} pixels"] + [f"{k}: {facts[k]}" for k in ("url", "title", "focused")
                                                    if facts.get(k)]
        if facts.get("blocked"):
            lines.append("blocked by the allow-list: " + ", ".join(map(str, facts["blocked"])))
        if facts.get("windows"):
            lines.append("windows: " + "; ".join(str(w.get("title", "")) for w in facts["windows"]))
        msg = Message(role="user", content="\n".join(lines), name="observe", images=[ref])
        update = st.record("observe", [msg],
                           {"screen": size, "shot": ref.model_dump(), "elements": list(facts.get("elements") or [])})
        return Command(update=update, goto="policy")

    return node(rt, observe_node)


# ---- policy -------------------------------------------------------------------------------------------

def _elements_in(elements: list[dict], space) -> list[dict]:
    """The page's elements, boxes converted to the model's coordinates (those that cannot be, left out)."""
    out = []
    for e in elements:
        box = e.get("box")
        try:
            x1, y1 = space.from_screen(box[0], box[1])
            x2, y2 = space.from_screen(max(box[0], box[2] - 1), max(box[1], box[3] - 1))
        except (TypeError, IndexError, ValueError, ZeroDivisionError):
            continue
        out.append({**e, "box": [x1, y1, x2, y2]})
    return out


def _element_lines(elements: list[dict], space) -> list[str]:
    """The page's elements as JSON lines, boxes converted to the model's coordinates."""
    return [json.dumps(e, ensure_ascii=False) for e in _elements_in(elements, space)]


def _shown_operations(rt: Runtime, state: ComputerUseState) -> list[tuple[int, str]]:
    """(step, operation) of the earlier steps the prompt shows: the last `history` of them (all when 0)."""
    ops = state.get("operations") or []
    keep = rt.params.history
    return list(enumerate(ops, 1))[-keep:] if keep else list(enumerate(ops, 1))


def screen_observation(rt: Runtime, state: ComputerUseState):
    """What a policy that observes the screen is handed besides the prompt (toolpath.observations)."""
    from ..observations import ScreenObservation

    w, h = state["screen"]
    dom = "dom" in observes(rt.policy) and state.get("elements")
    return ScreenObservation(task=rt.spec.instruction, history=tuple(op for _, op in _shown_operations(rt, state)),
                             screenshot=state["shot"].get("path"), screen=(w, h),
                             elements=tuple(_elements_in(state["elements"], _format(rt).space(w, h)) if dom else ()),
                             urls=tuple(rt.spec.inputs.urls))


def prompt_messages(rt: Runtime, state: ComputerUseState) -> list[Message]:
    """What the policy sees this step (ScaleCUA's layout: system prompt, task + history + current screenshot)."""
    from ..state import ArtifactRef

    fmt = _format(rt)
    w, h = state["screen"]
    space = fmt.space(w, h)
    system = "\n\n".join([_PLATFORM_PROMPT[fmt.platform], fmt.guide(rt.schemas), space.describe()])
    ops = state.get("operations") or []
    shown = _shown_operations(rt, state)
    text = [f"Task: {rt.spec.instruction}"]
    if rt.spec.inputs.urls:
        text.append("URLs: " + ", ".join(rt.spec.inputs.urls))
    if shown:
        text.append("Previous operations:\n" + "\n".join(f"Step {i}: {op}" for i, op in shown))
    if state.get("feedback"):
        text.append(state["feedback"])
    if "dom" in observes(rt.policy) and state.get("elements"):
        text.append("Elements (boxes as [x1, y1, x2, y2] in your coordinates):")
        text.extend(_element_lines(state["elements"], space))
    text.append(f"Step {len(ops) + 1}: the current screenshot is attached. " + fmt.shape())
    shot = ArtifactRef.model_validate(state["shot"])
    return [Message(role="system", content=system), Message(role="user", content="\n".join(text), images=[shot])]


def make_policy_node(rt: Runtime):
    from langgraph.types import Command

    from ..policies.base import PolicyError, observation_kwargs

    def policy_node(state: ComputerUseState, st: Step) -> Any:
        step = state["steps"] + 1
        fmt = _format(rt)
        try:
            resp = rt.ask(prompt_messages(rt, state), rt.schemas, step=step, format=fmt,
                          **observation_kwargs(rt.policy, lambda: screen_observation(rt, state)))
        except PolicyError as err:
            update = st.record("policy", [], {}, error=str(err))
            return Command(update={**update, "steps": step, "status": "failed", "error": f"policy: {err}"},
                           goto="finish")
        calls = [c.model_dump() for c in resp.tool_calls]
        operation = _shorten(resp.text.strip() or "; ".join(c.name for c in resp.tool_calls) or "(no action)",
                             MAX_OPERATION_CHARS)
        update: dict[str, Any] = {"steps": step, "pending": calls, "operations": [*state["operations"], operation],
                                  "feedback": fmt.feedback(resp.issues) if resp.issues else "",
                                  "tokens_in": state["tokens_in"] + resp.tokens_in,
                                  "tokens_out": state["tokens_out"] + resp.tokens_out}
        if not calls and not resp.issues:
            update["feedback"] = fmt.no_action
        msg = Message(role="assistant", content=resp.text, tool_calls=resp.tool_calls)
        update = st.record("policy", [msg], update, raw=resp.raw, issues=resp.issues, latency=resp.latency_s,
                           tokens_in=resp.tokens_in, tokens_out=resp.tokens_out)
        rt.emit(PolicyStep(step, st.seconds, resp.text, resp.tokens_in, resp.tokens_out,
                           [c.name for c in resp.tool_calls], resp.issues))
        if calls:
            return Command(update=update, goto="act")
        reason = budget_exceeded({**state, **update}, rt.spec)
        if reason:
            return Command(update={**update, "status": "budget_exhausted", "error": reason}, goto="finish")
        if fmt.mode == "grounding":  # one screenshot, one answer: a reply without a point declines
            why = "; ".join(resp.issues) or "no action"
            return Command(update={**update, "status": "finished",
                                   "answer": json.dumps({"refused": True, "reason": why})}, goto="finish")
        return Command(update=update, goto="observe")

    return node(rt, policy_node)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


# ---- act ----------------------------------------------------------------------------------------------

def to_screen_call(call: ToolCall, space) -> tuple[ToolCall, str]:
    """The call with its coordinates in screen pixels, and a note of the conversion; ValueError if off-screen."""
    from ..tools.gui import ACTIONS, point_fields

    if call.name not in ACTIONS:
        return call, ""
    args, notes = dict(call.arguments), []
    for f in point_fields(call.name):
        if f == ("x", "y"):
            if args.get("x") is None and args.get("y") is None:
                continue
            if args.get("x") is None or args.get("y") is None:
                raise ValueError("give both x and y, or neither")
            px, py = space.to_screen(args["x"], args["y"])
            notes.append(f"({args['x']:g}, {args['y']:g}) → screen ({px}, {py})")
            args["x"], args["y"] = px, py
        elif args.get(f) is not None:
            v = args[f]
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise ValueError(f"{f} must be [x, y]")
            px, py = space.to_screen(v[0], v[1])
            notes.append(f"{f} ({v[0]:g}, {v[1]:g}) → screen ({px}, {py})")
            args[f] = [px, py]
    return ToolCall(id=call.id, name=call.name, arguments=args), "; ".join(notes)


def _ending(call: ToolCall, mode: str) -> dict:
    """The run's outcome for response / terminate / call_user."""
    a = call.arguments
    if call.name == "response":
        return {"status": "finished", "answer": str(a.get("answer", ""))}
    if call.name == "call_user":
        if mode == "grounding":
            return {"status": "finished", "answer": json.dumps({"refused": True, "reason": "call_user"})}
        return {"status": "failed", "error": "the agent asked for the user's help (call_user)"}
    if str(a.get("status", "success")).lower() == "failure":
        info = str(a.get("info") or "")
        if mode == "grounding":
            return {"status": "finished", "answer": json.dumps({"refused": True, "reason": info})}
        return {"status": "failed",
                "error": f"the agent gave up: terminate(status='failure'){': ' + info if info else ''}"}
    return {"status": "finished", "answer": str(a.get("info") or "") or "success"}


def make_act_node(rt: Runtime):
    from langgraph.types import Command

    from ..tools.gui import ENDING

    def act_node(state: ComputerUseState, st: Step) -> Any:
        fmt = _format(rt)
        space = fmt.space(*state["screen"])
        calls = [ToolCall.model_validate(c) for c in state["pending"]]
        update: dict[str, Any] = {"pending": []}
        # Once the budget is spent no action starts on the screen, nor anything after it (a terminate after
        # actions that never ran would claim their success); an answer, which takes no time, still counts.
        done = execute_calls(rt, state, calls, lambda call: _act_one(rt, call, space, fmt.mode),
                             exempt=lambda call: fmt.mode == "grounding" or call.name in ENDING)
        problems = [o["content"] for o in done.observations[:len(done.observations) - len(done.skipped)]
                    if o.get("error")]
        if done.ended_by is not None:
            update.update(done.ending)
            after = [c.name for c in calls[done.ended_by + 1:]]
            if after:
                update["error"] = ((update.get("error") or "")
                                   + f" (not run after {calls[done.ended_by].name}: {', '.join(after)})")
        if done.skipped:
            problems.append(f"{not_run_summary(done.skipped)}: {BUDGET_SPENT}")
        if problems:
            update["feedback"] = failures_feedback(state.get("feedback"), problems)
        update = st.record("act", done.messages, update, observations=done.observations)
        if "status" in update:
            return Command(update=update, goto="finish")
        update.update(loop_update(state, state["pending"], rt.spec.limits.loop_repeats))
        reason = out_of_time(None if "status" in update else budget_exceeded({**state, **update}, rt.spec),
                             done.skipped)
        if reason:
            update.update(status="budget_exhausted", error=reason)
        return Command(update=update, goto="finish" if "status" in update else "observe")

    return node(rt, act_node)


def _act_one(rt: Runtime, call: ToolCall, space, mode: str) -> tuple[Any, dict | None]:
    """Carry out one call of the step: (its Observation, the run's outcome when a grounding point or an ending
    action ends the run, else None); any other call is run on the screen. Whatever goes wrong is an Observation
    with error=True."""
    from ..state import Observation
    from ..tools.gui import ENDING

    try:
        screen_call, note = to_screen_call(call, space)
    except ValueError as err:
        return Observation(call_id=call.id, tool=call.name, content=f"{call.name}: {err}", error=True), None
    if mode == "grounding" and call.name in POINTING and "x" in screen_call.arguments:
        point = [screen_call.arguments["x"], screen_call.arguments["y"]]
        ending = {"status": "finished", "answer": json.dumps({"point": point, "action": call.name})}
        return Observation(call_id=call.id, tool=call.name, content=f"point {note}"), ending
    if call.name in ENDING:
        return Observation(call_id=call.id, tool=call.name, content=f"{call.name}: episode ends"), _ending(call, mode)
    obs, _ = run_call(rt, screen_call)
    if note and not obs.error:
        obs = obs.model_copy(update={"content": f"{obs.content} [{note}]"})
    return obs, None


def failures_feedback(earlier: str | None, problems: list[str]) -> str:
    """The next prompt's note of what failed: the first MAX_FAILURES_SHOWN problems and how many more there were."""
    shown = ["- " + p for p in problems[:MAX_FAILURES_SHOWN]]
    if len(problems) > MAX_FAILURES_SHOWN:
        shown.append(f"- … and {len(problems) - MAX_FAILURES_SHOWN} more")
    return "\n".join(filter(None, [earlier, "These actions failed:", *shown]))


# ---- finish -------------------------------------------------------------------------------------------

def final_screenshot(rt: Runtime, state: ComputerUseState):
    """The screen as the episode left it (the last action's result), stored; None without a live screen."""
    box = rt.ctx.sandbox
    if box is None or not callable(getattr(box, "screenshot", None)):
        return None
    from ..sandboxes.base import SandboxError

    try:
        png = box.screenshot()
    except SandboxError:  # a screen that died at the end: the run's steps are all recorded already
        return None
    return rt.store.put_artifact(png, name="screen_final.png", mime="image/png")


def final_state(rt: Runtime) -> dict | None:
    """The live page's URL, title and the evaluator's probes, before the browser closes (None without one)."""
    box = rt.ctx.sandbox
    if box is None or not callable(getattr(box, "evaluate", None)):
        return None
    from ..sandboxes.base import SandboxError

    out: dict[str, Any] = {}
    try:
        facts = box.observe()
        out.update(url=facts.get("url"), title=facts.get("title"))
    except SandboxError as err:
        out["error"] = str(err)
    probes = (rt.spec.evaluator.options.get("probes") if rt.spec.evaluator else None) or []
    results = []
    for p in probes:
        entry = {"url": p.get("url", "last"), "js": p.get("js", "")}
        try:
            if entry["url"] != "last":
                box.goto(entry["url"])
            entry["value"] = box.evaluate(entry["js"])
        except SandboxError as err:
            entry["error"] = str(err)
        results.append(entry)
    out["probes"] = results
    return out


def make_finish_node(rt: Runtime):
    from langgraph.types import Command

    def finish_node(state: ComputerUseState, st: Step) -> Any:
        shot = final_screenshot(rt, state)  # before the probes, which may open other pages
        final = final_state(rt)
        update: dict[str, Any] = {}
        if state.get("status") == "running":  # routed here by an observe failure that set no status
            update["status"] = "failed"
        if final is not None or shot is not None:
            text = ("final state: " + json.dumps(final, ensure_ascii=False, default=str)[:2000] if final
                    else "final screen")
            msg = Message(role="assistant", name="finish", content=text, images=[shot] if shot else [])
            extra = {"final_state": final} if final is not None else {}
            update = st.record("finish", [msg], update, **extra)
        return Command(update=update, goto=END)

    return node(rt, finish_node)


class ComputerUse(Agent):
    name = "computer_use"
    Params = ComputerUseParams
    default_tools = []  # the platform's GUI actions, chosen in build()
    sandbox = None  # grounding needs none; the action modes need `sandbox: browser` or `sandbox: desktop`
    prompt = SYSTEM_PROMPT
    context_type = ComputerUseContext
    initial_state = staticmethod(initial_state)

    def check_spec(self, spec) -> ComputerUseParams:
        """The typed params, mode and platform defaulting to the sandbox's screen; ValueError naming what is
        wrong, before the episode starts."""
        kind = spec.sandbox.kind
        screen = {"mode": "direct", "platform": _SANDBOX_PLATFORM[kind]} if kind in _SANDBOX_PLATFORM else {}
        p = self.read_params({**screen, **spec.agent.params})
        if p.mode != "grounding" and kind not in _SANDBOX_PLATFORM:
            raise ValueError(f"agent computer_use in mode {p.mode!r} acts on a screen: set sandbox to browser or "
                             f"desktop (got {kind!r}), or use mode grounding with an input image")
        return p

    def system_prompt(self, spec, params: ComputerUseParams) -> str:
        """The task step's system prompt: the run's platform (each policy step adds the action guide)."""
        return _PLATFORM_PROMPT[params.platform]

    def build(self, rt: Runtime, checkpointer=None):
        from ..tools.registry import get_tool

        if rt.spec.tools is None:  # the platform's action space (a spec's allow-list narrows it)
            rt.tools = {n: get_tool(n) for n in PLATFORMS[rt.params.platform]}
            rt.schemas = [t.schema() for t in rt.tools.values()]
        rt.format = _format(rt)
        return compile_graph(rt, ComputerUseState, {
            "observe": (make_observe_node(rt), ("policy", "finish")),
            "policy": (make_policy_node(rt), ("act", "observe", "finish")),
            "act": (make_act_node(rt), ("observe", "finish")),
            "finish": (make_finish_node(rt), (END,))}, checkpointer)


AGENT = ComputerUse()
