"""FSD's embodied agent: a camera image and an instruction → spatial reasoning → a pick and a place on a robot.

    START → observe → reason → verify ─┬─ a point on the wrong object (retry) ─► reason
                                       └─ consistent ─► plan → execute ⟲ (one waypoint per step) → check → finish

observe   the robot's camera: RGB, depth, intrinsics and extrinsics (sandboxes/robot.py's protocol); the image
          is stored as the step's artifact.
reason    FSD's questions to the policy, one at a time (policies/formats/fsd.py): the relation graph (objects as
          <ref>/<box>, relations as <pred>), then the visual trace (8 points, object → destination) or, with
          `representation: affordance`, the grasp box, and the free-space points where the object may go. The
          image with the drawn trace, boxes and points is stored with the step.
verify    self-consistency: the policy is asked which object lies at the pick point and at the place point; a
          mismatch sends the agent back to reason with what went wrong (at most `retries` times); every answer
          is recorded.
plan      pick = the trace's first point (or the affordance box's centre), place = the mean free-space point (or
          the trace's last); both lifted to the world with depth and the camera (tools/spatial.lift); the grasp
          pose from the point cloud around the pick point; a path at a clearance height over the corridor
          between them (tools/grasp.py).
execute   each waypoint is a robot tool call (tools/robot.py); an arm that cannot get there or a grasp that
          closes on nothing ends the attempt, named (a missed grasp re-observes and tries again within `retries`).
          The run's time budget holds within a waypoint too: the motion stops where the arm is once it runs
          out, and the run ends as budget_exhausted, naming the waypoints not run.
check     the camera again; the policy is asked what is at the place point now, and a simulated sandbox's own
          judgement (is_on) decides success. The run's final state (success, points, trace, and in simulation the
          truth-based point checks and the ground-truth trace) is recorded for benchmarks.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, StrictBool

from ..deadline import BUDGET_SPENT, passed
from ..policies.base import observes
from ..state import AgentState, ArtifactRef, Message, ToolCall
from ..state import initial_state as _common_initial
from .base import Agent, AgentParams
from .embodied_outcome import final_state, simulator_judgement, truth_checks
from .embodied_points import boxes_in_pixels, choose_points, draw_points, to_pixels
from .events import PolicyStep
from .nodes import END, Runtime, Step, budget_exceeded, compile_graph, execute_calls, node, record_step

SYSTEM_PROMPT = ("You are the spatial reasoner of a robot arm. You see the robot's camera image of a tabletop and "
                 "answer questions about it in FSD's format: objects as <ref>name</ref><box>[[x1, y1, x2, y2]]</box>, "
                 "relations as <pred>subject, relation, object</pred>, points as <point>[[x, y], ...]</point>, all on "
                 "a 0-1000 grid over the image (x to the right, y down), the answer inside <answer>...</answer>.")
REPRESENTATIONS = ("trace", "affordance")


class EmbodiedState(AgentState, total=False):
    camera: dict  # ArtifactRef of the current RGB image
    size: list[int]  # its width and height
    task: dict  # {"pick": name, "target": name} from the instruction
    points: dict  # pick / place (image pixels), trace, free, boxes: what reasoning decided
    attempts: int  # reasoning or grasp attempts used (the first is 1)
    feedback: str  # what went wrong with the last attempt, shown to the policy in the next
    path: list[list]  # [tool, arguments] waypoints still to execute
    done_path: int  # waypoints executed in this attempt
    outcome: dict  # the check's findings


@dataclass
class RobotContext:
    """The robot's last observation and what is derived from it, kept for this process (arrays never go into
    the graph state): the point cloud, and the segmentation a truth-reading policy sees."""

    obs: Any = None
    cloud: Any = None
    seg: tuple | None = None


def initial_state() -> AgentState:
    return {**_common_initial(), "camera": {}, "size": [], "task": {}, "points": {}, "attempts": 1, "feedback": "",
            "path": [], "done_path": 0, "outcome": {}}


# ---- parameters and the instruction --------------------------------------------------------------------

def task_objects(instruction: str) -> dict:
    """{"pick", "target"} named by a pick-and-place instruction ("put the red cube on the blue plate"), in the
    instruction's own words less articles; the one instruction grammar is the offline policies' (fsd_scene)."""
    from ..baselines.fsd_scene import INSTRUCTION

    m = INSTRUCTION.search(" ".join(instruction.strip().rstrip(".!").split()))
    names = {role: " ".join(w for w in (m.group(role) if m else "").lower().split() if w not in ("the", "a", "an"))
             for role in ("pick", "target")}
    if not m or not names["pick"] or not names["target"]:
        raise ValueError(f"instruction: expected a pick-and-place task such as 'put the red cube on the blue plate', "
                         f"got {instruction!r}")
    return names


class EmbodiedParams(AgentParams):
    representation: Literal[REPRESENTATIONS] = Field(
        "trace", description="trace (default: pick at the trace's first point) or affordance (at the grasp box)")
    retries: int = Field(2, ge=0, le=10, description="how often a failed consistency check or a missed grasp is "
                                                     "tried again (default 2)")
    # Strict: a quoted "no" read as true would move the robot without the check the spec meant to keep.
    verify: StrictBool = Field(True, description="ask which object lies at the pick and place points before "
                                                 "moving (default true)")


def check_spec(spec) -> EmbodiedParams:
    """The typed params; ValueError naming what is wrong, before the episode starts (episode._agent_params calls
    it)."""
    params = AGENT.read_params(spec.agent.params)
    task_objects(spec.instruction)
    if spec.sandbox.kind != "robot":
        raise ValueError(f"agent embodied acts on a robot: set sandbox to robot (got {spec.sandbox.kind!r})")
    return params


# ---- observe ------------------------------------------------------------------------------------------

def _observation(rt: Runtime):
    """The robot's current observation, kept for this process (arrays never go into the graph state)."""
    obs = rt.ctx.sandbox.observe()
    rt.context.obs = obs
    rt.context.cloud = rt.context.seg = None  # the cloud and the oracle's segmentation belong to one observation
    return obs


