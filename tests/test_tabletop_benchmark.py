"""The tabletop suite's records and scoring, and the embodied agent's pure parts (no simulator needed)."""

from __future__ import annotations

import pytest

from toolpath.agents.embodied import check_spec, task_objects
from toolpath.agents.embodied_points import choose_points
from toolpath.evals.benchmarks import BenchmarkDataError, get_benchmark
from toolpath.evals.benchmarks.tabletop import Tabletop
from toolpath.policies.formats.fsd import parse_fsd
from toolpath.spec import TaskSpec


def test_records_are_reproducible_and_name_objects_of_their_scene():
    a = list(Tabletop().records(seed=3))
    b = list(Tabletop().records(seed=3))
    assert len(a) == 50 and [r.data for r in a] == [r.data for r in b]
    assert {r.category for r in a} == {"sparse", "cluttered"}
    assert [r.data for r in a] != [r.data for r in Tabletop().records(seed=4)]
    for r in a:
        objs = r.data["objects"]
        assert r.data["pick"] in objs and r.data["target"] in objs and len(set(objs)) == len(objs)
        assert len(objs) == (4 if r.category == "sparse" else 6)
        colours = [o.split()[0] for o in objs]
        assert len(set(colours)) == len(colours)  # every object has its own colour: the instruction is unambiguous
        assert task_objects(r.data["instruction"])["pick"].split()[0] == r.data["pick"].split()[0]


def test_to_task_is_a_valid_embodied_spec_and_the_episode_count_is_checked(monkeypatch):
    rec = list(Tabletop().records(limit=1))[0]
    spec = Tabletop().to_task(rec, model="oracle")
    assert isinstance(spec, TaskSpec) and spec.agent.name == "embodied" and spec.sandbox.kind == "robot"
    assert spec.sandbox.options["seed"] == rec.data["episode_seed"] and spec.model.name == "oracle"
    check_spec(spec)
    monkeypatch.setenv("TOOLPATH_TABLETOP_EPISODES", "zero")
    with pytest.raises(BenchmarkDataError, match="TOOLPATH_TABLETOP_EPISODES"):
        list(get_benchmark("tabletop").records())


def test_score_needs_the_simulator_to_have_judged_success():
    bench, rec = Tabletop(), list(Tabletop().records(limit=1))[0]
    assert bench.score_final(rec, "success", {"success": True, "judged_by": "simulator"}) == 1.0
    assert bench.score_final(rec, "success", {"success": True, "judged_by": "visual check"}) == 0.0
    assert bench.score_final(rec, "success", {"success": False, "judged_by": "simulator"}) == 0.0
    assert bench.score(rec, "success: the red cube is on the blue plate") == 0.0


def test_final_metrics_point_hits_and_trace_errors():
    bench, rec = Tabletop(), list(Tabletop().records(limit=1))[0]
    trace = [[0, 0], [10, 0], [20, 0]]
    m = bench.final_metrics(rec, None, {"trace": trace, "truth": {"pick_on_object": True, "place_on_target": False,
                                                                  "gt_trace": [[0, 3], [10, 3], [20, 3]]}})
    assert m["pick_hit"] == 1.0 and m["place_hit"] == 0.0
    # VABench's MAE is the mean of (|dx| + |dy|) / 2, its RMSE the root mean squared distance
    assert m["trace_mae"] == pytest.approx(1.5) and m["trace_rmse"] == pytest.approx(3.0)
    assert bench.final_metrics(rec, None, {}) == {}


@pytest.mark.parametrize("text, pick, target", [
    ("put the red cube on the blue plate", "red cube", "blue plate"),
    ("Place the green block onto the yellow plate.", "green block", "yellow plate"),
    ("move the purple cube to the orange dish", "purple cube", "orange dish"),
])
def test_task_objects(text, pick, target):
    assert task_objects(text) == {"pick": pick, "target": target}


def test_task_objects_rejects_what_is_not_a_pick_and_place():
    with pytest.raises(ValueError, match="instruction: expected a pick-and-place task"):
        task_objects("what colour is the cube?")


def test_check_spec_names_the_bad_parameter():
    base = {"id": "t", "instruction": "put the red cube on the blue plate", "agent": {"name": "embodied"},
            "sandbox": {"kind": "robot"}}
    check_spec(TaskSpec.model_validate(base))
    for params, words in (({"representation": "mask"}, "representation"), ({"retries": -1}, "retries"),
                          ({"verify": "yes"}, "verify")):
        with pytest.raises(ValueError, match=words):
            check_spec(TaskSpec.model_validate({**base, "agent": {"name": "embodied", "params": params}}))
    with pytest.raises(ValueError, match="sandbox to robot"):
        check_spec(TaskSpec.model_validate({**base, "sandbox": {"kind": "none"}}))


def test_choose_points_follows_the_representation_and_falls_back():
    task = {"pick": "red cube", "target": "blue plate"}
    rel = parse_fsd("<ref>red cube</ref><box>[[100, 100, 200, 200]]</box> "
                    "<ref>blue plate</ref><box>[[600, 600, 800, 800]]</box>")
    trace = parse_fsd("<answer><point>[[150, 150], [300, 300], [700, 700]]</point></answer>")
    aff = parse_fsd("<answer><box>[[120, 120, 160, 160]]</box></answer>")
    free = parse_fsd("<answer><point>[[680, 700], [720, 700]]</point></answer>")
    c, _ = choose_points("trace", task, rel, trace, None, free)
    assert c["pick_grid"] == [150, 150] and c["place_grid"] == [700, 700]
    assert c["sources"]["place"] == "mean free-space point"
    c, _ = choose_points("affordance", task, rel, None, aff, None)
    assert c["pick_grid"] == [140, 140] and c["place_grid"] == [700, 700]
    assert c["sources"]["place"] == "relation graph box"
    c, _ = choose_points("trace", task, rel, trace, None, None)
    assert c["place_grid"] == [700, 700] and c["sources"]["place"] == "trace end"
    c, why = choose_points("trace", task, parse_fsd("I cannot see a red cube."), None, None, None)
    assert c == {} and "red cube" in why and "blue plate" in why
