"""WebArena-Verified's evaluator: the agent's JSON response, network events, expected values that are patterns,
and both scoring modes against the published package's releases."""

from __future__ import annotations

import json

import pytest
from webarena_helpers import LOCAL, cfg, needs_data, rec, sm

from toolpath.evals.benchmarks import BenchmarkDataError
from toolpath.evals.benchmarks import webarena_eval as we
from toolpath.evals.benchmarks.webarena import WebArena, WebArenaVerified
from toolpath.evals.scoring import score_answer

# ---- webarena-verified ------------------------------------------------------------------------------------

def ar(expected: dict, schema: dict | None = None, **extra) -> list:
    return [{"evaluator": "AgentResponseEvaluator", "results_schema": schema or {"type": "null"},
             "expected": expected, **extra}]


def test_verified_agent_response():
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [6]},
            {"type": "array", "items": {"type": "number"}})
    assert we.evaluate(ev, '{"task_type": "RETRIEVE", "status": "success", "retrieved_data": ["6"]}')["score"] == 1.0
    assert we.evaluate(ev, 'Done.\n```json\n{"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [6]}'
                           '\n```')["score"] == 1.0
    assert we.evaluate(ev, '{"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [7]}')["score"] == 0.0
    assert we.evaluate(ev, '{"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": [6]}')["score"] == 0.0
    assert we.evaluate(ev, "6")["score"] == 0.0  # not the JSON response the task asks for
    money = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [36.39, 2]},
               {"type": "array", "items": {"type": "number", "format": "currency"}})
    assert we.evaluate(money, '{"task_type": "RETRIEVE", "status": "SUCCESS", '
                              '"retrieved_data": ["$2.00", "$36.39"]}')["score"] == 1.0
    ordered = [{**money[0], "ordered": True}]
    assert we.evaluate(ordered, '{"task_type": "RETRIEVE", "status": "SUCCESS", '
                                '"retrieved_data": ["$2.00", "$36.39"]}')["score"] == 0.0
    alts = ar({"task_type": "retrieve", "status": "SUCCESS",
               "retrieved_data": [["bookshop.org", "https://bookshop.org"]]},
              {"type": "array", "items": {"type": "string"}})
    assert we.evaluate(alts, '{"task_type": "retrieve", "status": "SUCCESS", '
                             '"retrieved_data": ["https://bookshop.org"]}')["score"] == 1.0
    nf = ar({"task_type": "retrieve", "status": "NOT_FOUND_ERROR", "retrieved_data": None})
    assert we.evaluate(nf, '{"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR", '
                           '"retrieved_data": null}')["score"] == 1.0
    assert we.evaluate(nf, '{"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": null}')["score"] == 0.0
    obj = ar({"task_type": "retrieve", "status": "SUCCESS",
              "retrieved_data": [{"name": "Pittsburgh International Airport", "postcode": "15231"}]},
             {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                         "postcode": {"type": "string"}}}})
    good = ('{"task_type": "RETRIEVE", "status": "SUCCESS", '
            '"retrieved_data": [{"name": "pittsburgh  international airport", "postcode": "15231"}]}')
    assert we.evaluate(obj, good)["score"] == 1.0
    assert we.evaluate(obj, good.replace("15231", "15232"))["score"] == 0.0
    dur = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["1h 5min"]},
             {"type": "array", "items": {"type": "string", "format": "duration"}})
    assert we.evaluate(dur, '{"task_type": "RETRIEVE", "status": "SUCCESS", '
                            '"retrieved_data": ["65 minutes"]}')["score"] == 1.0


def _retrieved(*data) -> str:
    return json.dumps({"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": list(data)})


def test_verified_formats_month_integer_and_array_properties_are_scored_not_raised():
    month = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [{"month": "May", "count": 8},
                                                                               {"month": "September", "count": 10}]},
               {"type": "array", "items": {"type": "object", "properties": {
                   "month": {"type": "string", "format": "month"}, "count": {"type": "number"}}}})
    assert we.evaluate(month, _retrieved({"month": "Sept", "count": 10}, {"month": "05", "count": "8"}))["score"] == 1.0
    assert we.evaluate(month, _retrieved({"month": "June", "count": 8}, {"month": "Sep", "count": 10}))["score"] == 0.0
    assert we.evaluate(month, _retrieved({"month": "Smarch", "count": 8},
                                         {"month": "Sep", "count": 10}))["score"] == 0.0
    integer = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [{"relation_id": 2176999}]},
                 {"type": "array", "items": {"type": "object", "properties": {"relation_id": {"type": "integer"}}}})
    assert we.evaluate(integer, _retrieved({"relation_id": "2176999"}))["score"] == 1.0
    assert we.evaluate(integer, _retrieved({"relation_id": 2176998}))["score"] == 0.0
    names = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [{"hotel": "Hyatt",
                                                                               "shops": ["Giant Eagle", "ALDI"]}]},
               {"type": "array", "items": {"type": "object", "properties": {
                   "hotel": {"type": "string"}, "shops": {"type": "array", "items": {"type": "string"}}}}})
    assert we.evaluate(names, _retrieved({"hotel": "hyatt", "shops": ["aldi", "Giant  Eagle"]}))["score"] == 1.0
    assert we.evaluate(names, _retrieved({"hotel": "hyatt", "shops": ["aldi"]}))["score"] == 0.0
    assert we.evaluate(names, _retrieved({"hotel": "hyatt", "shops": "aldi"}))["score"] == 0.0