def _latest(rt: Runtime):
    # a resumed run observes again before it plans
    return rt.context.obs if rt.context.obs is not None else _observation(rt)


def _depth_view(depth) -> bytes:
    """The depth image for eyes: near bright, far dark, over the range the camera sees (the millimetre PNG
    kept with the step is the data; shown as it is, 16-bit depth looks black)."""
    import io

    import numpy as np
    from PIL import Image

    d = np.asarray(depth, dtype=np.float64)
    valid = d > 0
    lo, hi = (float(d[valid].min()), float(d[valid].max())) if valid.any() else (0.0, 1.0)
    v = np.where(valid, 255 * (hi - d) / max(hi - lo, 1e-6), 0).clip(0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(v).save(buf, format="PNG")
    return buf.getvalue()


def make_observe_node(rt: Runtime):
    from langgraph.types import Command

    from ..sandboxes.base import SandboxError

    def observe_node(state: EmbodiedState, st: Step) -> Any:
        try:
            obs = _observation(rt)
        except SandboxError as err:
            return Command(update={"status": "failed", "error": f"observe: {err}"}, goto="finish")
        h, w = obs.depth.shape
        rgb = rt.store.put_artifact(obs.png(), name=f"camera_{state['attempts']}.png", mime="image/png")
        depth = rt.store.put_artifact(obs.depth_png(), name=f"depth_{state['attempts']}.png", mime="image/png")
        shade = rt.store.put_artifact(_depth_view(obs.depth), name=f"depth_view_{state['attempts']}.png",
                                      mime="image/png")
        text = (f"camera {w}x{h}; depth {float(obs.depth.min()):.3f}–{float(obs.depth.max()):.3f} m; "
                f"gripper {obs.gripper_width * 1000:.0f} mm at ({', '.join(f'{v:.3f}' for v in obs.ee_position)})")
        msg = Message(role="user", name="observe", content=text, images=[rgb, shade])
        update = {"camera": rgb.model_dump(), "size": [w, h],
                  "task": state.get("task") or task_objects(rt.spec.instruction)}
        update = st.record("observe", [msg], update, depth_mm=depth.model_dump())
        return Command(update=update, goto="reason")

    return node(rt, observe_node)


# ---- asking the policy ---------------------------------------------------------------------------------

def _truth(rt: Runtime, size) -> tuple[list[dict], ArtifactRef | None]:
    """For a policy that reads the simulator's truth (the oracle): each object's box and the segmentation image."""
    box = rt.ctx.sandbox
    if "truth" not in observes(rt.policy) or not callable(getattr(box, "objects_truth", None)):
        return [], None
    import io

    import numpy as np
    from PIL import Image

    from ..coords import CoordinateSpace

    if rt.context.seg is None:
        seg = np.asarray(box.segmentation())
        buf = io.BytesIO()
        Image.fromarray((seg + 1).astype(np.uint16)).save(buf, format="PNG")
        ref = rt.store.put_artifact(buf.getvalue(), name="segmentation.png", mime="image/png")
        space = CoordinateSpace("grid1000", *size)
        lines = []
        for i, o in enumerate(box.objects_truth()):
            vs, us = np.nonzero(seg == i)
            entry = {"index": i, "name": o["name"], "kind": o["kind"], "color": o["color"]}
            if us.size:
                x1, y1 = space.from_screen(int(us.min()), int(vs.min()))
                x2, y2 = space.from_screen(int(us.max()), int(vs.max()))
                entry["box"] = [x1, y1, x2, y2]
            lines.append(entry)
        rt.context.seg = (lines, ref)
    return rt.context.seg


def _messages(rt: Runtime, state: EmbodiedState, question: str) -> list[Message]:
    w, h = state["size"]
    text = [f"Task: {rt.spec.instruction}", f"Image: {w}x{h} pixels; coordinates on a 0-1000 grid "
                                            "(x to the right, y down).", f"Question: {question}"]
    if state.get("feedback"):
        text.insert(1, f"Note: {state['feedback']}")
    images = [ArtifactRef.model_validate(state["camera"])]
    lines, seg = _truth(rt, (w, h))
    if lines:
        text += ["Scene truth:", *(json.dumps(o) for o in lines),
                 "Segmentation: the second image; pixel value = index + 1 of the object seen there, "
                 "0 for anything else."]
        images.append(seg)
    return [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content="\n".join(text), images=images)]


