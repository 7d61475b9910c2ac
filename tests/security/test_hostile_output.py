"""Hostile model output: each reply that once crashed a parser, hung it, or ended the run must become an issue
the model is told about (or a cleaned value), and the run goes on. The inputs are the ones an adversarial
probe found; tests/security/test_fuzz_grammars.py generates ten thousand more per grammar."""

from __future__ import annotations

import json
import time
import warnings
from collections import OrderedDict

import pytest

from toolpath.agents.episode import run_episode
from toolpath.policies.formats import FORMATS, MAX_BLOCK_CHARS, MAX_CALLS, MAX_ISSUES, MAX_REPLY_CHARS, parse_tool_calls
from toolpath.policies.formats.fsd import MAX_BLOCKS, MAX_ITEMS, parse_fsd
from toolpath.policies.formats.scalecua import ScaleCUAFormat
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import parse_spec
from toolpath.state import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENT_ITEMS,
    Message,
    NotPlainJSON,
    ToolCall,
    plain_json,
)
from toolpath.tools.gui import PLATFORMS
from toolpath.tools.registry import load_tools

DE = FORMATS["deepeyes"]
SC = ScaleCUAFormat(mode="direct", schemas=[load_tools()[n].schema() for n in PLATFORMS["web"]])


def call(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---- values that are not JSON data ------------------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    ("<tool_call>" + "[" * 100_000, "nested too deeply"),
    (call('{"name": "calculator", "arguments": {"expression": %s}}'  # noqa: UP031 - JSON braces
          % nested(MAX_ARGUMENT_DEPTH + 5)),
     f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"),
    (call('{"name": "calculator", "arguments": {"expression": NaN}}'), "not a finite number"),
    (call('{"name": "calculator", "arguments": {"expression": -Infinity}}'), "not a finite number"),
    (call('{"name": "calculator", "arguments": {"expression": 1e999}}'), "not a finite number"),
    (call('{"name": "calculator", "arguments": {"expression": %s}}' % ("9" * 5000)), "unreadable number"),
    (call("{'name': 'calculator', 'arguments': {'expression': 1+2j}}"), "a complex number (1+2j) is not JSON"),
    (call("{'name': 'calculator', 'arguments': {'expression': b'2+3'}}"), "bytes b'2+3' is not JSON"),
    (call("{'name': 'calculator', 'arguments': {'expression': {'2', '3'}}}"), "a set"),
    (call("{'name': 'calculator', 'arguments': {'expression': %d}}" % 2**70),  # noqa: UP031 - JSON braces
     "does not fit in 64 bits"),
    (call('{"name": "%s", "arguments": {}}' % ("x" * 1000)), "longer than 200 characters"),
])
def test_json_calls_that_are_not_plain_data_are_issues(reply, expected):
    for parsed in (parse_tool_calls(reply), DE.parse(reply)):
        assert parsed.calls == [] and len(parsed.issues) == 1, parsed.issues
        assert expected in parsed.issues[0], parsed.issues[0]


