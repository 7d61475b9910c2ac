"""What an embodied episode achieved: the simulator's judgement, the truth-based point checks, the final state.

These read a simulated sandbox's ground truth (objects_truth, segmentation, is_on), which a real robot does not
have; on one, the agent's visual check decides and the truth fields are absent. None of this is ever shown to
the policy: it is what benchmarks (tabletop) score and measure.
"""

from __future__ import annotations

from typing import Any

from .nodes import Runtime


def simulator_judgement(rt: Runtime, task: dict) -> dict | None:
    """{"success", "reason", "judged_by"} from a simulated sandbox's own check (is_on); None on a real robot."""
    from ..sandboxes.base import SandboxError

    judge = getattr(rt.ctx.sandbox, "is_on", None)
    if not callable(judge) or not task:
        return None
    try:
        ok, reason = judge(*scene_names(rt, task))
    except SandboxError as err:
        return {"success": False, "reason": f"the simulator cannot judge it: {err}", "judged_by": "none"}
    return {"success": bool(ok), "reason": reason, "judged_by": "simulator"}


def scene_names(rt: Runtime, task: dict) -> tuple[str, str]:
    """The simulator's names for the task's objects ("purple block" is its "purple cube")."""
    from ..tools.spatial import same_object

    names = [o["name"] for o in rt.ctx.sandbox.objects_truth()]
    return tuple(next((n for n in names if same_object(n, task[role])), task[role])  # type: ignore[return-value]
                 for role in ("pick", "target"))


def final_state(rt: Runtime, state: dict) -> dict:
    """What benchmarks score: the outcome, the chosen points and trace, and in simulation the truth-based checks
    (pick point on the pick object, place point on the target) and the ground-truth trace in the image."""
    out: dict[str, Any] = {**(state.get("outcome") or {})}
    if "success" not in out:  # the run ended before its check (nothing usable to act on, a crash in a node)
        task = state.get("task") or {}
        out.update(pick=task.get("pick"), target=task.get("target"))
        out.update(simulator_judgement(rt, task) or {"success": False, "judged_by": "none",
                                                     "reason": state.get("error") or "the run ended before its check"})
    pts = state.get("points") or {}
    out.update({name: pts[k] for k, name in (("pick", "pick_point"), ("place", "place_point"), ("trace", "trace"),
                                             ("free", "free_points")) if k in pts})
    if "truth" in pts:
        out["truth"] = pts["truth"]
    return out


def truth_checks(rt: Runtime, task: dict, chosen: dict, obs) -> dict | None:
    """In simulation only, for benchmarks (never shown to the policy): whether the pick point lies on the pick
    object and the place point on the target in the segmentation the points were chosen on, and the
    ground-truth trace — the pick object's centre lifted to 15 cm, carried over the target, set down on it —
    projected into the image and resampled to the policy's number of points."""
    box = rt.ctx.sandbox
    if not (callable(getattr(box, "objects_truth", None)) and callable(getattr(box, "segmentation", None))):
        return None
    import numpy as np

    from ..tools.spatial import Trace, same_object

    objs = box.objects_truth()
    seg = np.asarray(box.segmentation())
    index = {role: next((i for i, o in enumerate(objs) if same_object(o["name"], task[role])), None)
             for role in ("pick", "target")}
    out: dict[str, Any] = {}
    for role, key in (("pick", "pick"), ("target", "place")):
        u, v = chosen[key]
        seen = int(seg[v, u])
        out[f"{key}_on_{'object' if role == 'pick' else 'target'}"] = index[role] is not None and seen == index[role]
        out[f"{key}_seen"] = objs[seen]["name"] if seen >= 0 else None
    if index["pick"] is None or index["target"] is None:
        out["error"] = "the task's objects are not both in the scene"
        return out
    a = np.array(objs[index["pick"]]["position"], dtype=float)
    b = np.array(objs[index["target"]]["position"], dtype=float)
    b_top = b[2] + objs[index["target"]]["size"][2] / 2 + objs[index["pick"]]["size"][2] / 2
    up = 0.15
    corners = [a, [a[0], a[1], up], [b[0], b[1], up], [b[0], b[1], b_top]]
    dense = np.concatenate([np.linspace(corners[i], corners[i + 1], 50, endpoint=False) for i in range(3)]
                           + [np.array([corners[3]])])
    cam = (obs.extrinsics[:3, :3] @ dense.T + obs.extrinsics[:3, 3:4])
    uv = (obs.intrinsics @ cam)[:2] / cam[2]
    n = max(2, len(chosen.get("trace") or []) or 8)
    out["gt_trace"] = [[round(float(x), 1), round(float(y), 1)] for x, y in Trace(uv.T.tolist()).resample(n).points]
    return out
