"""The learned subroutine library (toolpath/planners/subroutines.py, induction.py, library.py): predicates, choice,
running, persistence, traces and induction with a held-out A/B, on fake edit tools that do real numpy work with known
qualities."""

import numpy as np
import pytest

from toolpath.planners.induction import learn_preconditions, parse_proposal
from toolpath.planners.library import Library
from toolpath.planners.subroutines import (
    LibraryError,
    Predicate,
    ProposalError,
    Subroutine,
    Trace,
    default_library_path,
    net_benefit,
)
from toolpath.tools.image.edit_base import EditError, EditState, EditTool, Subtask, Target
from toolpath.tools.image.priors import Prior


def fake(name, stage, kinds, quality, *, raises=None, available=None, calls=None):
    """Adds a per-tool value to the red channel; its check scores `quality` when the image changed."""
    delta = sum(map(ord, name)) % 200 + 1

    def fn(state, subtask):
        if calls is not None:
            calls.append(name)
        if raises is not None:
            raise raises
        img = state.image.astype(np.int16)
        img[..., 0] = (img[..., 0] + delta) % 256
        trail = [*state.info.get("trail", []), name]
        return state.evolve(image=img.astype(np.uint8), info={**state.info, "trail": trail})

    def check(before, after, subtask):
        return quality if np.any(before.image != after.image) else 0.0

    return EditTool(name, stage, tuple(kinds), fn, check, cost=0.01, quality=quality,
                    available=(lambda: available))


CALLS: list[str] = []
TOOLS = {t.name: t for t in [
    fake("loc_color", "locate", ("recolor", "remove"), 0.95, calls=CALLS),
    fake("loc_shape", "locate", ("recolor", "remove"), 0.9, calls=CALLS),
    fake("loc_broken", "locate", ("recolor",), 0.9, raises=EditError("nothing red"), calls=CALLS),
    fake("loc_gone", "locate", ("recolor",), 0.9, available="no weights at /models/owlvit"),
    fake("hsv", "recolor", ("recolor",), 0.9, calls=CALLS),
    fake("hsv_poor", "recolor", ("recolor",), 0.5, calls=CALLS),
    fake("lab", "recolor", ("recolor",), 0.85, calls=CALLS),
    fake("telea", "fill", ("remove",), 0.9, calls=CALLS),
]}


def start():
    return EditState(image=np.full((4, 4, 3), 60, np.uint8))


def recolor():
    return Subtask("s1", "recolor", Target("red circle", "red", "circle"), {"color": "pink"})


def sub(id, tools, pre=(), cost=1.0, quality=0.9, kind="recolor", source="mined"):
    return Subroutine(id, kind, tuple(tools), [Predicate.parse(p) for p in pre], cost, quality, source=source)


# ---- predicates ---------------------------------------------------------------------------------------------

def test_predicate_parses_checks_and_prints():
    p = Predicate.parse("target_area < 0.05")
    assert (p.feature, p.op, p.value) == ("target_area", "<", 0.05)
    assert str(p) == "target_area < 0.05" and Predicate.parse(str(p)) == p
    assert p.holds({"target_area": 0.01}) and not p.holds({"target_area": 0.05})
    assert not p.holds({}) and not p.holds({"target_area": float("nan")}) and not p.holds({"target_area": "small"})
    assert Predicate.parse("overlap>=0.2").holds({"overlap": 0.2})
    assert Predicate.parse(" n_objects <= 3 ").holds({"n_objects": np.int64(3)})
    assert Predicate.parse("edge_density > 1e-3").holds({"edge_density": 0.01})
    assert Predicate.parse("textured == 1").holds({"textured": True})
    bg = Predicate.parse("background == textured")
    assert bg.value == "textured" and bg.holds({"background": "textured"}) and not bg.holds({"background": "plain"})
    assert Predicate.parse('label == "two words"').holds({"label": "two words"})


@pytest.mark.parametrize("text", ["target_area << 0.05", "target_area ~ 0.05", "", "< 0.05", "target_area <",
                                  "area < 0.05 or 1", "3area < 1", "background > textured", "x < inf"])
def test_bad_predicate_text_is_an_error_naming_it(text):
    with pytest.raises(ValueError) as err:
        Predicate.parse(text)
    assert repr(text) in str(err.value) or text == "" and "''" in str(err.value)


def test_predicate_rejects_a_bad_operator_or_value():
    with pytest.raises(ValueError, match="unknown operator"):
        Predicate("area", "!=", 1.0)
    with pytest.raises(ValueError, match="finite number"):
        Predicate("area", "<", float("nan"))