@pytest.mark.parametrize("line, expected", [
    ("click(x=" + "-" * 100_000 + "1)", "nested too deeply"),
    ("click(x=1+2j, y=5)", "arguments.x: a complex number (1+2j)"),
    ("write(message=b'secret')", "arguments.message: bytes b'secret'"),
    ("hotkey({'ctrl', 'c'})", "arguments.keys[0]: a set"),
    ("click(x=1e999, y=5)", "arguments.x: inf is not a finite number"),
    ("click(x=..., y=5)", "an ellipsis"),
    ("scroll(clicks={1: 2})", "the key 1 is an integer; object keys must be strings"),
    ("click(x=" + "[" * 40 + "]" * 40 + ", y=1)", f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"),
    ("pyautogui" + ".a" * 50_000 + "(x=1)", "nested too deeply"),
])
def test_scalecua_lines_that_are_not_plain_data_are_issues_and_the_others_run(line, expected):
    parsed = SC.parse(f"<operation>go</operation><action>{line}\nwrite(message='ok')</action>")
    assert [(c.name, c.arguments) for c in parsed.calls] == [("write", {"message": "ok"})]
    assert len(parsed.issues) == 1 and "action line 1" in parsed.issues[0]
    assert expected in parsed.issues[0], parsed.issues[0]


def test_fsd_values_off_the_grid_or_not_numbers_are_issues():
    a = parse_fsd("<answer><point>[[nan, 10]]</point><point>[[1e999, 10]]</point><box>[[1, 2, 9" + "9" * 4000
                  + ", 40]]</box></answer>")
    assert a.points == [] and a.boxes == [] and len(a.issues) == 3


# ---- lone surrogates ----------------------------------------------------------------------------------------

def test_lone_surrogates_become_the_replacement_character():
    p = parse_tool_calls("Let me \ud800 see " + call('{"name": "calculator", "arguments": {"expression": "1\\ud800"}}'))
    assert p.content == "Let me \ufffd see" and p.calls[0].arguments == {"expression": "1\ufffd"} and not p.issues
    pair = parse_tool_calls(call('{"name": "calculator", "arguments": {"expression": "\\ud83d\\ude00"}}'))
    assert pair.calls[0].arguments == {"expression": "😀"}
    assert DE.parse("<think>\udfff</think><answer>\ud800 5</answer>").answer == "\ufffd 5"
    sc = SC.parse("<operation>type \ud800</operation>"
                  "<action>write(message='a\ud800')\nwrite(message='\\udc00')</action>")
    assert sc.content == "type \ufffd" and [c.arguments["message"] for c in sc.calls] == ["a\ufffd", "\ufffd"]
    fsd = parse_fsd("<answer><ref>cube\ud800</ref><pred>cube\ud800, left of, plate</pred></answer>")
    assert fsd.refs == ["cube\ufffd"] and fsd.relations == [("cube\ufffd", "left of", "plate")]
    for text in (p.content, sc.content, fsd.answer, json.dumps(p.calls[0].model_dump(), ensure_ascii=False)):
        text.encode("utf-8")  # what the store and the checkpoint write


# ---- ToolCall itself ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (1 + 2j, "a complex number"), (b"x", "bytes"), ({"a"}, "a set"), (frozenset(), "a set"),
    (float("nan"), "not a finite number"), (float("inf"), "not a finite number"), (..., "an ellipsis"),
    (2**63, "does not fit in 64 bits"), (object(), "a value of type object"), ({1: "a"}, "object keys must be strings"),
    (json.loads(nested(MAX_ARGUMENT_DEPTH + 1)), "nested more than"),
    (list(range(MAX_ARGUMENT_ITEMS)), "too many values"), ("x" * (MAX_ARGUMENT_CHARS + 1), "too much text"),
])
def test_a_tool_call_admits_only_plain_json_data(value, expected):
    with pytest.raises(NotPlainJSON, match=expected):
        plain_json({"v": value})
    with pytest.raises(ValueError, match=expected):  # pydantic's ValidationError is a ValueError
        ToolCall(id="c1", name="t", arguments={"v": value})


def test_a_tool_call_cleans_what_json_can_carry():
    c = ToolCall(id="c1", name="t\ud800", arguments=OrderedDict(
        at=(1, 2), ok=True, none=None, n=-2**63, f=0.5, s="\udc00", deep=json.loads(nested(MAX_ARGUMENT_DEPTH - 1))))
    assert c.name == "t\ufffd" and c.arguments["at"] == [1, 2] and c.arguments["s"] == "\ufffd"
    assert type(c.arguments) is dict and c.arguments["ok"] is True
    json.dumps(c.model_dump(), allow_nan=False).encode("utf-8")
    assert ToolCall.model_validate(c.model_dump()) == c  # what the tool node reads back from the checkpoint
    assert Message(role="assistant", content="a\ud800").content == "a\ufffd"


# ---- linear and bounded ---------------------------------------------------------------------------------

# Each of these took the old parsers from 31 s to over 120 s; a linear parser reads them in well under a second.
# The bound is CPU time of this thread (other processes on the machine do not count) and generous on purpose.
BOUND = 10.0
POINTS = "<point>[" + ", ".join(["[1, 2]"] * 1_000_000) + "]</point>"


@pytest.mark.parametrize("name, read, text, expected", [
    ("1 MB of {", parse_tool_calls, "{" * 2**20, f"only the first {MAX_REPLY_CHARS:,} were read"),
    ("<tool_call> x 90k", parse_tool_calls, "<tool_call>" * 90_000, f"only the first {MAX_CALLS} were read"),
    ('{" x 500k', parse_tool_calls, '{"' * 500_000, "start no valid JSON object"),
    ("``` then spaces", parse_tool_calls, "```" + " " * 500_000, None),
    ("<code> x 160k", DE.parse, "<code>" * 160_000, "found 160,000 actions"),
    ("<tool_call> x 90k (DeepEyesV2)", DE.parse, "<tool_call>" * 90_000, "found 90,000 actions"),
    ("<answer>x</answer> x 55k", DE.parse, "<answer>x</answer>" * 55_000, "found 55,000 actions"),
    ("<think> x 140k", DE.parse, "<think>" * 140_000, "no action"),
    ("<point> x 100k", parse_fsd, "<point>" * 100_000, f"only the first {MAX_BLOCKS} were read"),
    ("a trace of 10^6 points", parse_fsd, POINTS, "characters long"),
    ("'<' then spaces (FSD)", parse_fsd, "<" + " " * 100_000 + "x", None),
    ("9 x 100k then x (FSD)", parse_fsd, "<point>[[" + "9" * 100_000 + "x, 1]]</point>", "characters long"),
    ("2,000 action lines", SC.parse, "<action>" + "moveTo(x=1, y=2)\n" * 2000, "the other 1,950 were not run"),
    ("one huge action line", SC.parse, "<action>write(message='" + "x" * 300_000 + "')", "only its first"),
])
def test_hostile_sizes_are_read_in_linear_time_and_the_excess_reported(name, read, text, expected):
    started = time.thread_time()
    result = read(text)
    spent = time.thread_time() - started
    assert spent < BOUND, f"{name}: {spent:.1f} s of CPU"
    assert len(result.issues) <= MAX_ISSUES + 1
    if expected is not None:
        assert any(expected in i for i in result.issues), (name, result.issues[:3])