def scene_observation(rt: Runtime, state: EmbodiedState, question: str):
    """What a policy that observes the scene is handed besides the prompt (toolpath.observations)."""
    from ..observations import SceneObservation

    w, h = state["size"]
    truth, seg = _truth(rt, (w, h))
    return SceneObservation(task=rt.spec.instruction, question=question, image=state["camera"].get("path"),
                            size=(w, h), truth=tuple(truth), segmentation=seg.path if seg else None)


def _ask(rt: Runtime, state: dict, kind: str, question: str, images: list[ArtifactRef] | None = None):
    """One question to the policy, recorded as a policy step: (parsed answer, state update) or PolicyError."""
    from ..policies.base import observation_kwargs
    from ..policies.formats.fsd import parse_fsd

    st = Step(rt, state)
    step = state["steps"] + 1
    resp = rt.ask(_messages(rt, state, question), [], step=step,
                  **observation_kwargs(rt.policy, lambda: scene_observation(rt, state, question)))
    text = resp.raw or resp.text
    parsed = parse_fsd(text)
    msg = Message(role="assistant", content=resp.text or text, images=images or [])
    update = {"steps": step, "tokens_in": state["tokens_in"] + resp.tokens_in,
              "tokens_out": state["tokens_out"] + resp.tokens_out}
    update = st.record("policy", [msg], update, raw=text, question=kind,
                       issues=list(parsed.issues) + list(resp.issues), latency=resp.latency_s,
                       tokens_in=resp.tokens_in, tokens_out=resp.tokens_out)
    rt.emit(PolicyStep(step, st.seconds, f"{kind}: {text[:200]}", resp.tokens_in, resp.tokens_out,
                       issues=list(parsed.issues)))
    return parsed, update


