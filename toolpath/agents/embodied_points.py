"""Where the embodied agent picks and places: points chosen from the policy's answers, converted from FSD's
0-1000 grid to image pixels, and drawn on the camera image for the step record."""

from __future__ import annotations

from ..state import ArtifactRef
from .nodes import Runtime


def to_pixels(points, size) -> list[list[int]]:
    from ..coords import CoordinateSpace

    space = CoordinateSpace("grid1000", *size)
    return [list(space.to_screen(float(x), float(y))) for x, y in points]


def _find(objects, name: str):
    """The box the policy gave for the object called `name` (names matched loosely), or None."""
    from ..tools.spatial import same_object

    for obj_name, box in objects:
        if same_object(obj_name, name):
            return box
    return None


def choose_points(rep: str, task: dict, relations, trace, affordance, free) -> tuple[dict, str]:
    """Pick and place points (grid) from the answers, each with where it came from; ("", why) when unusable."""
    pick = place = None
    src = {}
    trace_pts = trace.points[0] if trace is not None and trace.points else []
    if rep == "affordance" and affordance is not None and affordance.boxes:
        b = affordance.boxes[0]
        pick, src["pick"] = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2], "affordance box"
    elif trace_pts:
        pick, src["pick"] = list(trace_pts[0]), "trace"
    else:
        b = _find(relations.objects, task["pick"]) if relations is not None else None
        if b is not None:
            pick, src["pick"] = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2], "relation graph box"
    free_pts = free.points[0] if free is not None and free.points else []
    if free_pts:
        place = [sum(p[0] for p in free_pts) / len(free_pts), sum(p[1] for p in free_pts) / len(free_pts)]
        src["place"] = "mean free-space point"
    elif len(trace_pts) >= 2:
        place, src["place"] = list(trace_pts[-1]), "trace end"
    else:
        b = _find(relations.objects, task["target"]) if relations is not None else None
        if b is not None:
            place, src["place"] = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2], "relation graph box"
    missing = [what for what, v in (("where to pick the " + task["pick"], pick),
                                    ("where to put it on the " + task["target"], place)) if v is None]
    if missing:
        return {}, "no usable answer for " + " and ".join(missing)
    return {"pick_grid": pick, "place_grid": place, "trace_grid": [list(p) for p in trace_pts],
            "free_grid": [list(p) for p in free_pts], "sources": src}, ""


def boxes_in_pixels(relations, size) -> dict:
    out = {}
    if relations is None:
        return out
    for name, b in relations.objects:
        try:
            (x1, y1), (x2, y2) = to_pixels([b[:2], b[2:]], size)
        except ValueError:
            continue
        out[name] = [x1, y1, x2, y2]
    return out


def draw_points(rt: Runtime, state: dict, chosen: dict) -> ArtifactRef:
    """The camera image with the trace (numbered), the boxes, the free-space points and pick/place marked."""
    from ..tools.spatial import draw

    png = draw(ArtifactRef.model_validate(state["camera"]).path, boxes=list(chosen["boxes"].values()),
               labels=list(chosen["boxes"]), trace=chosen["trace"] or None,
               points=[chosen["pick"], chosen["place"], *chosen["free"]])
    return rt.store.put_artifact(png, name=f"trace_{state['attempts']}.png", mime="image/png")