def test_verified_expected_value_the_scorer_cannot_read_scores_zero_with_the_reason():
    broken = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [{"shops": "not a list"}]},
                {"type": "array", "items": {"type": "object", "properties": {
                    "shops": {"type": "array", "items": {"type": "string"}}}}})
    r = we.evaluate(broken, _retrieved({"shops": ["aldi"]}))
    assert r["score"] == 0.0 and "expected value unreadable" in json.dumps(r)
    odd = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["Blue"]},
             {"type": "array", "items": {"type": "string", "format": "colour"}})  # a format we do not know
    assert we.evaluate(odd, _retrieved("blue"))["score"] == 1.0


def test_verified_network_events():
    nav = ar({"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}) + [
        {"evaluator": "NetworkEventEvaluator", "ignored_query_params_patterns": ["page", "sort"],
         "expected": {"url": ["http://g/dashboard/todos", "http://g/dashboard/todos?state=pending"]}}]
    ok = '{"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": null}'
    assert we.evaluate(nav, ok, {"url": "http://g/dashboard/todos?state=pending&sort=x"})["score"] == 1.0
    assert we.evaluate(nav, ok, {"url": "http://g/dashboard/todos?state=done"})["score"] == 0.0
    assert we.evaluate(nav, ok, {"url": "http://g/", "visited": ["http://g/dashboard/todos"]})["score"] == 1.0
    put = ar({"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}) + [
        {"evaluator": "NetworkEventEvaluator", "expected": {"url": "http://g/i/316.json", "http_method": "PUT",
                                                            "post_data": {"$.issue.assignee_ids": [2330]}}}]
    res = we.evaluate(put, ok.replace("NAVIGATE", "MUTATE"), {"url": "http://g/i/316"})
    assert res["score"] is None and "request log" in res["unscorable"]


# ---- webarena-verified: expected values that are regular expressions -----------------------------------------

def _verified_task(task_id: int) -> list:
    for r in WebArenaVerified(env=LOCAL).records():
        if r.data["config"]["task_id"] == task_id:
            return [c for c in r.data["config"]["eval"] if c["evaluator"] == "AgentResponseEvaluator"]
    raise LookupError(task_id)


@needs_data
@pytest.mark.parametrize("task_id, data, score", [
    (231, ["#170"], 1.0), (231, ["170"], 1.0), (231, ["# 000170"], 1.0), (231, ["#171"], 0.0), (231, ["#1700"], 0.0),
    (349, ["@yjlou"], 1.0), (349, ["YJLOU"], 1.0), (349, ["yjlou2"], 0.0),
    (358, ["Flat Rate - Fixed"], 1.0), (358, ["flat rate fixed"], 1.0), (358, ["Flat Rate - Per Item"], 0.0),
    (146, [{"width": "16 inches", "height": "24 inches"}], 1.0), (146, [{"width": "16in", "height": '24"'}], 1.0),
    (146, [{"width": "24 inches", "height": "16 inches"}], 0.0),
    (361, [{"order_number": "#189", "status": "pending"}, {"order_number": "000170", "status": "Canceled"}], 1.0),
    (361, [{"order_number": "#189", "status": "canceled"}, {"order_number": "170", "status": "pending"}], 0.0),
])
def test_verified_expected_patterns_are_matched_not_compared_as_text(task_id, data, score):
    answer = json.dumps({"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": data})
    for mode in ("toolpath", "official"):
        assert we.evaluate(_verified_task(task_id), answer, scoring=mode)["score"] == score, mode


def test_verified_a_pattern_in_the_answer_is_text_in_toolpath_mode():
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["yjlou"]},
            {"type": "array", "items": {"type": "string"}})
    assert we.evaluate(ev, _retrieved("^.*$"))["score"] == 0.0