# ---- choosing and running -------------------------------------------------------------------------------------

def test_best_respects_preconditions_kind_usability_and_the_objective(home):
    lib = Library(tools=TOOLS)
    assert lib.path == default_library_path() == home / "subroutines" / "library.json"
    small = lib.add(sub("small", ["loc_color", "hsv"], ["target_area < 0.05"], cost=1.0, quality=0.95))
    lib.add(sub("general", ["loc_shape", "hsv"], cost=1.2, quality=0.93))
    cheap = lib.add(sub("cheap", ["loc_shape", "hsv_poor"], cost=0.5, quality=0.5))
    lib.add(sub("gone", ["loc_gone", "hsv"], cost=0.01, quality=1.0))  # best numbers, but not usable here
    lib.add(sub("remover", ["loc_color", "telea"], kind="remove", cost=0.01, quality=1.0))
    tiny, big = {"target_area": 0.01}, {"target_area": 0.3}
    assert lib.best("recolor", tiny, 0.5) is small  # quality matters: 1·1.05^1.5 < 0.71·1.5^1.5
    assert lib.best("recolor", big, 0.5).id == "general"  # `small`'s precondition does not hold
    assert lib.best("recolor", {}, 0.5).id == "general"  # a missing feature does not satisfy it either
    assert lib.best("recolor", tiny, 1.8) is cheap  # at α near 2 cost dominates
    # α = 0 cares only for quality: (2−Q) picks the best quality; FaSTA*'s Q^(2−α) would have picked `cheap`
    assert lib.best("recolor", tiny, 0.0) is small
    assert min([small, cheap], key=lambda s: s.quality ** 2) is cheap
    assert lib.best("upscale", tiny, 1.0) is None
    for alpha in (-1, 3):
        with pytest.raises(ValueError, match="alpha"):
            lib.best("recolor", tiny, alpha)
        with pytest.raises(ValueError, match="alpha"):
            lib.best("upscale", tiny, alpha)


def test_best_scores_an_unmeasured_subroutine_from_priors(home):
    lib = Library(tools=TOOLS)
    lib.add(Subroutine("seeded", "recolor", ("loc_color", "lab"), source="seed"))
    measured = lib.add(sub("measured", ["loc_shape", "hsv"], cost=1.0, quality=0.9))
    assert lib.best("recolor", {}, 1.0) is measured  # unknown numbers rank after measured ones
    priors = {"loc_color": Prior(0.1, 0.95, 0.05), "lab": Prior(0.2, 0.9, 0.1)}
    assert lib.best("recolor", {}, 1.0, priors).id == "seeded"  # 0.3·(2−0.855) < 1·1.1


def test_run_checks_quality_after_each_step_and_stops_at_the_first_failure(home):
    lib = Library(tools=TOOLS)
    CALLS.clear()
    steps, ok = lib.run(sub("a", ["loc_color", "hsv"]), start(), recolor(), 0.8)
    assert ok and [s.tool for s in steps] == ["loc_color", "hsv"]
    assert steps[-1].state.info["trail"] == ["loc_color", "hsv"]
    assert [s.quality for s in steps] == [0.95, 0.9]
    steps, ok = lib.run(sub("b", ["loc_shape", "hsv_poor"]), start(), recolor(), 0.8)
    assert not ok and steps[-1].tool == "hsv_poor" and steps[-1].quality == 0.5
    CALLS.clear()
    steps, ok = lib.run(sub("c", ["loc_broken", "hsv"]), start(), recolor(), 0.8)
    assert not ok and len(steps) == 1 and "nothing red" in steps[0].error and CALLS == ["loc_broken"]
    steps, ok = lib.run(sub("d", ["loc_gone", "hsv"]), start(), recolor(), 0.8)
    assert not ok and "no weights" in steps[0].error
    with pytest.raises(ValueError, match="for recolor subtasks, not remove"):
        lib.run(sub("e", ["loc_color", "hsv"]), start(), Subtask("s2", "remove", Target("cat")), 0.8)


def test_update_stats_keeps_running_averages(home):
    lib = Library(tools=TOOLS)
    s = lib.add(sub("a", ["loc_color", "hsv"], cost=1.0, quality=0.9))
    lib.update_stats(s, 2.0, 0.7, False)
    assert (s.cost, s.quality, s.uses, s.successes) == (pytest.approx(1.5), pytest.approx(0.8), 1, 0)
    lib.update_stats(s, 0.0, 1.0, True)
    assert (s.cost, s.quality, s.uses, s.successes) == (pytest.approx(1.0), pytest.approx(0.8667, abs=1e-4), 2, 1)
    fresh = lib.add(Subroutine("b", "recolor", ("loc_shape", "lab"), source="seed"))
    lib.update_stats(fresh, 0.4, 0.88, True)
    assert (fresh.cost, fresh.quality) == (0.4, 0.88)
    assert Library(lib.path, tools=TOOLS).get("a").uses == 2  # saved


