"""pySpatial's visual-program agent: write a program against the spatial API, run it in the sandbox, answer.

    START → program ─► run ─┬─ ok ─────────────► answer ─► END
               ▲            ├─ error, repairs left ─┘ (back to program with the error)
               │            └─ error, none left ─► direct ─► END   (answered from the images alone, marked)
               └─ no program in the reply (counts as a failed attempt)

The reconstruction is made on the host before the first program runs (our code, not the model's; cached on
disk, so a resumed run does not redo it) and handed to the kernel, where `reconstruct(scene)` returns it.
The model's program runs only in the sandbox, under a per-program time limit (10 s by default, less when the
run's time budget has less left).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from ..policies.base import PolicyError
from ..state import AgentState, Message
from ..state import initial_state as _common_initial
from .base import Agent, AgentParams
from .events import PolicyStep, ToolStep
from .nodes import END, Runtime, Step, budget_exceeded, compile_graph, node, step_deadline

SYSTEM_PROMPT = """You answer spatial questions about a few images by writing one Python program.

The program gets `scene`: scene.images is the list of images (PIL, in the order the question names them)
and scene.question the question. These are already imported:
  reconstruct(scene) -> recon: recon.points (N,6: xyz and rgb), recon.extrinsics (one 4x4 world-to-camera
      matrix per image, OpenCV axes: x right, y down, z forward), recon.intrinsics, recon.registered (bool
      per image: False when that image's pose could not be recovered)
  describe_camera_motion(recon, i, j) -> str: how camera j moved and turned relative to camera i
  synthesize_novel_view(recon, pose, width, height) -> PIL image seen from `pose`
  rotate_left(E, degrees), rotate_right(E, degrees), turn_around(E), move_forward(E, d), move_backward(E, d)
  camera_center(E), yaw_between(E1, E2) (degrees, positive = camera 2 turned left)
  numpy as np

Reply with exactly one code block:
```python
def program(scene):
    ...
    return what_you_need  # text, numbers, or images (returned images are shown to you)
```

Example. Question: "Between image 1 and image 2, did the camera turn left or right?"
```python
def program(scene):
    recon = reconstruct(scene)
    return describe_camera_motion(recon, 0, 1)
```

Example. Question: "Standing where image 1 was taken, what is behind you?"
```python
def program(scene):
    recon = reconstruct(scene)
    return synthesize_novel_view(recon, turn_around(recon.extrinsics[0]), 320, 240)
```"""

ANSWER_PROMPT = ("Now answer the question from the program's result and the images. Reply with one JSON object: "
                 '{"reasoning": "…", "answer": "…"}. For multiple choice, the answer is the option letter.')
DIRECT_PROMPT = ("The program could not be made to work. Answer the question directly from the images instead. "
                 'Reply with one JSON object: {"reasoning": "…", "answer": "…"}.')

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S | re.I)
# Run after the model's program, in the kernel: show returned images (they come back as artifacts) and print
# the rest, so the answer step sees both.
_RUNNER = """
_tp_result = program(scene)
_tp_items = _tp_result if isinstance(_tp_result, (list, tuple)) else [_tp_result]
_tp_images = [x for x in _tp_items if hasattr(x, "save") and hasattr(x, "size")]
for _tp_im in _tp_images:
    _tp_im.show()
_tp_text = [x for x in _tp_items if not (hasattr(x, "save") and hasattr(x, "size"))]
print(repr(_tp_text[0] if len(_tp_text) == 1 and not isinstance(_tp_result, (list, tuple)) else _tp_text)[:4000])
if _tp_images:
    print(f"({len(_tp_images)} image(s) returned)")
"""


# Nodes annotate their argument with this type: LangGraph passes a node only the keys its annotation names.
class ProgramState(AgentState, total=False):
    phase: str
    attempts: int  # failed programs so far
    program: str | None
    mode: str  # "program", or "direct" once the program route was given up (kept in the trace)


@dataclass
class ProgramContext:
    reconstruction: str = "no reconstruction was attempted"  # what the host's reconstruction did, in words


def initial_state() -> AgentState:
    return {**_common_initial(), "phase": "program", "attempts": 0, "program": None, "mode": "program"}


# ---- the reconstruction, handed to the kernel ----------------------------------------------------------

def prepare_sandbox(rt: Runtime, box) -> None:
    """Reconstruct the task's images (cached) and define `scene` and `reconstruct` in the kernel."""
    from pathlib import Path

    images = [Path(p) for p in rt.spec.inputs.images]
    note, have = _reconstruct_into(images, rt.params.backend, rt.spec.instruction, box.workdir / "recon.npz")
    rt.context.reconstruction = note
    names = [f"inputs/{p.name}" for p in images]
    lines = ["import numpy as np",
             "from PIL import Image as _TpImage",
             "from toolpath.tools.spatial3d import (Reconstruction, describe_camera_motion, synthesize_novel_view,",
             "    rotate_left, rotate_right, turn_around, move_forward, move_backward, camera_center, yaw_between)",
             "class _TpScene:",
             "    pass",
             "scene = _TpScene()",
             f"scene.images = [_TpImage.open(p).convert('RGB') for p in {names!r}]",
             f"scene.question = {rt.spec.instruction!r}",
             f"_tp_recon = Reconstruction.load('recon.npz') if {have!r} else None",
             f"_tp_recon_note = {note!r}",
             "def reconstruct(scene, **options):",
             "    if _tp_recon is None:",
             "        raise RuntimeError('no reconstruction: ' + _tp_recon_note)",
             "    return _tp_recon"]
    box.preload("\n".join(lines))


def _reconstruct_into(images, backend: str, question: str, target) -> tuple[str, bool]:
    """(what happened, in words; whether a reconstruction was written to `target`)."""
    if len(images) < 2 and backend == "classic":
        return "the classic backend needs at least two images of the scene; this task has one", False
    from ..tools.spatial3d import QuestionImages, reconstruct

    t0 = time.perf_counter()
    try:
        recon = reconstruct(QuestionImages(images, question), backend=backend)
    except Exception as err:  # a backend that cannot run here (no OpenCV, no weights) or failed on these images
        return f"{backend} reconstruction failed: {type(err).__name__}: {err}", False
    recon.save(target)
    reg = int(recon.registered.sum())
    return (f"{backend} reconstruction: {len(recon.points)} points, {reg} of {len(recon)} camera poses recovered "
            f"({time.perf_counter() - t0:.1f} s)"), True


# ---- nodes ---------------------------------------------------------------------------------------------

def _policy(rt: Runtime, state: AgentState, st: Step, prompt: str | None, phase: str) -> tuple[dict, Any]:
    """One model call after an optional user turn; records the step. Returns (state update, response or None)."""
    reason = budget_exceeded(state, rt.spec)
    if reason:
        return {"status": "budget_exhausted", "error": reason}, None
    started = st.started
    seq, step = state["seq"] + 1, state["steps"] + 1
    sent = [Message(role="user", content=prompt)] if prompt else []
    rt.transcript.extend(sent)  # the model must see it; record() below stores it with the step
    try:
        resp = rt.ask(rt.transcript, [], step=step)
    except PolicyError as err:
        dt = st.seconds
        del rt.transcript[len(rt.transcript) - len(sent):]
        rt.record(seq, "policy", sent, started, dt, error=str(err), phase=phase)
        return {"seq": seq, "steps": step, "status": "failed", "error": f"policy: {err}",
                "seconds": state["seconds"] + dt}, None
    text = resp.raw or resp.text
    dt = st.seconds
    del rt.transcript[len(rt.transcript) - len(sent):]
    rt.record(seq, "policy", sent + [Message(role="assistant", content=text)], started, dt, resp.tokens_in,
              resp.tokens_out, raw=text, phase=phase, latency=resp.latency_s)
    update = {"seq": seq, "steps": step, "seconds": state["seconds"] + dt,
              "tokens_in": state["tokens_in"] + resp.tokens_in, "tokens_out": state["tokens_out"] + resp.tokens_out}
    rt.emit(PolicyStep(step, dt, text, resp.tokens_in, resp.tokens_out))
    return update, text


def extract_program(text: str) -> tuple[str | None, str | None]:
    """(the program's source, None) or (None, what is wrong with the reply)."""
    blocks = [b for b in _CODE.findall(text or "") if b.strip()]
    if not blocks:
        bare = (text or "").find("def program(")
        if bare >= 0:  # a model that forgot the fence: take the function as written
            blocks = [text[bare:]]
    with_fn = [b for b in blocks if re.search(r"^\s*def\s+program\s*\(", b, re.M)]
    if not with_fn:
        return None, ("your reply has no `def program(scene):` in a ```python block" if not blocks else
                      "your code block does not define `def program(scene):`")
    return with_fn[-1].strip("\n"), None


def parse_answer(text: str) -> tuple[str, str]:
    """(answer, reasoning) from a reply that should be {"reasoning", "answer"}; tolerant of what models write."""
    from ..policies.formats.json import json_objects

    for _, _, obj in reversed(json_objects(text or "")):
        if isinstance(obj, dict) and "answer" in obj:
            return str(obj["answer"]).strip(), str(obj.get("reasoning", "")).strip()
    m = re.search(r"answer\s*[:=]\s*(.+)", text or "", re.I)
    if m:
        return m.group(1).strip().strip('"').strip(), ""
    return (text or "").strip(), ""


def make_program_node(rt: Runtime):
    from langgraph.types import Command

    def program_node(state: ProgramState, st: Step) -> Any:
        prompt = None
        if state["attempts"] == 0 and state["seq"] == 0:
            prompt = f"Note: {rt.context.reconstruction}. Write the program."
        elif state.get("error"):
            prompt = state["error"]
        update, text = _policy(rt, state, st, prompt, "program")
        if text is None:
            return Command(update=update, goto=END)
        update["error"] = None
        program, problem = extract_program(text)
        if program is None:
            return _failed_attempt(rt, {**state, **update}, update, problem, Command)
        update["program"] = program
        return Command(update=update, goto="run")

    return node(rt, program_node)


def _failed_attempt(rt: Runtime, state: AgentState, update: dict, problem: str, Command) -> Any:
    attempts = state["attempts"] + 1
    update["attempts"] = attempts
    repairs = rt.params.repairs
    reason = budget_exceeded(state, rt.spec)
    if reason:
        update.update(status="budget_exhausted", error=reason)
        return Command(update=update, goto=END)
    if attempts > repairs:
        update.update(mode="direct", error=None)
        return Command(update=update, goto="direct")
    update["error"] = f"That did not work: {problem}\nFix the program and reply with the whole corrected code block."
    return Command(update=update, goto="program")


def make_run_node(rt: Runtime):
    from langgraph.types import Command

    from ..tools.code import cell_timeout, format_result
    from ..tools.registry import ToolError

    def run_node(state: ProgramState, st: Step) -> Any:
        seq = state["seq"] + 1
        try:
            limit = cell_timeout(rt.params.program_seconds, step_deadline(rt, state))
        except ToolError:  # no time left to run it
            reason = budget_exceeded(state, rt.spec) or "no time left to run the program"
            return Command(update={"status": "budget_exhausted", "error": reason}, goto=END)
        res = rt.ctx.sandbox.run(state["program"] + "\n" + _RUNNER, timeout=limit)
        content = format_result(res)
        images = [rt.ctx.artifact(p, name=f"view_{seq}_{i + 1}.png", mime="image/png")
                  for i, p in enumerate(res.images) if p.is_file()]
        msg = Message(role="tool", content=content, name="program", images=images)
        dt = st.seconds
        rt.record(seq, "tools", [msg], st.started, dt, observations=[{"call_id": f"program_{seq}", "tool": "program",
                  "content": content, "error": not res.ok, "artifacts": [a.model_dump() for a in images]}])
        rt.emit(ToolStep(state["steps"], "program", dt, not res.ok, content))
        update = {"seq": seq, "seconds": state["seconds"] + dt}
        if not res.ok:
            return _failed_attempt(rt, {**state, **update}, update, "the program raised an error:\n" + content, Command)
        return Command(update={**update, "phase": "answer"}, goto="answer")

    return node(rt, run_node)


def make_answer_node(rt: Runtime, direct: bool):
    from langgraph.types import Command

    def answer_node(state: ProgramState, st: Step) -> Any:
        update, text = _policy(rt, state, st, DIRECT_PROMPT if direct else ANSWER_PROMPT,
                               "direct" if direct else "answer")
        if text is None:
            return Command(update=update, goto=END)
        answer, _ = parse_answer(text)
        if answer:
            update.update(status="finished", answer=answer)
        else:
            update.update(status="failed", error="the answer step gave an empty answer")
        return Command(update=update, goto=END)

    return node(rt, answer_node)


class VisualProgramParams(AgentParams):
    repairs: int = Field(2, ge=0, le=100, description="how many times a failed program goes back to the model")
    program_seconds: float = Field(10.0, gt=0, le=86_400, description="time limit of one program run in the sandbox")
    backend: str = Field("classic", description="reconstruction backend: classic or learned")

    @field_validator("backend")
    @classmethod
    def _known(cls, v: str) -> str:
        from ..tools.spatial3d.reconstruct import BACKENDS  # numpy and the 3D code: only once a spec is read

        if v not in BACKENDS:
            raise ValueError(f"unknown reconstruction backend; expected one of {', '.join(BACKENDS)}")
        return v


class VisualProgram(Agent):
    name = "visual_program"
    Params = VisualProgramParams
    default_tools = []  # the program is this agent's only action; no tool calls
    sandbox = "process"
    prompt = SYSTEM_PROMPT
    context_type = ProgramContext
    initial_state = staticmethod(initial_state)
    prepare_sandbox = staticmethod(prepare_sandbox)

    def build(self, rt: Runtime, checkpointer=None):
        return compile_graph(rt, ProgramState, {
            "program": (make_program_node(rt), ("run", "program", "direct", END)),
            "run": (make_run_node(rt), ("answer", "program", "direct", END)),
            "answer": (make_answer_node(rt, direct=False), (END,)),
            "direct": (make_answer_node(rt, direct=True), (END,))}, checkpointer)


AGENT = VisualProgram()
