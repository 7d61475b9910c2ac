"""VABench-style metrics against hand-computed cases, and the VABench loader/scorer on records generated here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from toolpath.coords import CoordinateSpace
from toolpath.evals.benchmarks import BenchmarkDataError
from toolpath.evals.benchmarks.vabench import VABench, read_records, task_of
from toolpath.evals.benchmarks.vabench_metrics import dtw, point_accuracy, resample_by_index, trace_errors
from toolpath.policies.formats.fsd import QUESTIONS, format_points, question_kind
from toolpath.tools.spatial import Box

W, H = 640, 480


# ---- point accuracy -------------------------------------------------------------------------------------

def test_point_accuracy_in_a_box_edges_included():
    box = [10, 20, 50, 40]
    assert point_accuracy([(10, 20), (50, 40), (30, 30), (51, 30)], box) == 0.75
    assert point_accuracy([(0, 0)], box) == 0.0
    assert point_accuracy([], box) == 0.0          # no points: 0, as VABench scores them
    assert point_accuracy([(30, 30)], Box(10, 20, 50, 40)) == 1.0


def test_point_accuracy_in_a_polygon_flat_or_pairs():
    u_shape = [0, 0, 30, 0, 30, 30, 20, 30, 20, 10, 10, 10, 10, 30, 0, 30]  # a "U": notch 10..20 × 10..30
    pts = [(5, 20), (15, 20), (25, 25), (15, 5)]  # left arm, the notch (outside), right arm, the base
    assert point_accuracy(pts, u_shape) == 0.75
    pairs = [u_shape[i:i + 2] for i in range(0, len(u_shape), 2)]
    assert point_accuracy(pts, pairs) == 0.75


def test_point_accuracy_in_a_mask_by_the_pixel_holding_the_point():
    mask = np.zeros((5, 6), bool)
    mask[1:3, 2:4] = True  # pixels x 2..3, y 1..2
    pts = [(2, 1), (3.4, 2.4), (3.6, 2), (1.4, 1), (-1, -1), (100, 2)]
    # (2,1) in; (3.4,2.4) → pixel (3,2) in; (3.6,2) → pixel (4,2) out; (1.4,1) → (1,1) out; off-image out
    assert point_accuracy(pts, mask) == pytest.approx(2 / 6)


def test_point_accuracy_bad_region_is_named():
    for bad in ([1, 2, 3], [1, 2, 3, 4, 5], "box", [[1, 2], [3, 4]]):
        with pytest.raises(ValueError, match="region must be a box"):
            point_accuracy([(1, 1)], bad)


# ---- traces ---------------------------------------------------------------------------------------------

def test_resampling_by_index_as_vabench_does():
    r = resample_by_index([(0, 0), (10, 0), (10, 30)], 5)  # at indices 0, .5, 1, 1.5, 2
    assert np.allclose(r, [[0, 0], [5, 0], [10, 0], [10, 15], [10, 30]])
    assert np.allclose(resample_by_index([(7, 8)], 3), [[7, 8]] * 3)


def test_trace_errors_by_hand():
    # equal lengths, a constant offset of (3, 4): |dx|+|dy| / 2 = 3.5, distance 5
    e = trace_errors([(0, 0), (10, 0), (20, 0)], [(3, 4), (13, 4), (23, 4)])
    assert e["n"] == 3
    assert e["mae"] == pytest.approx(3.5)
    assert e["rmse"] == pytest.approx(5.0)
    assert e["dtw"] == pytest.approx(15.0)  # the diagonal: 5 + 5 + 5
    # different lengths: both resampled to the longer (3); pred → (0,0), (5,0), (10,0)
    e = trace_errors([(0, 0), (10, 0)], [(0, 0), (10, 0), (20, 0)])
    assert e["n"] == 3
    assert e["mae"] == pytest.approx((0 + 2.5 + 5) / 3)
    assert e["rmse"] == pytest.approx(math.sqrt((0 + 25 + 100) / 3))
    # DTW: pred 0, 5, 10 against gt 0, 10, 20 on a line; the best alignment costs 0 + 5 + 10
    assert e["dtw"] == pytest.approx(15.0)
    assert trace_errors([(1, 2), (3, 4)], [(1, 2), (3, 4)]) == {"mae": 0.0, "rmse": 0.0, "dtw": 0.0, "n": 2}


def test_trace_errors_with_a_given_n_and_by_arc_length():
    pred, gt = [(0, 0), (10, 0)], [(0, 0), (1, 0), (10, 0)]
    # by index gt's middle point is (1, 0), pred's (5, 0); by arc length both are (5, 0)
    assert trace_errors(pred, gt, n=3)["mae"] == pytest.approx((0 + 2 + 0) / 3)
    assert trace_errors(pred, gt, n=3, by="arc")["mae"] == pytest.approx(0.0)
    assert trace_errors(pred, gt, n=5)["n"] == 5
    with pytest.raises(ValueError, match="by must be"):
        trace_errors(pred, gt, by="time")
    with pytest.raises(ValueError, match="the pred trace has no points"):
        trace_errors([], gt)
    with pytest.raises(ValueError, match="positive integer"):
        trace_errors(pred, gt, n=0)


def test_dtw_warps_repeated_points_for_free():
    # a trace that pauses (a repeated point) aligns with the one that does not at no cost
    assert dtw([(0, 0), (0, 0), (1, 0), (2, 0)], [(0, 0), (1, 0), (2, 0)]) == 0.0
    # one sequence a single point: every point of the other pays its distance to it
    assert dtw([(0, 0)], [(3, 4), (6, 8)]) == pytest.approx(15.0)


# ---- records, tasks, scores -----------------------------------------------------------------------------

PROBLEM = ("<image> You are currently a robot performing robotic manipulation tasks. Your task instruction: "
           "put the red cube on the blue plate. Observe the image, use 2D points to mark …")
TRAJ = [[100, 240], [160, 200], [220, 180], [280, 170], [340, 170], [400, 180], [460, 200], [520, 240]]


def _write(tmp_path, rows, name="vabench.jsonl"):
    (tmp_path / "images").mkdir(exist_ok=True)
    Image.new("RGB", (W, H), (128, 128, 128)).save(tmp_path / "images" / "scene.png")
    mask = np.zeros((H, W), np.uint8)
    mask[200:300, 300:400] = 255
    Image.fromarray(mask).save(tmp_path / "images" / "mask.png")
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _rows():
    return [
        {"id": "trace_1", "problem": PROBLEM, "image": "scene.png",
         "answer": "<type>fsd_visual_trace</type>" + json.dumps({"trajectory": TRAJ})},
        {"id": "point_1", "problem": PROBLEM.replace("2D points to mark …", "points for free space"),
         "images": ["images/scene.png"],
         "answer": "<type>fsd_free_point</type>" + json.dumps({"bbox": [300, 200, 400, 300], "free_points": []})},
        {"id": "point_2", "instruction": "place the cube in the marked area", "image_path": "scene.png",
         "answer_raw": {"type": "fsd_free_point", "data": {"mask": "mask.png"}}},
    ]


def test_records_load_with_kinds_tasks_and_sizes(tmp_path):
    recs = read_records(_write(tmp_path, _rows()))
    assert [(r.id, r.category) for r in recs] == [("trace_1", "trace"), ("point_1", "point"), ("point_2", "point")]
    t = recs[0].data
    assert t["task"] == "put the red cube on the blue plate"
    assert (t["width"], t["height"]) == (W, H) and t["trajectory"][0] == [100.0, 240.0]
    assert recs[1].data["bbox"] == [300.0, 200.0, 400.0, 300.0]
    assert recs[2].data["task"] == "place the cube in the marked area" and recs[2].data["mask"].endswith("mask.png")
    # a folder reads every .json/.jsonl in it; a JSON list works as well as JSONL
    (tmp_path / "more.json").write_text(json.dumps([dict(_rows()[0], id="trace_2")]))
    assert len(VABench(data=tmp_path).records()) == 4
    assert len(VABench(data=tmp_path).records(limit=2)) == 2  # round-robin over the kinds
    assert {r.category for r in VABench(data=tmp_path).records(limit=2)} == {"trace", "point"}


@pytest.mark.parametrize("change, where, what", [
    ({"id": ""}, ":1", "id"),
    ({"problem": "<image> "}, ":1", "problem"),
    ({"answer": "{\"trajectory\": []}"}, ":1", "answer: expected \"<type>"),
    ({"answer": "<type>fsd_other</type>{}"}, ":1", "type 'fsd_other'"),
    ({"answer": "<type>fsd_visual_trace</type>{\"trajectory\": [[1, 2]]}"}, ":1", ">= 2 [x, y] points"),
    ({"answer": "<type>fsd_visual_trace</type>{oops"}, ":1", "not valid"),
    ({"answer": "<type>fsd_free_point</type>{\"bbox\": [5, 5, 1, 1]}"}, ":1", "needs bbox"),
    ({"image": "missing.png"}, ":1", "image not found"),
])
def test_a_bad_record_stops_the_load_naming_file_line_and_field(tmp_path, change, where, what):
    rows = _rows()
    rows[0] = {**rows[0], **change}
    path = _write(tmp_path, rows)
    with pytest.raises(BenchmarkDataError) as err:
        read_records(path)
    assert f"{path}{where}" in str(err.value) and what in str(err.value)


def test_repeated_ids_parquet_and_missing_data_are_named(tmp_path, monkeypatch):
    path = _write(tmp_path, [_rows()[0], _rows()[0]])
    with pytest.raises(BenchmarkDataError, match="repeats"):
        read_records(path)
    with pytest.raises(BenchmarkDataError, match="parquet is not read here"):
        read_records(tmp_path / "test.parquet")
    monkeypatch.setenv("TOOLPATH_VABENCH", str(tmp_path / "nowhere"))
    with pytest.raises(BenchmarkDataError, match="TOOLPATH_VABENCH"):
        VABench().records()


def test_tasks_ask_our_question_of_each_kind(tmp_path):
    bench = VABench(data=_write(tmp_path, _rows()))
    trace, point, _ = bench.records()
    spec = bench.to_task(trace, model="scripted:x.yaml")
    assert spec.agent.name == "react" and spec.tools == ["final_answer"]
    assert spec.instruction.startswith("Task: put the red cube on the blue plate\nImage: 640x480 pixels")
    assert question_kind(spec.instruction) == "trace"
    assert question_kind(bench.to_task(point).instruction) == "free_space"
    assert str(spec.inputs.images[0]).endswith("scene.png")
    assert spec.metadata["category"] == "trace"


def test_point_scores_on_generated_records(tmp_path):
    bench = VABench(data=_write(tmp_path, _rows()))
    _, box_rec, mask_rec = bench.records()
    space = CoordinateSpace("grid1000", W, H)
    inside = [space.from_screen(350, 250), space.from_screen(310, 210)]
    outside = [space.from_screen(100, 100)]
    answer = f"<think>free space on the plate</think><answer>{format_points(inside + outside)}</answer>"
    assert bench.score(box_rec, answer) == pytest.approx(2 / 3)
    assert bench.metrics(box_rec, answer) == {"points_in": 2.0, "points": 3.0, "accuracy": pytest.approx(2 / 3)}
    assert bench.score(mask_rec, answer) == pytest.approx(2 / 3)
    # only the first <point> block counts (as VABench reads it); unreadable or missing points score 0
    assert bench.score(box_rec, f"<answer>{format_points(inside)}{format_points(outside)}</answer>") == 1.0
    for bad in (None, "", "the plate", "<answer><point>[[2000, 1]]</point></answer>"):
        assert bench.score(box_rec, bad) == 0.0
        assert bench.metrics(box_rec, bad)["points"] == 0.0


def _grid_text(points, w=W, h=H) -> str:
    """<point>[…]</point> with each pixel point written exactly on the 0-1000 grid (x * 1000 / w)."""
    return "<point>[" + ", ".join(f"[{x * 1000 / w!r}, {y * 1000 / h!r}]" for x, y in points) + "]</point>"


def test_trace_scores_on_generated_records(tmp_path):
    bench = VABench(data=_write(tmp_path, _rows()))
    rec = bench.records()[0]
    exact = f"<answer>{_grid_text(TRAJ)}</answer>"
    m = bench.metrics(rec, exact)
    assert m["valid"] == 1.0 and m["rmse"] == pytest.approx(0, abs=1e-9) and m["mae"] == pytest.approx(0, abs=1e-9)
    assert bench.score(rec, exact) == pytest.approx(1.0)
    # shifted 30 grid units right: 30 * 999 / 1000 on VABench's grid (pixels * 999 / width)
    shifted = f"<answer>{_grid_text([(x + 30 * W / 1000, y) for x, y in TRAJ])}</answer>"
    m = bench.metrics(rec, shifted)
    assert m["mae"] == pytest.approx(15 * 0.999) and m["rmse"] == pytest.approx(30 * 0.999)
    assert bench.score(rec, shifted) == pytest.approx(1 - 0.02997)
    # a 4-point answer is resampled to the truth's 8 points before comparing
    m = bench.metrics(rec, f"<answer>{_grid_text(TRAJ[::2])}</answer>")
    assert m["valid"] == 1.0 and m["rmse"] > 0
    for bad in (None, "no trace", "<answer><point>[[10, 10]]</point></answer>"):
        assert bench.score(rec, bad) == 0.0 and bench.metrics(rec, bad) == {"valid": 0.0}


def test_task_of_reads_the_instruction_out_of_fsd_problems():
    assert task_of(PROBLEM) == "put the red cube on the blue plate"
    assert task_of("<image> Move the yellow block in the middle of the table") == \
        "Move the yellow block in the middle of the table"
    assert "0-1000 grid" in QUESTIONS["trace"]


# ---- scoring modes (vabench_scoring.py; the case table is tests/data/scoring_cases/vabench.json) -----------

from pathlib import Path  # noqa: E402

from toolpath.evals.benchmarks import Record  # noqa: E402
from toolpath.evals.benchmarks.vabench_scoring import (  # noqa: E402
    MISSING_POINTS,
    evaluate,
    grid_to_pixels,
    official_points,
    score_case,
)

TABLE = Path(__file__).parent / "data" / "scoring_cases" / "vabench.json"
BOX = [300.0, 200.0, 400.0, 300.0]


def _point(answer, mode, box=BOX, w=W, h=H):
    return evaluate(Record("p", "point", {"kind": "point", "width": w, "height": h, "bbox": box}), answer, mode)


def _trace(answer, mode, traj=TRAJ, w=W, h=H):
    data = {"kind": "trace", "width": w, "height": h, "trajectory": [[float(x), float(y)] for x, y in traj]}
    return evaluate(Record("t", "trace", data), answer, mode)


def test_the_ground_truth_goes_to_the_grid_as_vabench_does_without_rounding():
    # 256 px wide: pixel 100 is 100 / 256 * 999 = 390.234… on VABench's grid; the old route (from_screen, the
    # pixel's centre rounded to a whole unit) put it at 393, 2.8 units right
    traj = [(100, 50), (200, 150)]
    for w in (256, 640, 1280, 333):
        exact = f"<answer>{_grid_text(traj, w, 480)}</answer>"
        for mode in ("toolpath", "official"):
            assert _trace(exact, mode, traj, w, 480).metrics["rmse"] == pytest.approx(0, abs=1e-9)
    space = CoordinateSpace("grid1000", 256, 480)
    rounded = "<answer>" + format_points([space.from_screen(x, y) for x, y in traj]) + "</answer>"
    assert _trace(rounded, "official", traj, 256, 480).metrics["rmse"] > 2


def test_a_point_record_is_weighted_by_its_points_so_the_eval_pools_them():
    inside, outside = (350, 250), (100, 100)
    replies = [f"<answer>{_grid_text([inside, inside, outside])}</answer>",  # 2 of 3
               f"<answer>{_grid_text([inside])}</answer>"]                     # 1 of 1
    for mode in ("toolpath", "official"):
        scores = [_point(r, mode) for r in replies]
        assert [s.value for s in scores] == [pytest.approx(2 / 3), 1.0] and [s.weight for s in scores] == [3, 1]
        pooled = sum(s.value * s.weight for s in scores) / sum(s.weight for s in scores)
        assert pooled == pytest.approx(3 / 4)  # points inside / all points, not the mean of 2/3 and 1
        assert scores[0].metrics == {"points_in": 2.0, "points": 3.0, "accuracy": pytest.approx(2 / 3)}


def test_a_point_reply_without_points_drops_out_officially_and_costs_in_toolpath():
    for reply in (None, "", "the plate", "<answer></answer>", "<answer>\n<point>[[500, 500]]</point>\n</answer>"):
        official = _point(reply, "official")
        assert official.value == 0.0 and official.weight == 0.0
    toolpath = _point("the plate", "toolpath")
    assert toolpath.value == 0.0 and toolpath.weight == MISSING_POINTS
    # an item the official code cannot compare or draw drops the whole record (weight 0), the others with it
    for reply in ("<answer><point>[500, 500]</point></answer>",
                  '<answer><point>[[-5, "a"], [550, 500]]</point></answer>',
                  "<answer><point>[[550, 500], null]</point></answer>"):
        s = _point(reply, "official")
        assert (s.value, s.weight) == (0.0, 0.0) and "dropped" in s.explanation


def test_boundary_points_count_as_inside_in_both_modes():
    edges = [(300, 200), (400, 300), (300, 250)]
    for mode in ("toolpath", "official"):
        assert _point(f"<answer>{_grid_text(edges)}</answer>", mode).value == 1.0
        assert _point(f"<answer>{_grid_text([(400.5, 300)])}</answer>", mode).value == 0.0


@pytest.mark.parametrize("reply, official, toolpath", [
    ("<answer>\n<point>[[546.875, 520.8333]]</point>\n</answer>", 0.0, 1.0),   # answer over several lines
    ("<point>[[546.875, 520.8333]]</point>", 0.0, 1.0),                         # no <answer> tags
    ("<Answer><point>[[546.875, 520.8333]]</point></Answer>", 0.0, 1.0),        # capitalised <Answer>
    ("<answer><point> [[546.875, 520.8333]] </point></answer>", 0.0, 1.0),      # spaces inside <point>
    ("<answer><point>[(546.875, 520.8333)]</point></answer>", 0.0, 1.0),        # points in parentheses
    ("<answer><point>[546.875, 520.8333]</point></answer>", 0.0, 1.0),          # lone [x, y]
    ("<answer><point>[[[546.875, 520.8333]]]</point></answer>", 0.0, 1.0),      # extra brackets
    ("<answer><point>[[546.875, 520.8333]]</answer>", 0.0, 1.0),                # unclosed <point>
    ("<answer><point>[[546.875, 520.8333], [1200, 500]]</point></answer>", 0.5, 0.0),     # value off the grid
    ("<answer><point>[[546.875, 520.8333], [5, 5, 5]]</point></answer>", 0.5, 0.0),       # item of three numbers
    ("<answer><point>[[546.875, 520.8333], [100, 100]]</point></answer>", 0.5, 0.5),      # read alike
])
def test_point_replies_that_the_modes_read_differently(reply, official, toolpath):
    assert _point(reply, "official").value == pytest.approx(official)
    assert _point(reply, "toolpath").value == pytest.approx(toolpath)


def test_trace_scores_official_unclamped_and_invalid_left_out_toolpath_clamped_and_invalid_zero():
    far = [(639, 479), (638, 477), (639, 478)]
    reply = "<answer><point>[[0, 0], [0, 1], [1, 0]]</point></answer>"
    official, toolpath = _trace(reply, "official", far), _trace(reply, "toolpath", far)
    assert official.metrics["rmse"] > 1000 and official.value == pytest.approx(1 - official.metrics["rmse"] / 1000)
    assert official.value < 0 and toolpath.value == 0.0 and official.weight == toolpath.weight == 1.0
    for reply in ("no trace", "<answer><point>[[10, 10]]</point></answer>",
                  "<answer><point>[[1, 2, 3], [4, 5, 6]]</point></answer>"):
        assert (_trace(reply, "official").value, _trace(reply, "official").weight) == (0.0, 0.0)
        assert (_trace(reply, "toolpath").value, _trace(reply, "toolpath").weight) == (0.0, 1.0)
    multiline = "<answer>\n<point>[[10, 10], [20, 20]]</point>\n</answer>"  # read by toolpath only
    assert _trace(multiline, "official").weight == 0.0 and _trace(multiline, "toolpath").metrics["valid"] == 1.0
    # a first waypoint of Infinity fails the official visualization: dropped
    assert _trace("<answer><point>[[1e999, 5], [5, 5]]</point></answer>", "official").weight == 0.0


def test_the_official_parser_and_the_grid_to_pixel_step():
    assert official_points("<answer><point>[[1, 2], [3.5, 4]]</point></answer>") == [[1, 2], [3.5, 4]]
    assert official_points("<answer><point>[[1, 2], [3, 4],]</point></answer>") == [[1.0, 2.0], [3.0, 4.0]]
    assert official_points("<answer><point>[[-1, 2], [3, 4],]</point></answer>") == [[3.0, 4.0]]  # no sign
    assert official_points("<answer><point>[(1, 2)]</point></answer>") == []
    assert official_points(None) == [] and official_points("<answer><point>[[[[[[[[</point></answer>") == []
    assert grid_to_pixels([[500, 250], "ab", [1, 2, 3], [None, 1]], 640, 480) == \
        [[320.0, 120.0], "ab", [0.64, 0.96, 3], [None, 0.48]]


def test_masks_and_polygons_in_official_mode_use_our_region_test_after_the_official_parsing(tmp_path):
    bench = VABench(data=_write(tmp_path, _rows())).scored_as("official")
    _, box_rec, mask_rec = bench.records()
    reply = f"<answer>{_grid_text([(350, 250), (310, 210), (100, 100)])}</answer>"
    assert bench.score(mask_rec, reply) == pytest.approx(2 / 3) and bench.score(mask_rec, reply).weight == 3
    poly = [300, 200, 400, 200, 400, 300, 300, 300]
    assert score_case({"kind": "point", "width": W, "height": H, "polygon": poly, "bbox": BOX, "answer": reply},
                      "official") == pytest.approx(2 / 3)
    assert bench.score(box_rec, "<answer>\n" + reply[8:]) == 0.0  # the official reading: one line only


def test_scoring_never_raises_on_garbage():
    junk = [None, "", "<", "<answer>" * 1000, "<answer><point>[" + "[" * 5000 + "</point></answer>",
            "<answer><point>[[1e999, -1e999], [NaN, Infinity]]</point></answer>",
            "<answer><point>[[" + "9" * 5000 + ", 1], [2, 3]]</point></answer>",
            "<answer><point>[[1e308, 1e308], [-1e308, 5], [1e308, 1]]</point></answer>", 12345, ["list"]]
    for reply in junk:
        for mode in ("toolpath", "official"):
            for s in (_point(reply, mode), _trace(reply, mode)):
                assert math.isfinite(s.value) and math.isfinite(s.weight)


def test_the_case_table_matches_in_both_modes_with_the_official_weights_and_errors():
    table = json.loads(TABLE.read_text())
    assert table["scorer"] == "toolpath.evals.benchmarks.vabench_scoring:score_case" and len(table["cases"]) > 1000
    for row in table["cases"]:
        case, detail = row["case"], row["official_detail"]
        for mode in ("official", "toolpath"):
            assert score_case(case, mode) == pytest.approx(row[mode], abs=1e-9), (row["id"], mode)
        assert (row["kind"] == "") == (abs(row["official"] - row["toolpath"]) <= 1e-9), row["id"]
        data = {k: case[k] for k in ("kind", "width", "height", "bbox", "trajectory") if k in case}
        s = evaluate(Record("x", case["kind"], data), case["answer"], "official")
        assert s.weight == detail["weight"], row["id"]
        if isinstance(detail.get("rmse"), float):
            assert s.metrics["rmse"] == pytest.approx(detail["rmse"])
            assert s.metrics["mae"] == pytest.approx(detail["mae"])
        if "points" in detail:
            assert (s.metrics["points_in"], s.metrics["points"]) == (detail["points_in"], detail["points"])