def test_subroutine_shape_is_checked():
    with pytest.raises(ValueError, match="stages"):
        Subroutine("x", "recolor", ("loc_color",))
    with pytest.raises(ValueError, match="unknown kind"):
        Subroutine("x", "juggle", ("a",))
    with pytest.raises(ValueError, match="source"):
        Subroutine("x", "recolor", ("loc_color", "hsv"), source="guess")
    with pytest.raises(ValueError, match="via"):
        Trace("recolor", {}, ("a", "b"), 1.0, 0.9, True, "teleport")


# ---- persistence ------------------------------------------------------------------------------------------------

def test_library_round_trips_through_its_file(home):
    lib = Library(tools=TOOLS)
    lib.add(sub("a", ["loc_color", "hsv"], ["target_area < 0.05", "background == plain"], cost=0.3, quality=0.91))
    lib.record(Trace("recolor", {"target_area": np.float32(0.25), "plain": np.bool_(True), "bad": float("inf")},
                     ("loc_color", "hsv"), 0.3, 0.9, True, "slow", "/tmp/x.png"))
    lib.validations["k"] = {"cost": 1.0, "quality": 0.5, "n": 3}
    lib.induced_at = 1
    lib.save()
    text = lib.path.read_text()
    again = Library(lib.path, tools=TOOLS)
    assert [s.to_json() for s in again.subroutines] == [s.to_json() for s in lib.subroutines]
    assert again.subroutines[0].preconditions == [Predicate("target_area", "<", 0.05),
                                                  Predicate("background", "==", "plain")]
    t = again.traces[0]
    assert t.features == {"target_area": 0.25, "plain": True, "bad": None} and t.tools == ("loc_color", "hsv")
    assert t.sample == "/tmp/x.png" and again.validations == lib.validations and again.induced_at == 1
    again.save()
    assert lib.path.read_text() == text  # stable: saving what was loaded changes nothing
    assert not list(lib.path.parent.glob("*.tmp"))  # the atomic write leaves no temporary file behind


@pytest.mark.parametrize("content,match", [("{not json", "cannot read it as JSON"),
                                           ('{"traces": []}', "'subroutines' list"),
                                           ('{"subroutines": [{"id": "a", "kind": "recolor", "tools": ["x"]}]}',
                                            "bad entry in 'subroutines'"),
                                           ('{"subroutines": [], "traces": [{"kind": "recolor"}]}',
                                            "bad entry in 'traces'")])
def test_a_corrupt_library_is_an_error_naming_the_file_and_is_left_alone(tmp_path, content, match):
    path = tmp_path / "lib.json"
    path.write_text(content)
    with pytest.raises(LibraryError, match=match) as err:
        Library(path, tools=TOOLS)
    assert str(path) in str(err.value)
    assert path.read_text() == content


def test_due_counts_new_successful_traces(home):
    lib = Library(tools=TOOLS)
    for i in range(5):
        lib.record(Trace("recolor", {}, ("loc_color", "hsv"), 1.0, 0.9, i % 2 == 0, "slow"), save=False)
    assert lib.new_successes() == 3 and lib.due(3) and not lib.due(4)
    report = lib.induce(lambda c, s: (1.0, 1.0), k=4)
    assert "not due: 3 of 4" in report.note and not report.proposed


# ---- induction -------------------------------------------------------------------------------------------------

def logged_library(n=40, seed=0):
    """Traces where the colour locator worked on small targets and A* chose the shape locator on big ones;
    `contrast` is noise that separates nothing."""
    rng = np.random.default_rng(seed)
    lib = Library(tools=TOOLS)
    for i in range(n):
        small = i % 2 == 0
        area = float(rng.uniform(0.005, 0.04) if small else rng.uniform(0.08, 0.5))
        tools = ("loc_color", "hsv") if small else ("loc_shape", "lab")
        lib.record(Trace("recolor", {"target_area": area, "contrast": float(rng.uniform(0, 1))}, tools,
                         0.2 if small else 0.6, 0.9, True, "slow", f"samples/{i:03d}.png"), save=False)
    lib.save()
    return lib


