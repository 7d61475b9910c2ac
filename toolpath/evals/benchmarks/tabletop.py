"""Tabletop pick-and-place: a procedurally generated suite for the embodied agent, scored by the simulator.

`toolpath eval tabletop [--limit N] [--seed S] [--model oracle|detector|…]`. Episode i of seed S builds its
scene from the seed S·1000 + i: cubes and plates of distinct colours (sandboxes/robot_scene.py places them), one
cube to pick, one plate to put it on, the instruction in one of a few phrasings ("put the red cube on the blue
plate", "place the red block onto the blue plate", …). Categories: `sparse` (2 cubes, 2 plates) and
`cluttered` (3 cubes, 3 plates). 50 episodes by default (TOOLPATH_TABLETOP_EPISODES).

Score: 1 when the simulator finds the cube resting on the plate, released (TabletopSandbox.is_on), from the
run's final state. Metrics per sample (means in the table): `pick_hit` / `place_hit` — the pick point on the
cube, the place point on the plate, in the segmentation the points were chosen on (VABench's point
accuracy, one point each) — and the visual trace against the ground-truth trace (the cube lifted, carried and
set down, projected into the image) after resampling to equal length: `trace_mae`, `trace_rmse` and `trace_dtw`
in pixels. The default model is `detector` (colour/shape detection from the image alone); `oracle` reads the
simulator's truth and so measures the pipeline from points to motion.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, pick, task_id

COLORS = ("red", "green", "blue", "yellow", "purple", "orange")
PHRASES = ("put the {pick} cube on the {target} plate", "place the {pick} block onto the {target} plate",
           "move the {pick} cube to the {target} plate", "put the {pick} block on the {target} dish")
LAYOUTS = {"sparse": (2, 2), "cluttered": (3, 3)}
EPISODES_ENV = "TOOLPATH_TABLETOP_EPISODES"


def _episodes() -> int:
    raw = os.environ.get(EPISODES_ENV, "").strip()
    if not raw:
        return 50
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n <= 0:
        raise BenchmarkDataError(f"{EPISODES_ENV}={raw!r}: expected a positive number of episodes")
    return n


def make_record(episode_seed: int, layout: str) -> Record:
    """One episode: its objects, which cube goes on which plate, and the instruction."""
    rng = random.Random(episode_seed)
    cubes, plates = LAYOUTS[layout]
    colors = rng.sample(COLORS, cubes + plates)  # every object its own colour: the instruction is unambiguous
    cube_colors, plate_colors = colors[:cubes], colors[cubes:]
    pick_color, target_color = rng.choice(cube_colors), rng.choice(plate_colors)
    instruction = rng.choice(PHRASES).format(pick=pick_color, target=target_color)
    objects = [f"{c} cube" for c in cube_colors] + [f"{c} plate" for c in plate_colors]
    return Record(id=f"{layout}/{episode_seed}", category=layout,
                  data={"episode_seed": episode_seed, "objects": objects, "instruction": instruction,
                        "pick": f"{pick_color} cube", "target": f"{target_color} plate"})


class Tabletop(Benchmark):
    name = "tabletop"
    description = "Tabletop pick-and-place in a pybullet simulation, scored by the simulator's final state"
    scores_final_state = True

    def __init__(self, episodes: int | None = None, model: str = "detector", max_steps: int = 20):
        self.episodes = episodes
        self.model = model
        self.max_steps = max_steps

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        n = self.episodes or _episodes()
        layouts = list(LAYOUTS)
        records = [make_record(seed * 1000 + i, layouts[i % len(layouts)]) for i in range(n)]
        return pick(records, limit, 0)

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        d = record.data
        return TaskSpec.model_validate({
            "id": task_id(f"tabletop-{record.id}"),
            "instruction": d["instruction"],
            "agent": {"name": "embodied"},
            "model": model or self.model,
            "sandbox": {"kind": "robot", "options": {"seed": d["episode_seed"], "objects": d["objects"]}},
            "limits": {"max_steps": self.max_steps, "max_seconds": 300},
            "evaluator": {"name": "tabletop", "expected": {"pick": d["pick"], "target": d["target"]}},
            "seed": d["episode_seed"],
            "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id},
        })

    def score(self, record: Record, answer: str | None) -> Score:
        return Score(0.0, explanation="success lives in the simulator: without a final state there is nothing to "
                                      "score")

    def score_final(self, record: Record, answer: str | None, final_state: dict) -> Score:
        ok = final_state.get("success") is True and final_state.get("judged_by") == "simulator"
        return Score(1.0 if ok else 0.0, explanation=f"judged by {final_state.get('judged_by') or 'nobody'}")

    def final_metrics(self, record: Record, answer: str | None, final_state: dict) -> dict[str, float]:
        from .vabench_metrics import trace_errors

        truth = final_state.get("truth") or {}
        out: dict[str, float] = {}
        for key, name in (("pick_on_object", "pick_hit"), ("place_on_target", "place_hit")):
            if isinstance(truth.get(key), bool):
                out[name] = float(truth[key])
        trace, gt = final_state.get("trace"), truth.get("gt_trace")
        if trace and gt and len(trace) >= 2:
            errors = trace_errors(trace, gt)
            out.update(trace_mae=errors["mae"], trace_rmse=errors["rmse"], trace_dtw=errors["dtw"])
        return out