# ---- reason -------------------------------------------------------------------------------------------

def make_reason_node(rt: Runtime):
    from langgraph.types import Command

    from ..policies.base import PolicyError
    from ..policies.formats.fsd import QUESTIONS

    def reason_node(state: EmbodiedState, st: Step) -> Any:
        p = rt.params
        task = state["task"]
        kinds = ["relations", "affordance" if p.representation == "affordance" else "trace", "free_space"]
        answers: dict[str, Any] = {}
        cur = dict(state)
        for kind in kinds:
            reason = budget_exceeded(cur, rt.spec)
            if reason:
                return Command(update={**_delta(state, cur), "status": "budget_exhausted", "error": reason},
                               goto="finish")
            try:
                parsed, update = _ask(rt, cur, kind, QUESTIONS[kind])
            except PolicyError as err:
                return Command(update={**_delta(state, cur), "status": "failed", "error": f"policy: {err}"},
                               goto="finish")
            cur.update(update)
            answers[kind] = parsed
        chosen, why = choose_points(p.representation, task, answers.get("relations"), answers.get("trace"),
                                    answers.get("affordance"), answers.get("free_space"))
        if not chosen:
            return _retry(rt, state, cur, why)
        size = state["size"]
        try:
            chosen["pick"] = to_pixels([chosen["pick_grid"]], size)[0]
            chosen["place"] = to_pixels([chosen["place_grid"]], size)[0]
            chosen["trace"] = to_pixels(chosen["trace_grid"], size)
            chosen["free"] = to_pixels(chosen["free_grid"], size)
        except ValueError as err:
            return _retry(rt, state, cur, f"a point is off the image: {err}")
        chosen["boxes"] = boxes_in_pixels(answers.get("relations"), size)
        chosen["relations"] = [list(r) for r in getattr(answers.get("relations"), "relations", [])]
        truth = truth_checks(rt, task, chosen, _latest(rt))
        if truth is not None:
            chosen["truth"] = truth
        drawn = draw_points(rt, state, chosen)
        started = time.time()
        msg = Message(role="assistant", name="reason", images=[drawn],
                      content=f"in image pixels: pick {chosen['pick']} ({chosen['sources']['pick']}), place "
                              f"{chosen['place']} ({chosen['sources']['place']}); trace {chosen['trace']}")
        update = record_step(rt, cur, "reason", [msg], started, 0.0,
                             {**_delta(state, cur), "points": chosen, "feedback": ""})
        return Command(update=update, goto="verify" if p.verify else "plan")

    return node(rt, reason_node)


def _delta(state: dict, cur: dict) -> dict:
    """What the questions asked so far changed in the state (counters and seq)."""
    return {k: cur[k] for k in ("seq", "steps", "tokens_in", "tokens_out", "seconds") if cur.get(k) != state.get(k)}


def _retry(rt: Runtime, state: dict, cur: dict, why: str, goto: str = "reason"):
    """Try again with `why` shown to the policy, or end the run when the retries are used up."""
    from langgraph.types import Command

    update = {**_delta(state, cur)}
    if state["attempts"] > rt.params.retries:
        return Command(update={**update, "status": "failed",
                               "error": f"{why} (after {state['attempts']} attempt(s))"}, goto="finish")
    started = time.time()
    msg = Message(role="user", name="retry", content=f"attempt {state['attempts'] + 1}: {why}")
    update = record_step(rt, {**state, **update}, "retry", [msg], started, 0.0,
                         {**update, "attempts": state["attempts"] + 1, "feedback": why, "points": {}})
    return Command(update=update, goto=goto)