def test_official_verified_reads_no_json_in_prose():
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [6]},
            {"type": "array", "items": {"type": "number"}})
    prose = 'Done. {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [6]}'
    assert we.evaluate(ev, prose)["score"] == 1.0
    for release in ("1.0.0", "1.2.3"):
        assert we.evaluate(ev, prose, scoring="official", release=release)["score"] == 0.0
        for junk in (None, "", "{", "[1, 2]", '{"status": null}', {"task_type": 3}):
            assert we.evaluate(ev, junk, scoring="official", release=release)["score"] == 0.0


_MUTATE = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
_NAVIGATE = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
_NOT_FOUND = {"task_type": "retrieve", "status": "NOT_FOUND_ERROR", "retrieved_data": None}
_STRINGS = {"type": "array", "items": {"type": "string"}}


# (expected, answer, 1.0.0's score, 1.2.3's score): each scored by the published package of that release
@pytest.mark.parametrize("expected,answer,v100,v123", [
    # an answer without retrieved_data for a MUTATE / NAVIGATE task: 1.0.0 leaves the key out and fails it
    (_MUTATE, {"task_type": "MUTATE", "status": "SUCCESS"}, 0.0, 1.0),
    (_NAVIGATE, '{"task_type": "NAVIGATE", "status": "SUCCESS"}', 0.0, 1.0),
    (_MUTATE, {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}, 1.0, 1.0),
    (_MUTATE, {"task_type": "MUTATE", "status": "NOT_FOUND_ERROR"}, 0.0, 0.0),
    # a RETRIEVE task whose expected status is an error: 1.0.0 raises on every answer
    (_NOT_FOUND, {"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR", "retrieved_data": None}, 0.0, 1.0),
    (_NOT_FOUND, {"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR"}, 0.0, 1.0),
    (_NOT_FOUND, {"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR", "retrieved_data": []}, 0.0, 1.0),
    (_NOT_FOUND, {"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR", "retrieved_data": ["x"]}, 0.0, 0.0),
    (_NOT_FOUND, {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": None}, 0.0, 0.0),
    # retrieved_data expected but missing, or left out of the task's expected value: no release passes it
    ({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["x"]},
     {"task_type": "RETRIEVE", "status": "SUCCESS"}, 0.0, 0.0),
    ({"task_type": "mutate", "status": "SUCCESS"}, {"task_type": "MUTATE", "status": "SUCCESS"}, 0.0, 0.0),
])
def test_official_verified_scores_as_each_release(expected, answer, v100, v123):
    ev = ar(expected, _STRINGS if expected["task_type"] == "retrieve" else None)
    old, new = (we.evaluate(ev, answer, scoring="official", release=r) for r in ("1.0.0", "1.2.3"))
    assert (old["score"], new["score"]) == (v100, v123)
    assert [e["release"] for e in (old, new) for e in e["evaluators"]] == ["1.0.0", "1.2.3"]
    assert we.evaluate(ev, answer, scoring="official")["score"] == v123  # the current release by default


def test_the_benchmark_scores_as_the_release_it_is_given_and_says_which(monkeypatch):
    r = rec({**cfg(ar(_NOT_FOUND, _STRINGS)), "start_urls": ["__SHOPPING__"]})
    answer = '{"task_type": "RETRIEVE", "status": "NOT_FOUND_ERROR", "retrieved_data": null}'
    current, old = WebArenaVerified(env=LOCAL), WebArenaVerified(env=LOCAL, release="1.0.0")
    for bench, official in ((current, 1.0), (old, 0.0)):
        got = score_answer(bench, r, answer)
        assert got.scores == {"toolpath": 1.0, "official": official}
        assert got.metrics == {f"scorer:webarena-verified {bench.release}": 1.0}  # stored with the sample
        assert bench.scored_as("official").to_task(r, model="scripted:x").evaluator.options["release"] == bench.release
    monkeypatch.setenv("TOOLPATH_WEBARENA_VERIFIED_RELEASE", "1.0.0")
    assert WebArenaVerified(env=LOCAL).release == "1.0.0"
    monkeypatch.setenv("TOOLPATH_WEBARENA_VERIFIED_RELEASE", "1.1")
    with pytest.raises(BenchmarkDataError, match=r"TOOLPATH_WEBARENA_VERIFIED_RELEASE: .* one of 1.0.0, 1.2.3, "
                                                  r"got '1.1'"):
        WebArenaVerified(env=LOCAL)
    with pytest.raises(BenchmarkDataError, match=r"release=: .* got '2'"):
        WebArenaVerified(env=LOCAL, release="2")
    assert WebArena(env=LOCAL).score(rec(cfg(sm({"must_include": ["3"]}))), "3").metrics == {}  # no release there


def _one_value(fmt: str, want, got) -> tuple[float, float]:
    """(toolpath, official) for a RETRIEVE task whose one expected value has format `fmt`."""
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [want]},
            {"type": "array", "items": {"type": "string", "format": fmt}})
    got = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [got]}
    return we.evaluate(ev, got)["score"], we.evaluate(ev, got, scoring="official")["score"]