class Validate:
    """Stands in for the agent's A/B: fixed numbers for the current behaviour and for a candidate, and a log
    of what it was asked."""

    def __init__(self, base=(1.0, 0.9), cand=(0.5, 0.9)):
        self.base, self.cand, self.asked = base, cand, []

    def __call__(self, candidate, samples):
        self.asked.append((candidate.tools if candidate else None, tuple(samples)))
        return self.base if candidate is None else self.cand


def test_induction_mines_the_frequent_toolpath_with_a_separating_precondition(home):
    lib = logged_library()
    assert lib.due(20)
    v = Validate(base=(1.0, 0.9), cand=(0.5, 0.9))  # cheaper at equal quality
    report = lib.induce(v, k=20, seed=1)
    by_tools = {p.subroutine.tools: p for p in report.proposed}
    color = by_tools[("loc_color", "hsv")]
    assert color.accepted and color.net == pytest.approx(-50.0) and color.d_quality_pct == 0.0
    (pre,) = color.subroutine.preconditions
    assert pre.feature == "target_area" and pre.op == "<" and 0.04 <= pre.value <= 0.08
    shape = by_tools[("loc_shape", "lab")]
    assert [(p.feature, p.op) for p in shape.subroutine.preconditions] == [("target_area", ">=")]
    # the A/B ran on held-out samples where the candidate's precondition holds, the same ones for both arms
    feats = {t.sample: t.features for t in lib.traces}
    color_asks = [s for tools, s in v.asked if tools == ("loc_color", "hsv")]
    assert len(color_asks) == 1 and (None, color_asks[0]) in v.asked
    assert 0 < len(color_asks[0]) <= 12 and all(pre.holds(feats[s]) for s in color_asks[0])
    # accepted → in the library, persisted, chosen where its precondition holds, not reproposed
    assert lib.best("recolor", {"target_area": 0.01}, 1.0).tools == ("loc_color", "hsv")
    again = Library(lib.path, tools=TOOLS)
    assert {s.tools for s in again.subroutines} == {a.subroutine.tools for a in report.accepted}
    assert again.subroutines[0].cost == pytest.approx(0.5) and not again.due(20)
    assert not lib.induce(v, k=20, seed=1, force=True).proposed


def test_induction_rejects_a_candidate_that_costs_quality(home):
    lib = logged_library()
    v = Validate(base=(1.0, 0.9), cand=(0.9, 0.6))  # 10% cheaper, 33% worse
    report = lib.induce(v, k=20, seed=1)
    assert report.proposed and not report.accepted and lib.subroutines == []
    r = report.rejected[0]
    assert r.d_cost_pct == pytest.approx(-10.0) and r.d_quality_pct == pytest.approx(-33.333, abs=1e-3)
    assert r.net == pytest.approx(23.333, abs=1e-3) and "rejected" in r.reason


def test_validations_are_cached_and_reused(home):
    lib = logged_library()
    v = Validate(base=(1.0, 0.9), cand=(0.9, 0.6))
    first = lib.induce(v, k=20, seed=1)
    asked = len(v.asked)
    assert asked == first.validations > 0 and first.cached_hits == 0
    reloaded = Library(lib.path, tools=TOOLS)  # the cache is in the file
    second = reloaded.induce(v, k=20, seed=1, force=True)
    assert len(v.asked) == asked  # validate was not called again
    assert second.validations == 0 and second.cached_hits == asked
    assert [x.to_dict() for x in second.rejected] == [x.to_dict() for x in first.rejected]


def test_a_toolpath_that_always_worked_gets_no_precondition(home):
    lib = Library(tools=TOOLS)
    for i in range(6):
        lib.record(Trace("recolor", {"target_area": 0.01 * i}, ("loc_color", "hsv"), 0.2, 0.9, True, "slow",
                         f"s{i}"), save=False)
    report = lib.induce(Validate(), k=5, seed=0, holdout=0.3)
    (p,) = report.proposed
    assert p.subroutine.preconditions == [] and p.accepted


def test_refining_an_existing_subroutine_replaces_it_when_it_wins(home):
    lib = logged_library()
    old = lib.add(sub("old", ["loc_color", "hsv"], cost=0.7, quality=0.8))
    report = lib.induce(Validate(base=(1.0, 0.9), cand=(0.5, 0.9)), k=20, seed=1)
    refined = next(a for a in report.accepted if a.subroutine.tools == ("loc_color", "hsv"))
    assert refined.replaces == "old" and refined.subroutine.preconditions
    assert lib.get(old.id) is None and [s.tools for s in lib.subroutines].count(("loc_color", "hsv")) == 1