# ---- verify -------------------------------------------------------------------------------------------

def make_verify_node(rt: Runtime):
    from langgraph.types import Command

    from ..policies.base import PolicyError
    from ..policies.formats.fsd import identify_question
    from ..tools.spatial import same_object

    def verify_node(state: EmbodiedState, st: Step) -> Any:
        task, pts = state["task"], state["points"]
        cur = dict(state)
        checks = []
        for role, grid, expected in (("pick", pts["pick_grid"], task["pick"]),
                                     ("place", pts["place_grid"], task["target"])):
            reason = budget_exceeded(cur, rt.spec)
            if reason:
                return Command(update={**_delta(state, cur), "status": "budget_exhausted", "error": reason},
                               goto="finish")
            x, y = round(grid[0]), round(grid[1])
            try:
                parsed, update = _ask(rt, cur, "identify", identify_question(x, y))
            except PolicyError as err:
                return Command(update={**_delta(state, cur), "status": "failed", "error": f"policy: {err}"},
                               goto="finish")
            cur.update(update)
            seen = parsed.refs[0] if parsed.refs else ""
            checks.append({"role": role, "point": [x, y], "expected": expected, "seen": seen,
                           "ok": bool(seen) and same_object(seen, expected)})
        started = time.time()
        bad = [c for c in checks if not c["ok"]]
        text = "; ".join(f"{c['role']} point {c['point']} (grid): {c['seen'] or 'no object named'} "
                         f"({'ok' if c['ok'] else 'expected ' + c['expected']})" for c in checks)
        update = record_step(rt, cur, "verify", [Message(role="user", name="verify", content=text)], started, 0.0,
                             {**_delta(state, cur), "points": {**pts, "checks": checks}}, checks=checks)
        if bad:
            why = "; ".join(f"the {c['role']} point {c['point']} lies on {c['seen'] or 'nothing you named'}, "
                            f"not on the {c['expected']}" for c in bad)
            return _retry(rt, state, {**cur, **update}, why)
        return Command(update=update, goto="plan")

    return node(rt, verify_node)


# ---- plan ---------------------------------------------------------------------------------------------

def _cloud(rt: Runtime, obs):
    """The scene's point cloud in the world (every second pixel), computed once per observation."""
    if rt.context.cloud is None:
        import numpy as np

        from ..tools.spatial3d.learned import backproject

        pts = backproject(obs.depth.astype(np.float64), obs.intrinsics, obs.extrinsics, obs.rgb, 2)[:, :3]
        valid = np.isfinite(pts).all(axis=1) & (obs.depth[::2, ::2].ravel() > 0)
        rt.context.cloud = pts[valid]
    return rt.context.cloud


def make_plan_node(rt: Runtime):
    from langgraph.types import Command

    from ..tools.grasp import GraspError, pick_place_path, plan_grasp, plan_place
    from ..tools.spatial import lift

    def plan_node(state: EmbodiedState, st: Step) -> Any:
        obs = _latest(rt)
        pts = state["points"]
        try:
            pick_xyz = lift(*pts["pick"], obs.depth, obs.intrinsics, obs.extrinsics)
            place_xyz = lift(*pts["place"], obs.depth, obs.intrinsics, obs.extrinsics)
            cloud = _cloud(rt, obs)
            grasp = plan_grasp(cloud, pick_xyz)
            place = plan_place(cloud, place_xyz, grasp)
        except (GraspError, ValueError) as err:
            return _retry(rt, state, state, f"planning: {err}")
        path = pick_place_path(cloud, grasp, place)
        summary = {"pick_world": [round(float(v), 4) for v in pick_xyz],
                   "place_world": [round(float(v), 4) for v in place_xyz],
                   "grasp": {"position": [round(v, 4) for v in grasp.position], "yaw": round(grasp.yaw, 4),
                             "top": round(grasp.top, 4), "ground": round(grasp.ground, 4),
                             "width": round(grasp.width, 4)},
                   "release": [round(v, 4) for v in place.position],
                   "clearance": round(path[1][1]["position"][2], 4)}
        text = (f"grasp at ({', '.join(f'{v:.3f}' for v in grasp.position)}) yaw {grasp.yaw:.2f} rad, object "
                f"{grasp.height * 100:.1f} cm tall; release at ({', '.join(f'{v:.3f}' for v in place.position)}); "
                f"travel height {summary['clearance']:.3f} m; {len(path)} waypoints")
        update = st.record("plan", [Message(role="assistant", name="plan", content=text)],
                           {"path": [[n, a] for n, a in path], "done_path": 0, "points": {**pts, "plan": summary}},
                           plan=summary)
        return Command(update=update, goto="execute")

    return node(rt, plan_node)