@pytest.mark.parametrize("fmt,want,got,official", [
    ("duration", "7min", "7min.", 0.0),  # pytimeparse2 reads no trailing full stop (toolpath: 1)
    ("duration", "7min", "7 minutes", 1.0),
    ("duration", "7min", "10 min", 1.0),  # within max(3 minutes, 10 %)
    ("duration", "7min", "11 min", 0.0),
    ("duration", "1hr 35min", "1:35 hours", 1.0),
    ("distance", "748m", '"748m"', 0.0),  # pint reads no quotes (toolpath: 1)
    ("distance", "748m", "0.46 mi", 1.0),  # within max(10 m, 2 %)
    ("distance", "914km", "914k", 1.0),
    ("distance", "748m", "748", 0.0),  # a distance needs a unit
    ("distance", "748m", "2**99999 km", 0.0),  # a power too large is refused, not evaluated
    ("coordinates", {"latitude": "40.4424191", "longitude": "-79.9397388"}, "40.4424191, -79.9397388", 1.0),
    ("coordinates", {"latitude": "40.4424191", "longitude": "-79.9397388"}, {"lat": 40.4424, "lng": -79.9397}, 0.0),
    ("location-name", "El Gallo de Oro", "El Gallo de Oro.", 1.0),  # token-sort ratio 100
    ("location-name", "Carnegie Mellon University", "Carnegie Mellon Univ", 1.0),  # ratio 87
    ("location-name", "Carnegie Mellon University", "CMU", 0.0),
    ("url", "git@__SSH_HOST__:a/PyTorch-GAN.git", "ssh://git@localhost:2222/a/PyTorch-GAN.git", 1.0),
    ("url", "git@__SSH_HOST__:a/PyTorch-GAN.git", "git@__SSH_HOST__:a/PyTorch GAN.git", 0.0),
    ("url", "git@__SSH_HOST__:a/PyTorch-GAN.git", "http://localhost:8023/a/PyTorch-GAN.git", 0.0),
    ("string", "Strasse", "Straße", 1.0), ("string", "Macy's", "Macy’s", 1.0), ("string", "Moskva", "Москва", 1.0),
    ("currency", "36.39", "36,39 €", 1.0), ("number", "105", "one hundred and five", 1.0),
    ("null", None, "n / a", 1.0), ("date", "March 2, 2022", 20220302, 0.0),
])
def test_official_verified_reads_values_as_the_package(fmt, want, got, official):
    assert _one_value(fmt, want, got)[1] == official


def test_official_verified_location_names_use_token_sort_ratio():
    from toolpath.evals.benchmarks.webarena_verified_values import token_sort_ratio

    assert token_sort_ratio("Apple Store Shadyside", "Shadyside Apple-Store!") == 100
    assert token_sort_ratio("a_b", "a b") == 100  # "_" is not a letter or digit for rapidfuzz's default_process
    assert token_sort_ratio("...", "!!") == 100 and token_sort_ratio("a", "...") == 0
    assert token_sort_ratio("Carnegie Mellon University", "Carnegie Mellon Univ") == 87
    assert token_sort_ratio("x" * 5000, "x" * 5000 + "y") == 100  # long replies stay quick


def test_official_verified_never_raises_on_odd_values():
    for fmt in ("duration", "distance", "coordinates", "location-name", "url", "null", "currency", "number"):
        for got in (None, "", [], {}, [1], [1, 2, 3], {"a": None}, True, 1e308, float("nan"), "x" * 10000, "^[$"):
            assert _one_value(fmt, "1", got)[1] in (0.0, 1.0)


# ---- toolpath mode accepts what the package accepts and a grader would; stricter only where a grader is ----------