def test_calls_past_the_limit_are_reported_not_dropped():
    many = "".join(call('{"name": "calculator", "arguments": {"expression": "%d"}}' % i)  # noqa: UP031 - JSON braces
                   for i in range(MAX_CALLS + 7))
    p = parse_tool_calls(many)
    assert len(p.calls) == MAX_CALLS and p.calls[-1].arguments == {"expression": str(MAX_CALLS - 1)}
    assert p.issues == [f"your reply has {MAX_CALLS + 7} tool calls; only the first {MAX_CALLS} were read and the "
                        "other 7 were not run"]
    sc = SC.parse("<action>" + "".join(f"click(x={i}, y=1)\n" for i in range(MAX_CALLS + 2)) + "</action>")
    assert len(sc.calls) == MAX_CALLS and "the other 2 were not run" in sc.issues[0]
    big = parse_tool_calls(call('{"name": "a", "arguments": {"s": "%s"}}' % ("x" * MAX_BLOCK_CHARS)))
    assert big.calls == [] and "at most 200,000 are read" in big.issues[0]
    trace = parse_fsd("<answer><point>" + str([[1, 2]] * (MAX_ITEMS + 1)) + "</point></answer>")
    assert trace.points == [] and f"{MAX_ITEMS + 1} items (at most {MAX_ITEMS} are read)" in trace.issues[0]


def test_issues_are_listed_up_to_a_limit_and_the_rest_counted():
    p = parse_tool_calls("<tool_call>oops" * 45)
    assert len(p.issues) == MAX_ISSUES + 1 and p.issues[-1].startswith("... and 25 more problems")


def test_parsers_keep_pythons_warnings_about_model_text_quiet():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SC.parse("<action>click(x=1_000x, y=2)\nwrite(message='\\p \\\x1b[2J')</action>")
        parse_tool_calls(call("{'name': 'a', 'arguments': {'s': '\\q'}}"))
    assert [str(w.message) for w in caught] == []


# ---- a real run goes on ---------------------------------------------------------------------------------------

HOSTILE_JSON = [
    "<tool_call>" + "[" * 100_000,
    call('{"name": "calculator", "arguments": {"expression": NaN}}'),
    call("{'name': 'calculator', 'arguments': {'expression': 1+2j}}"),
    call("{'name': 'calculator', 'arguments': {'expression': b'1'}}"),
    call("{'name': 'calculator', 'arguments': {'expression': {'ctrl', 'c'}}}"),
    call('{"name": "calculator", "arguments": {"expression": %s}}' % ("9" * 5000)),
    call('{"name": "calculator", "arguments": {"expression": "2+3\\ud800"}}'),
    "<tool_call>" * 90_000,
    "It is 5 \ud800",
]


def _steps_are_strict_json(store, run_id) -> list[dict]:
    steps = store.steps(run_id)
    for step in steps:  # the viewer parses these with JSON.parse: no NaN, no lone surrogate
        json.dumps(step["payload"], allow_nan=False, ensure_ascii=False).encode("utf-8")
    return steps


def test_hostile_replies_do_not_end_a_react_run(store):
    spec = parse_spec({"id": "hostile", "instruction": "What is 2+3?", "model": "scripted:none.yaml"})
    r = run_episode(spec, store, policy=ScriptedPolicy(HOSTILE_JSON))
    assert (r.status, r.answer, r.steps) == ("finished", "It is 5 \ufffd", len(HOSTILE_JSON)), r.error
    told = [m["content"] for s in _steps_are_strict_json(store, r.run_id) if s["node"] == "policy"
            for m in s["payload"]["messages"] if m["role"] == "user"]
    for expected in ("nested too deeply", "not a finite number", "complex number", "bytes", "a set",
                     "unreadable number", f"only the first {MAX_CALLS} were read"):
        assert any(expected in t for t in told), expected


def test_hostile_replies_do_not_end_a_deepeyes_run(store):
    spec = parse_spec({"id": "hostile", "instruction": "What is 2+3?", "model": "scripted:none.yaml",
                       "agent": {"name": "react", "params": {"format": "deepeyes"}}})
    script = ["<think>a</think>" + reply for reply in HOSTILE_JSON[:-1]] + [
        "<code>" * 160_000, "<answer>x</answer>" * 55_000, "<think>\ud800</think><answer>5 \ud800</answer>"]
    r = run_episode(spec.model_copy(update={"limits": spec.limits.model_copy(update={"max_steps": 20})}), store,
                    policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "5 \ufffd"), r.error
    _steps_are_strict_json(store, r.run_id)