# ---- execute ------------------------------------------------------------------------------------------

def make_execute_node(rt: Runtime):
    from langgraph.types import Command

    def execute_node(state: EmbodiedState, st: Step) -> Any:
        reason = budget_exceeded(state, rt.spec)
        if reason:
            return Command(update={"status": "budget_exhausted", "path": [],
                                   "error": f"{reason}; {_waypoints(len(state['path']))} not run"}, goto="check")
        name, args = state["path"][0]
        i = state["done_path"] + 1
        call = ToolCall(id=f"a{state['attempts']}_{i}", name=name, arguments=args)
        # The budget was checked above: the waypoint starts, and its motion stops at the step's deadline.
        done = execute_calls(rt, state, [call], exempt=lambda _call: True)
        total = i + len(state["path"]) - 1
        msgs = [Message(role="assistant", content=f"waypoint {i} of {total}", tool_calls=[call]), *done.messages]
        obs = done.messages[0]
        update = {"path": state["path"][1:], "done_path": i}
        update = st.record("execute", msgs, update, observations=done.observations)
        if passed(rt.ctx.deadline):  # the motion stopped where the arm was when the time ran out
            reason = budget_exceeded({**state, **update}, rt.spec) or BUDGET_SPENT
            return Command(update={**update, "status": "budget_exhausted", "path": [],
                                   "error": f"{reason}; waypoint {i} ({name}) ran out of time and "
                                            f"{_waypoints(len(update['path']))} not run"}, goto="check")
        missed = name == "gripper" and args.get("command") == "close" and "holding" not in obs.content
        error = done.observations[0].get("error", False)
        if error or missed:
            why = obs.content if error else f"the grasp closed on nothing ({obs.content})"
            return _recover(rt, {**state, **update}, why)
        return Command(update=update, goto="execute" if update["path"] else "check")

    return node(rt, execute_node)


def _waypoints(n: int) -> str:
    return f"{n} waypoint{'s' if n != 1 else ''}"


def _recover(rt: Runtime, state: dict, why: str):
    """After a failed waypoint: back home, then observe and reason again (within `retries`) or end the run."""
    from langgraph.types import Command

    from ..sandboxes.base import SandboxError

    for name, args in (("gripper", {"command": "open"}), ("home", {})):
        try:
            rt.ctx.sandbox.act(name, args, deadline=rt.ctx.deadline)  # set by the execute step that failed
        except SandboxError:
            pass  # the robot may be stuck where it is: the next observation shows it
    if state["attempts"] > rt.params.retries:
        return Command(update={"status": "failed", "error": f"execution: {why} (after {state['attempts']} "
                                                            f"attempt(s))", "path": []}, goto="check")
    started = time.time()
    msg = Message(role="user", name="retry", content=f"attempt {state['attempts'] + 1}: {why}")
    update = record_step(rt, state, "retry", [msg], started, 0.0, {"attempts": state["attempts"] + 1, "feedback": why,
                                                                   "points": {}, "path": [], "done_path": 0})
    return Command(update=update, goto="observe")


# ---- check and finish ---------------------------------------------------------------------------------