@pytest.mark.parametrize("fmt,want,got", [
    ("location-name", "El Gallo de Oro", "El Gallo de Oro."), ("location-name", "El Gallo de Oro", '"El Gallo de Oro"'),
    ("location-name", "Carnegie Mellon University", "Carnegie Mellon Univ"),
    ("location-name", "El Gallo de Oro", "El_Gallo_de_Oro"),
    ("string", "Macy's", "Macy’s"), ("string", "Macy’s", "Macy's"), ("string", "a ss b", "a ß b"),
    ("string", "Cafe", "Café"), ("string", "Łódź", "Lodz"), ("string", "Sprite", "Sprite."),
    ("string", "Sprite", '"Sprite"'), ("string", "WH11-S-Blue", "WH11 S Blue"),
    ("string", "Quest Lumaflex™ Band", "Quest Lumaflex Band"), ("string", "5 €", "5 EUR"),
    ("number", 105, "one hundred and five"), ("number", 6, "Six"), ("number", 6, "$6.00"),
    ("currency", 36.39, "36,39 €"), ("currency", 36.39, "€36,39"), ("currency", 36.39, "Total: $36.39"),
    ("currency", 36.39, "36.39 dollars"),
    ("url", "git@__SSH_HOST__:a/PyTorch-GAN.git", "ssh://git@localhost:2222/a/PyTorch-GAN.git"),
    ("url", "git@__SSH_HOST__:a/PyTorch-GAN.git", "git@localhost:a/PyTorch-GAN.git"),
    ("duration", "7min", "00:07:00"), ("duration", "7min", "7-min"), ("duration", "5h 47min", "5:47 hours"),
    ("duration", "5h 47min", "5.8 hours"), ("duration", "7min", "7min."),
    ("distance", "748m", "818 yards"), ("distance", "748m", "0.46 mi"), ("distance", "914km", "914k"),
    ("distance", "748m", "74800 cm"),
    ("date", "March 2, 2022", "March 2,2022"), ("date", "March 2, 2022", "Wed, March 2, 2022"),
    ("date", "March 2, 2022", "2022/03/02"), ("month", "March", "2023-03"), ("month", "March", "03/2023"),
    ("null", None, "N/A"), ("null", None, "none"), ("null", None, ""),
    ("coordinates", {"latitude": "40.4424191", "longitude": "-79.9397388"}, "40.4424191 -79.9397388"),
    ("coordinates", {"latitude": "40.4424191", "longitude": "-79.9397388"},
     {"Latitude": 40.4424191, "Longitude": -79.9397388}),
])
def test_toolpath_verified_accepts_what_a_grader_accepts(fmt, want, got):
    toolpath, official = _one_value(fmt, want, got)
    assert toolpath == 1.0, (fmt, want, got)
    assert official in (0.0, 1.0)


@pytest.mark.parametrize("fmt,want,got,official", [
    ("string", "a £ b", "a PS b", 1.0), ("string", "a ° b", "a deg b", 1.0), ("string", "a ★ b", "a  b", 1.0),
    ("duration", "7min", "10 min", 1.0), ("duration", "5h 47min", "5h 20min", 1.0),
    ("duration", "7min", "7–8 min", 0.0),
    ("currency", 36.39, "$36.49", 1.0), ("currency", 36.39, "$-36.39", 1.0), ("currency", 36.39, "36,390", 1.0),
    ("url", "git@__SSH_HOST__:a/b.git", "^git@.*$", 1.0), ("string", "Sprite", "^.*$", 1.0),
    ("location-name", "Carnegie Mellon University", "CMU", 0.0), ("number", 6, "6 and 7", 0.0),
])
def test_toolpath_verified_rejects_what_a_grader_rejects(fmt, want, got, official):
    assert _one_value(fmt, want, got) == (0.0, official)


def test_toolpath_verified_several_values_in_one_item_are_not_alternatives():
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["#170"]},
            {"type": "array", "items": {"type": "string"}})
    both = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [["#170", "#189"]]}
    assert we.evaluate(ev, both)["score"] == 0.0 and we.evaluate(ev, both, scoring="official")["score"] == 1.0


def test_toolpath_verified_expected_pattern_matches_the_text_with_or_without_end_punctuation():
    ev = ar({"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["^#?\\s*0*170$"]},
            {"type": "array", "items": {"type": "string"}})
    got = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["#170."]}
    assert we.evaluate(ev, got)["score"] == 1.0 and we.evaluate(ev, got, scoring="official")["score"] == 0.0


def test_toolpath_verified_never_raises_on_odd_values():
    for fmt in ("duration", "distance", "coordinates", "location-name", "url", "null", "currency", "number",
                "date", "month", "string"):
        for got in (None, "", [], {}, [1], True, 1e308, float("nan"), "x" * 10000, "^[$", "2**99999 km", "1:2:3:4",
                    {"la": "x"}, "٣", "7–8 min"):
            assert _one_value(fmt, "1", got)[0] in (0.0, 1.0)
