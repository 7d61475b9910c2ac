"""Capability tools: a whole agent, callable as a tool by any agent, run nested in the caller's run.

    spatial_query(question, images)     the visual-program agent (pySpatial: 3D programs over the images)
    edit_image(instruction, image)      the fast-slow edit agent (FaSTA*); the edited image comes back named
    gui_task(instruction, files)        the computer-use agent, in the episode's browser or desktop sandbox
    robot_task(instruction)             the embodied agent, in the episode's robot sandbox

A call runs the nested agent's LangGraph graph inside the caller's tool step, as a run of its own whose row
names its parent (run id and step seq): the same store, its own checkpoints, `runs show` and the viewer show
it under the step that called it. What it may use is what the caller has left (steps, tokens, seconds), and
what it used is added to the caller's counters (nodes.account_nested). Its policy is the caller's, asked at
the caller's step count plus its own, so one scripted file or one model answers the whole tree in order.

The nested run's id is the caller's run id, step and call place, so a resumed caller that runs the step again
finds it: finished, its result is returned without running anything; interrupted, it resumes from its own last
checkpoint. A kill -9 at any depth loses only the node that was running.

This module sits on the agents floor (tools may not import agents); the registry's `tool` entries name it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..deadline import seconds_left
from ..state import TERMINAL, StepRecord
from ..tools.registry import ToolContext, ToolError, ToolResult, tool

# capability tool -> (agent, the sandbox kinds of the caller's episode it acts in, or None: it brings its own)
CAPABILITIES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "spatial_query": ("visual_program", None),
    "edit_image": ("fast_slow", None),
    "gui_task": ("computer_use", ("browser", "desktop")),
    "robot_task": ("embodied", ("robot",)),
}


class StepOffset:
    """The caller's policy, asked as the nested run's step n at the caller's step `offset + n`: the tree's
    policy steps are one sequence (a scripted file lists them in order; a model's seed advances along it)."""

    def __init__(self, policy: Any, offset: int):
        self.policy, self.offset = policy, offset
        self.name = getattr(policy, "name", "policy")
        self.observes = getattr(policy, "observes", ())

    def respond(self, messages, tools, **generation):
        if isinstance(generation.get("step"), int):
            generation["step"] += self.offset
        if isinstance(generation.get("seed"), int):
            generation["seed"] += self.offset
        return self.policy.respond(messages, tools, **generation)


def _image_paths(ctx: ToolContext, names: list[str], arg: str) -> list[Path]:
    if not names:
        raise ToolError(f"{arg}: name at least one image; images in this episode: {', '.join(ctx.images) or 'none'}")
    unknown, paths = [], []
    for n in names:
        try:
            paths.append(ctx.images[ctx.image_name(n, arg)])
        except ToolError:
            unknown.append(n)
    if unknown:
        raise ToolError(f"{arg}: unknown image(s) {', '.join(map(repr, unknown))}; images in this episode: "
                        f"{', '.join(ctx.images) or 'none'}")
    return paths


def _nested_spec(ctx: ToolContext, capability: str, agent: str, instruction: str, images: list[Path], sandbox: Any):
    """The nested run's spec: the caller's model, seed and loop limit; what the caller has left of its steps,
    tokens and seconds; the capability's agent; the caller's sandbox kind when it acts there."""
    from ..spec import AgentSpec, Inputs, Limits, SandboxSpec

    site = ctx.caller
    spec, state = site.rt.spec, site.state
    steps_left = spec.limits.max_steps - state["steps"]
    tokens_left = None if spec.limits.max_tokens is None else \
        spec.limits.max_tokens - state["tokens_in"] - state["tokens_out"]
    secs = seconds_left(ctx.deadline)
    secs = spec.limits.max_seconds - state["seconds"] if secs is None else secs
    if steps_left <= 0 or (tokens_left is not None and tokens_left <= 0) or secs <= 0:
        raise ToolError(f"{capability}: the run's budget is spent ({state['steps']} of {spec.limits.max_steps} "
                        "steps used, or its tokens or seconds); no nested run started")
    from . import get_agent

    limits = Limits(max_steps=steps_left, max_seconds=secs, max_tokens=tokens_left,
                    loop_repeats=spec.limits.loop_repeats)
    # The caller's own sandbox when the agent acts there; else the one the agent brings (visual_program's
    # process kernel), never the caller's kind by accident.
    kind = spec.sandbox.kind if sandbox is not None else (get_agent(agent).sandbox or "none")
    return spec.model_copy(update={
        "id": f"{spec.id}.{capability}"[:128], "instruction": instruction, "inputs": Inputs(images=images),
        "agent": AgentSpec(name=agent), "tools": None, "limits": limits, "evaluator": None,
        "metadata": {"capability": capability}, "sandbox": SandboxSpec(kind=kind),
    }, deep=True)


def _shared_sandbox(ctx: ToolContext, capability: str, agent: str | None = None) -> Any:
    """The caller's sandbox, for a capability that acts in it; a clear error when the episode has none of its kind."""
    agent = agent or CAPABILITIES[capability][0]
    kinds = next((k for a, k in CAPABILITIES.values() if a == agent), None)
    if kinds is None:
        return None
    if ctx.caller is None:
        raise ToolError(f"{capability}: runs an agent nested in a run; call it from an agent's step")
    box = ctx.sandbox
    kind = ctx.caller.rt.spec.sandbox.kind if box is not None else None
    if kind not in kinds:
        raise ToolError(f"{capability}: needs the episode's sandbox to be {' or '.join(kinds)}; this run's is "
                        f"{kind or 'none'} (set sandbox.kind in the spec)")
    return box


def run_nested(ctx: ToolContext, capability: str, instruction: str, images: list[Path] = (),
               agent: str | None = None) -> dict:
    """Run (or resume, or read back) the capability's agent (or `agent`, for a graph's agent node, under the
    label `capability`) as a nested run of the calling step; return what it did: run id, agent, status,
    answer, error, steps, tokens, seconds. Raises ToolError when it cannot start."""
    from .episode import EpisodeError, resume_episode, run_episode

    site = ctx.caller
    if site is None:
        raise ToolError(f"{capability}: runs an agent nested in a run; call it from an agent's step")
    if not instruction.strip():
        raise ToolError(f"{capability}: the instruction is empty")
    rt, state = site.rt, site.state
    store = rt.store
    seq = state["seq"] + 1  # the tool step this call belongs to
    child_id = f"{rt.run_id}.{seq}.{site.index + 1}"
    agent = agent or CAPABILITIES[capability][0]
    box = _shared_sandbox(ctx, capability, agent)
    policy = StepOffset(rt.policy, state["steps"]) if rt.policy is not None else None
    depth = rt.spec.metadata.get("depth", 0) + 1

    def on_event(event: dict) -> None:
        rt.emit({**event, "depth": event.get("depth", depth)})

    known = store.get_run(child_id)
    try:
        if known is None:
            spec = _nested_spec(ctx, capability, agent, instruction, list(images), box)
            spec.metadata["depth"] = depth
            result = run_episode(spec, store, on_event=on_event, policy=policy, run_id=child_id,
                                 parent=(rt.run_id, seq), sandbox=box)
        elif known["status"] in TERMINAL:  # finished before the caller's step was checkpointed: not redone
            result = None
        else:
            result = resume_episode(child_id, store, on_event=on_event, policy=policy, sandbox=box, nested=True)
    except EpisodeError as err:
        raise ToolError(f"{capability}: {err}") from None
    row = store.get_run(child_id)
    used = {"steps": row["steps"], "tokens_in": row["tokens_in"], "tokens_out": row["tokens_out"]}
    for k, v in used.items():
        site.used[k] = site.used.get(k, 0) + v
    out = {"run_id": child_id, "agent": row["agent"], "status": row["status"], "answer": row["answer"],
           "error": row["error"], "seconds": round(row["seconds"], 3), **used}
    if result is not None and result.status != row["status"]:
        out["status"] = result.status
    return out


def _last_image(ctx: ToolContext, run_id: str) -> Path | None:
    """The last image the nested run recorded (a screenshot, a camera view), if any."""
    last = None
    for s in map(StepRecord.from_row, ctx.caller.rt.store.steps(run_id)):
        for m in s.messages:
            for img in m.get("images", []):
                last = img["path"]
        for o in s.observations:
            for a in o.get("artifacts", []):
                if a.get("mime", "").startswith("image/"):
                    last = a["path"]
    return Path(last) if last else None


def _named_image(ctx: ToolContext, prefix: str, path: Path) -> tuple[str, Any]:
    """Store `path` as the next `prefix_N` image of the episode, as the image tools name theirs."""
    n = sum(1 for k in ctx.images if k.startswith(prefix + "_")) + 1
    name = f"{prefix}_{n}"
    ref = ctx.artifact(Path(path), name=f"{name}.png", mime="image/png")
    ctx.images[name] = Path(ref.path)
    return name, ref


def _observation(capability: str, did: dict, image: tuple[str, Any] | None = None) -> ToolResult:
    """The nested run's result as the caller's observation; a run that did not finish is an error it hears of."""
    head = (f"{capability}: {did['agent']} run {did['run_id']} {did['status']} after {did['steps']} step(s), "
            f"{did['tokens_in'] + did['tokens_out']} tokens, {did['seconds']:.1f} s")
    lines = [head]
    if did["answer"] is not None:
        lines.append(f"answer: {did['answer']}")
    if did["error"]:
        lines.append(f"note: {did['error']}")
    if image is not None:
        lines.append(f"image: {image[0]}")
    if did["status"] != "finished":
        raise ToolError("\n".join(lines))
    data = {**did, **({"image": image[0]} if image else {})}
    return ToolResult(content="\n".join(lines), artifacts=[image[1]] if image else [], data=data)


def run_agent(ctx: ToolContext, label: str, agent: str, instruction: str, images: list[str]) -> ToolResult:
    """A graph's agent node: `agent` nested in this run like a capability, its result as an observation."""
    return _observation(label, run_nested(ctx, label, instruction, _image_paths(ctx, images, "images")
                                          if images else [], agent=agent))


# ---- the tools --------------------------------------------------------------------------------------------
# No timeout of their own: the nested run stops by the caller's deadline (its max_seconds is what is left).

@tool(timeout=None, cost=20.0, quality=0.7, tags=("capability", "spatial"))
def spatial_query(question: str, images: list[str], ctx: ToolContext) -> ToolResult:
    """Answer a spatial question about images (camera motion, distances, directions, what is where) with the
    visual-program agent, which writes and runs a 3D program over a reconstruction of the images.

    Args:
        question: the question, e.g. "which way did the camera turn between image 1 and image 2?"
        images: names of the images to reason over, e.g. ["image_1", "image_2"]
    """
    paths = _image_paths(ctx, images, "images")
    return _observation("spatial_query", run_nested(ctx, "spatial_query", question, paths))


@tool(timeout=None, cost=10.0, quality=0.8, tags=("capability", "edit"))
def edit_image(instruction: str, image: str, ctx: ToolContext) -> ToolResult:
    """Edit an image as instructed (remove, recolor, replace, add text) with the fast-slow edit agent; the edited
    image comes back as a new named image (edited_1, ...).

    Args:
        instruction: the edit, e.g. "remove the logo"
        image: the name of the image to edit, e.g. "image_1" or "crop_2"
    """
    paths = _image_paths(ctx, [image], "image")
    did = run_nested(ctx, "edit_image", instruction, paths)
    edited = None
    try:
        edited = json.loads(did["answer"] or "{}").get("image")
    except (ValueError, AttributeError):
        pass
    named = _named_image(ctx, "edited", Path(edited)) if edited and Path(edited).is_file() else None
    if did["status"] == "finished":
        did["answer"] = f"edited {image} as asked" + (f"; {did['error']}" if did["error"] else "")
    return _observation("edit_image", did, named)


@tool(timeout=None, cost=30.0, quality=0.6, tags=("capability", "gui"))
def gui_task(instruction: str, ctx: ToolContext, files: list[str] = []) -> ToolResult:  # noqa: B006 — a schema default
    """Carry out a task on the episode's screen (a browser page or a desktop) with the computer-use agent:
    clicking, typing, scrolling until it is done. The last screenshot comes back as a named image (screen_1, ...).

    Args:
        instruction: the task, e.g. "upload the image in the form and submit it"
        files: names of images a file chooser on the page gets when the task opens one (an upload field)
    """
    import shutil
    import tempfile

    box = _shared_sandbox(ctx, "gui_task")
    paths = _image_paths(ctx, files, "files") if files else []
    if paths and not hasattr(box, "offer_files"):
        raise ToolError(f"files: the {ctx.caller.rt.spec.sandbox.kind} sandbox has no file chooser to offer them to")
    with tempfile.TemporaryDirectory(prefix="toolpath-offer-") as folder:
        if paths:  # under their image names (edited_1.png), as a user's files would be named
            box.offer_files([shutil.copyfile(p, Path(folder) / f"{n}{p.suffix or '.png'}")
                             for n, p in zip(files, paths)])
        try:
            did = run_nested(ctx, "gui_task", instruction)
        finally:
            if paths:
                box.offer_files([])
    shot = _last_image(ctx, did["run_id"])
    return _observation("gui_task", did, _named_image(ctx, "screen", shot) if shot else None)


@tool(timeout=None, cost=30.0, quality=0.6, tags=("capability", "robot"))
def robot_task(instruction: str, ctx: ToolContext) -> ToolResult:
    """Carry out a manipulation task in the episode's robot scene (pick, place, push) with the embodied agent.
    The last camera image comes back as a named image (scene_1, ...).

    Args:
        instruction: the task, e.g. "put the red cube on the blue plate"
    """
    did = run_nested(ctx, "robot_task", instruction)
    view = _last_image(ctx, did["run_id"])
    return _observation("robot_task", did, _named_image(ctx, "scene", view) if view else None)