def test_learn_preconditions_picks_the_separating_feature():
    pos = [{"a": x, "noise": n} for x, n in [(0.1, 0.9), (0.2, 0.1), (0.15, 0.5)]]
    neg = [{"a": x, "noise": n} for x, n in [(0.6, 0.8), (0.9, 0.2), (0.7, 0.45)]]
    assert learn_preconditions(pos, neg) == [Predicate("a", "<", 0.4)]
    assert learn_preconditions(pos, []) == []
    # two features needed: positives are small AND plain
    pos = [{"a": 0.1, "bg": "plain"}, {"a": 0.2, "bg": "plain"}]
    neg = [{"a": 0.1, "bg": "textured"}, {"a": 0.8, "bg": "plain"}, {"a": 0.9, "bg": "textured"}]
    got = learn_preconditions(pos, neg)
    assert len(got) == 2 and {p.feature for p in got} == {"a", "bg"}
    assert all(all(p.holds(f) for p in got) for f in pos) and not any(all(p.holds(f) for p in got) for f in neg)


def test_net_benefit_signs():
    assert net_benefit(0.5, 0.9, 1.0, 0.9) == (pytest.approx(-50.0), 0.0, pytest.approx(-50.0))
    assert net_benefit(1.0, 0.9, 0.0, 0.9)[2] == float("inf")  # any cost over a free baseline loses
    assert net_benefit(0.0, 0.5, 0.0, 0.0)[2] == float("-inf")  # quality where there was none wins


# ---- proposals from a policy -----------------------------------------------------------------------------------

def test_parse_proposal_accepts_a_fenced_json_answer():
    text = 'Here is my idea:\n```json\n{"kind": "recolor", "tools": ["loc_shape", "lab"],' \
           ' "preconditions": ["target_area >= 0.1"]}\n```'
    s = parse_proposal(text, TOOLS)
    assert s.kind == "recolor" and s.tools == ("loc_shape", "lab") and s.source == "policy"
    assert s.preconditions == [Predicate("target_area", ">=", 0.1)]
    assert parse_proposal('sure {"kind": "remove", "tools": ["loc_color", "telea"]} done', TOOLS).preconditions == []


@pytest.mark.parametrize("text,match", [
    ("no json here", "no JSON object"),
    ('{"kind": "recolor", "tools": ["loc_shape", "lab"]', "not valid JSON"),
    ('{"kind": "recolor", tools: []}', "not valid JSON"),
    ('["recolor"]', "no JSON object|expected a JSON object"),
    ('{"kind": "juggle", "tools": ["a"]}', "unknown kind 'juggle'"),
    ('{"kind": "recolor", "tools": ["loc_shape"]}', "one tool name per stage"),
    ('{"kind": "recolor", "tools": ["loc_shape", 3]}', "one tool name per stage"),
    ('{"kind": "recolor", "tools": ["loc_shape", "magic_wand"]}', "unknown tool 'magic_wand'"),
    ('{"kind": "recolor", "tools": ["hsv", "loc_shape"]}', "does not do stage 'locate'"),
    ('{"kind": "remove", "tools": ["loc_color", "hsv"]}', "does not do stage 'fill'"),
    ('{"kind": "recolor", "tools": ["loc_shape", "lab"], "preconditions": ["the object is small"]}',
     r"preconditions\[0\]"),
    ('{"kind": "recolor", "tools": ["loc_shape", "lab"], "preconditions": "area < 1"}', "must be a list"),
])
def test_parse_proposal_rejects_bad_answers(text, match):
    with pytest.raises(ProposalError, match=match):
        parse_proposal(text, TOOLS)


def test_a_policy_proposal_goes_through_the_same_ab(home):
    lib = logged_library()
    good = parse_proposal('{"kind": "recolor", "tools": ["loc_shape", "hsv"], "preconditions": []}', TOOLS)
    bad = Subroutine("bad", "recolor", ("loc_shape", "nope"), source="policy")
    report = lib.induce(Validate(base=(1.0, 0.9), cand=(0.5, 0.95)), k=20, seed=1, proposals=[good, bad],
                        min_support=100)  # nothing is frequent enough to mine: only the proposals count
    assert [p.subroutine.tools for p in report.proposed] == [("loc_shape", "hsv")]
    assert report.accepted[0].subroutine.source == "policy"
    assert any("unknown tool 'nope'" in r.reason for r in report.rejected)
    assert [s.tools for s in lib.subroutines] == [("loc_shape", "hsv")]