def make_check_node(rt: Runtime):
    from langgraph.types import Command

    from ..policies.base import PolicyError
    from ..policies.formats.fsd import identify_question
    from ..sandboxes.base import SandboxError
    from ..tools.spatial import same_object

    def check_node(state: EmbodiedState, st: Step) -> Any:
        task = state["task"]
        outcome: dict[str, Any] = {"pick": task.get("pick"), "target": task.get("target")}
        cur = dict(state)
        images = []
        try:
            obs = _observation(rt)
            images.append(rt.store.put_artifact(obs.png(), name="camera_final.png", mime="image/png"))
        except SandboxError as err:
            outcome["camera_error"] = str(err)
        grid = (state.get("points") or {}).get("place_grid")
        if grid and images and state.get("status", "running") == "running" and not budget_exceeded(cur, rt.spec):
            cur["camera"] = images[0].model_dump()
            try:
                parsed, update = _ask(rt, cur, "identify", identify_question(round(grid[0]), round(grid[1])))
                cur.update(update)
                seen = parsed.refs[0] if parsed.refs else ""
                outcome["visual_check"] = {"seen_at_place": seen, "ok": bool(seen) and same_object(seen, task["pick"])}
            except PolicyError as err:
                outcome["visual_check"] = {"error": str(err)}
        simulated = simulator_judgement(rt, task)
        if simulated is not None:
            outcome.update(simulated)
        elif "visual_check" in outcome and "ok" in outcome["visual_check"]:
            outcome.update(success=outcome["visual_check"]["ok"], judged_by="visual check",
                           reason=f"the camera shows {outcome['visual_check']['seen_at_place'] or 'nothing named'} "
                                  f"at the place point")
        else:
            outcome.update(success=False, reason="no way to check the outcome", judged_by="none")
        update = {**_delta(state, cur), "outcome": outcome}
        if state.get("status", "running") == "running":
            if outcome["success"]:
                update.update(status="finished", answer=f"success: the {task['pick']} is on the {task['target']}")
            else:
                update.update(status="failed", error=f"the task is not done: {outcome.get('reason')}")
        text = f"{'success' if outcome['success'] else 'not done'} ({outcome['judged_by']}): {outcome.get('reason')}"
        update = st.record("check", [Message(role="user", name="check", content=text, images=images)], update,
                           state={**state, **update}, outcome=outcome)
        return Command(update=update, goto="finish")

    return node(rt, check_node)


def make_finish_node(rt: Runtime):
    from langgraph.types import Command

    def finish_node(state: EmbodiedState, st: Step) -> Any:
        final = final_state(rt, state) if rt.ctx.sandbox is not None else {}
        update: dict[str, Any] = {}
        if state.get("status") == "running":
            update["status"] = "failed"
        text = "final state: " + json.dumps(final, ensure_ascii=False, default=str)[:2000]
        update = st.record("finish", [Message(role="assistant", name="finish", content=text)], update,
                           final_state=final)
        return Command(update=update, goto=END)

    return node(rt, finish_node)


class Embodied(Agent):
    name = "embodied"
    Params = EmbodiedParams
    default_tools = ["move_ee", "move_joints", "gripper", "home"]
    sandbox = "robot"
    prompt = SYSTEM_PROMPT
    context_type = RobotContext
    initial_state = staticmethod(initial_state)
    check_spec = staticmethod(check_spec)

    def build(self, rt: Runtime, checkpointer=None):
        return compile_graph(rt, EmbodiedState, {
            "observe": (make_observe_node(rt), ("reason", "finish")),
            "reason": (make_reason_node(rt), ("verify", "plan", "reason", "finish")),
            "verify": (make_verify_node(rt), ("plan", "reason", "finish")),
            "plan": (make_plan_node(rt), ("execute", "reason", "finish")),
            "execute": (make_execute_node(rt), ("execute", "check", "observe")),
            "check": (make_check_node(rt), ("finish",)),
            "finish": (make_finish_node(rt), (END,))}, checkpointer)


AGENT = Embodied()
