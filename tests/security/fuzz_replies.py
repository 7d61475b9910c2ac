"""Generated model replies for the response grammars (JSON, native tool formats, DeepEyesV2, ScaleCUA, FSD), and what
a parser must do with each: the corpus of tests/security/test_fuzz_grammars.py and benchmarks/fuzz_grammars.py.

`replies(grammar, n, seed)` yields n (text, must_report) pairs from a fixed seed. Most replies are valid ones
that have been cut, spliced, repeated or had hostile fragments put in (tags, quotes, brackets, escapes, huge
numbers, unicode, control characters, lone surrogates, NaN). A fixed share put a value that is not plain JSON
into a call's argument: those are `must_report` (their parse must give an issue). A few are large (tens to
hundreds of thousands of characters) so that a parser that is not linear shows it.

`violations(grammar, text, result)` lists what the parse of `text` got wrong:
- a call that is not plain JSON (json.dumps with allow_nan=False and UTF-8 encoding must work), or any text
  in the result that cannot be written as UTF-8;
- a call, tag or block silently dropped: in the JSON grammar and the native reader each <tool_call> gives a
  call or an issue; in
  ScaleCUA each statement of the <action> block gives a call or an issue; in FSD each <point>, <ref> and
  <pred> gives a value or an issue; in DeepEyesV2 a reply is exactly one action, one answer or has issues;
- a reply with no action tag at all, or with a closing tag before any opening one, that yields no issue.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any

from toolpath.policies.formats import CLOSE, FORMATS, MAX_CALLS, MAX_ISSUES, MAX_REPLY_CHARS, OPEN
from toolpath.policies.formats.fsd import FSDAnswer, parse_fsd
from toolpath.policies.formats.native import NATIVE
from toolpath.policies.formats.scalecua import ScaleCUAFormat, _block, split_calls
from toolpath.state import MAX_ARGUMENT_DEPTH

GRAMMARS = ("json", "native", "deepeyes", "scalecua", "fsd")

VALID: dict[str, list[str]] = {
    "json": [
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 3"}}</tool_call>',
        'Let me compute.\n<tool_call>{"name": "calculator", "arguments": {"expression": "12 * 7"}}</tool_call>',
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>\n'
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2*2"}}</tool_call>',
        '<tool_call>{"name": "final_answer", "arguments": {"answer": "5"}}</tool_call>',
        "<tool_call>{'name': 'calculator', 'arguments': {'expression': '3*3'}}</tool_call>",
        '<tool_call>{"name": "search", "arguments": {"query": "x", "filters": {"year": [2020, 2021], '
        '"exact": true, "lang": null, "score": 0.5}}}</tool_call>',
        'Sure:\n```json\n{"name": "calculator", "arguments": {"expression": "4/2"}}\n```',
        'I will call {"name": "calculator", "arguments": {"expression": "1"}} now',
        "The answer is 5.",
        "Die Antwort ist 5 — fünf. 答案是五。",
    ],
    "native": [  # the families a model's own template teaches (formats/native.py)
        '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>',
        '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}',
        '<|python_tag|>{"name": "search", "parameters": {"query": "x"}}; {"name": "f", "parameters": {"n": [1, 2]}}',
        '{"name": "calculator", "parameters": {"expression": "2 + 3"}}',
        '```json\n[{"name": "a", "arguments": {"x": "1"}}, {"name": "b", "arguments": {"y": null}}]\n```',
        '[{"name": "calculator", "arguments": {"expression": "4/2"}}]',
        'Sure:\n```json\n{"name": "calculator", "arguments": {"expression": "4/2"}}\n```\nDone.',
        "The area is 25 square units.",
    ],
    "deepeyes": [
        "<think>I need the size.</think>\n<code>\n```python\nprint(image_1.size)\n```\n</code>",
        "<think>t</think><code>```python\nx = 1\nx + 1\n```",
        '<think>search it</think><tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>',
        "<think>The bar is 137 px.</think>\n<answer> 137 </answer>",
        "<code>print(1)</code>",
        "<think>ok</think><answer>yes</answer>",
        '<think>crop</think>\n<tool_call>{"name": "crop", "arguments": {"box": [1, 2, 30, 40]}}',
    ],
    "scalecua": [
        "<operation>Click Save</operation>\n<action>click(x=512, y=300)</action>",
        "<think>The form is empty.</think>\n<operation>Fill in the name</operation>\n"
        "<action>\nclick(100, 200)\nwrite(message=\"O'Brien, (Jr.)\")\nhotkey('ctrl', 's')\n</action>",
        "<operation>scroll</operation><action>scroll(clicks=-3)",
        "<action>swipe(from_coord=[1, 2],\n      to_coord=[3, 4])\nwrite(message='a) (b [c')</action>",
        "<operation>done</operation><action>terminate(status=\"success\")</action>",
        "<action>pyautogui.click(x=0.2, y=0.4)</action>",
    ],
    "fsd": [
        "<think>The cube is left of the plate.</think><answer><ref>red cube</ref><box>[[100, 200, 180, 260]]</box>"
        "<ref>blue plate</ref><box>[[400, 300, 600, 420]]</box><pred>red cube, left of, blue plate</pred></answer>",
        "<answer><point>[[100, 200], [150, 180], [200, 160], [250, 150], [300, 150], [350, 160], [400, 180], "
        "[450, 200]]</point></answer>",
        "<answer><box>[[10, 20, 30, 40]]</box></answer>",
        "<answer><point>[[500, 500], [510, 505], (520, 510)]</point></answer>",
        "<Answer><ref>nothing</ref></Answer>",
        "<think>reasoning</think> <answer><pred>left of</pred><box>[[1, 2, 3, 4]]</box><box>[[5, 6, 7, 8]]</box>"
        "</answer>",
    ],
}

# Pieces of text that break grammars: every grammar's tags, quotes, brackets, escapes, numbers, unicode.
FRAGMENTS: list[str] = [
    OPEN, CLOSE, "<code>", "</code>", "<answer>", "</answer>", "<think>", "</think>", "<TOOL_CALL>", "</Code>",
    "<|python_tag|>", "<action>", "</action>", "<operation>", "</operation>", "<point>", "</point>", "<box>", "</box>",
    "<ref>", "</ref>", "<pred>", "</pred>", "< point >", "< / box >", "<Answer>", "<", ">", "</", "```", "```json\n",
    "```python\n", '"', "'", '"""', "'''", "\\", '\\"', "\\u", "\\ud800", "\\udc00\\ud800", "{", "}", "[", "]",
    "(", ")", "{{", "}}", "[[", "]]", ",", ":", ";", "#", "=", "**", '"name"', '"arguments"', '"name": ', "NaN",
    "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000, "1" * 400, "0x1F", "1_000", "1+2j", "b'x'",
    "{'ctrl', 'c'}", "...", "None", "True", "null", "true", "lambda: 0", "__import__('os')", "\x00", "\x1b[2J",
    "\x1b]0;TITLE\x07", "\r", "\n", "\n\n\n", "\t", " " * 200, "\u200f", "\u202e", "\ufeff", "İ", "\u212a",
    "ſ", "e\u0301", "😀", "\ud83d\ude00", "\ud800", "\udfff", "＜tool_call＞", "ｃｌｉｃｋ", "-" * 300,
    "[" * 40, "{" * 40, "(" * 40, "[" * 1200, '{"a": ' * 40, "click(", "click(x=", "write(message=",
    "hotkey(", "float('nan')", "[[1, 2]]", "[[1, 2, 3, 4]]", "[[-5, 2000]]", "nan", "inf",
    "<" + " " * 3000, "```" + " " * 3000, "9" * 3000 + "x", "1+" * 1000, "a." * 1000, '{"' * 500,
]

# Argument values that are not plain JSON data, for the calls whose parse must report them.
HOSTILE_VALUES: dict[str, list[str]] = {
    "json": ["NaN", "Infinity", "-Infinity", "1e999", "[" * 40 + "]" * 40, "[" * 5000, "9" * 5000,
             '{"a": ' * 40 + "1" + "}" * 40, "2" * 30],
    "literal": ["1+2j", "b'abc'", "{'ctrl', 'c'}", "frozenset()", "...", "{1: 2}", "1e999", "-" * 2000 + "1",
                "[" * 40 + "]" * 40, "2" * 30],
    "fsd": ["nan", "inf", "-5", "2000", "1e999", "x", "1,2,3", ""],
}


def replies(grammar: str, n: int, seed: int = 0) -> Iterator[tuple[str, bool]]:
    """n generated replies for `grammar` as (text, must_report), the same ones for the same seed."""
    rng = random.Random(f"{grammar}:{seed}")
    for i in range(n):
        if i % 20 == 0:
            yield _hostile_value_reply(grammar, rng), True
        elif i % 200 == 1:
            yield _large(grammar, rng), False
        else:
            yield _mutated(grammar, rng), False


def _hostile_value_reply(grammar: str, rng: random.Random) -> str:
    if grammar in ("json", "native") or (grammar == "deepeyes" and rng.random() < 0.5):
        if rng.random() < 0.6:
            value = rng.choice(HOSTILE_VALUES["json"])
            return f'{OPEN}{{"name": "calculator", "arguments": {{"expression": {value}}}}}{CLOSE}'
        value = rng.choice(HOSTILE_VALUES["literal"])
        return f"{OPEN}{{'name': 'calculator', 'arguments': {{'expression': {value}}}}}{CLOSE}"
    if grammar == "deepeyes":
        value = rng.choice(HOSTILE_VALUES["json"])
        return f'<think>t</think>{OPEN}{{"name": "zoom", "arguments": {{"factor": {value}}}}}'
    if grammar == "scalecua":
        value = rng.choice(HOSTILE_VALUES["literal"])
        return rng.choice([f"<action>click(x={value}, y=1)</action>", f"<action>write(message={value})</action>",
                           f"<operation>copy</operation><action>hotkey({value})</action>"])
    value = rng.choice(HOSTILE_VALUES["fsd"])
    return rng.choice([f"<answer><point>[[{value}, 10]]</point></answer>",
                       f"<answer><box>[[1, 2, {value}, 40]]</box></answer>"])


def _large(grammar: str, rng: random.Random) -> str:
    """A fragment (or a valid reply) repeated into 20,000 to 300,000 characters."""
    piece = rng.choice(FRAGMENTS + VALID[grammar])
    size = rng.choice((20_000, 100_000, 300_000))
    return piece * max(1, size // max(1, len(piece)))


def _mutated(grammar: str, rng: random.Random) -> str:
    text = rng.choice(VALID[grammar])
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        text = rng.choice(_MUTATIONS)(text, grammar, rng)
    return text[:MAX_REPLY_CHARS]


def _insert(text: str, grammar: str, rng: random.Random) -> str:
    at = rng.randint(0, len(text))
    return text[:at] + rng.choice(FRAGMENTS) + text[at:]


def _replace(text: str, grammar: str, rng: random.Random) -> str:
    a = rng.randint(0, len(text))
    b = min(len(text), a + rng.randint(0, 12))
    return text[:a] + rng.choice(FRAGMENTS) + text[b:]


def _delete(text: str, grammar: str, rng: random.Random) -> str:
    a = rng.randint(0, len(text))
    return text[:a] + text[min(len(text), a + rng.randint(1, 20)):]


def _truncate(text: str, grammar: str, rng: random.Random) -> str:
    return text[:rng.randint(0, len(text))]


def _splice(text: str, grammar: str, rng: random.Random) -> str:
    other = rng.choice(VALID[rng.choice(GRAMMARS) if rng.random() < 0.3 else grammar])
    return text[:rng.randint(0, len(text))] + other[rng.randint(0, len(other)):]


def _repeat(text: str, grammar: str, rng: random.Random) -> str:
    a = rng.randint(0, len(text))
    b = min(len(text), a + rng.randint(1, 30))
    return text[:b] + text[a:b] * rng.randint(2, 60) + text[b:]


def _swap_case(text: str, grammar: str, rng: random.Random) -> str:
    a = rng.randint(0, len(text))
    b = min(len(text), a + rng.randint(1, 15))
    return text[:a] + text[a:b].swapcase() + text[b:]


_MUTATIONS = [_insert, _insert, _insert, _replace, _replace, _delete, _truncate, _splice, _repeat, _swap_case]


# ---- parsing and checking -------------------------------------------------------------------------------

_SCALECUA = ScaleCUAFormat(mode="direct")


def parse(grammar: str, text: str) -> Any:
    """The parse of `text` in `grammar`: a Parsed, or an FSDAnswer for FSD."""
    if grammar == "fsd":
        return parse_fsd(text)
    if grammar == "scalecua":
        return _SCALECUA.parse(text)
    if grammar == "native":
        return NATIVE.parse(text)
    return FORMATS[grammar].parse(text)


def violations(grammar: str, text: str, result: Any, must_report: bool = False) -> list[str]:
    """What the parse of `text` got wrong (see the module docstring); empty when it did everything right."""
    out = _encodable(result)
    issues = result.issues
    if must_report and not issues:
        out.append("a reply with an argument that is not plain JSON gave no issue")
    if len(issues) > MAX_ISSUES + 1:
        out.append(f"{len(issues)} issues: more than MAX_ISSUES + 1 lines")
    if grammar == "fsd":
        return out + _fsd_violations(text, result)
    for call in result.calls:
        out += _plain_call(call)
    if grammar in ("json", "native"):
        out += _json_violations(text, result)
    elif grammar == "deepeyes":
        out += _deepeyes_violations(text, result)
    else:
        out += _scalecua_violations(text, result)
    return out


def _encodable(result: Any) -> list[str]:
    try:
        json.dumps(_texts(result), ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError) as err:
        return [f"the result holds text that cannot be written as UTF-8: {err}"]
    return []


def _texts(result: Any) -> list:
    if isinstance(result, FSDAnswer):
        return [result.think, result.answer, result.refs, result.relations, result.issues,
                [name for name, _ in result.objects]]
    return [result.content, result.issues, result.answer]


def _plain_call(call) -> list[str]:
    try:
        data = json.dumps(call.model_dump(), allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as err:
        return [f"call {call.name!r} is not plain JSON: {err}"]
    depth = _depth(json.loads(data)["arguments"])
    return [f"call {call.name!r} is nested {depth} deep"] if depth > MAX_ARGUMENT_DEPTH + 1 else []


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _json_violations(text: str, result) -> list[str]:
    # Every <tool_call> gives exactly one call or one issue (when under the limits, so that none is counted away).
    tags = text.count(OPEN)
    if tags and tags <= MAX_CALLS and len(result.issues) <= MAX_ISSUES and len(text) <= MAX_REPLY_CHARS:
        if len(result.calls) + len(result.issues) != tags:
            return [f"{tags} <tool_call> tags gave {len(result.calls)} calls and {len(result.issues)} issues"]
    return []


# ASCII case-insensitive: the parser lower-cases, and no other character lower-cases into these tags' letters.
_DE_OPEN = re.compile(r"<(code|tool_call|answer)>", re.I | re.A)
_DE_CLOSE = re.compile(r"</(code|tool_call|answer)>", re.I | re.A)


def _deepeyes_violations(text: str, result) -> list[str]:
    shapes = [len(result.calls) == 1 and result.answer is None and not result.issues,
              result.answer is not None and not result.calls and not result.issues,
              bool(result.issues) and not result.calls and result.answer is None]
    out = [] if sum(shapes) == 1 else [f"not one action, one answer or issues: {len(result.calls)} calls, "
                                       f"answer {result.answer!r}, {len(result.issues)} issues"]
    if not _DE_OPEN.search(text) and not result.issues:
        out.append("a reply with no action tag gave no issue")
    if "<think" not in text.replace("\u0130", "i").lower():
        # A closing tag before any action opens closes nothing (later ones may sit inside an unclosed block).
        first = _DE_OPEN.search(text)
        stray = _DE_CLOSE.search(text, 0, first.start() if first else len(text))
        if stray and not result.issues:
            out.append(f"a closing tag with no opening one ({stray.group(0)}) gave no issue")
    return out


def _scalecua_violations(text: str, result) -> list[str]:
    action = _block(text[:MAX_REPLY_CHARS], "action")
    if action is None:
        return [] if result.issues else ["a reply with no <action> block gave no issue"]
    statements = split_calls(action) if len(action) <= 200_000 else None
    if statements is None or len(statements) > MAX_CALLS or len(result.issues) > MAX_ISSUES:
        return []
    lines = [i for i in result.issues if i.startswith("action line ")]
    if len(result.calls) + len(lines) != len(statements):
        return [f"{len(statements)} statements gave {len(result.calls)} calls and {len(lines)} line issues"]
    return []


_FSD_OPEN = {tag: re.compile(rf"<\s*{tag}\s*>", re.I) for tag in ("point", "ref", "pred")}
_FSD_OUTER = re.compile(r"<\s*+/?\s*+(think|answer)\s*>", re.I)


def _fsd_violations(text: str, result: FSDAnswer) -> list[str]:
    out = []
    for pts in result.points:
        if not all(len(p) == 2 and all(0 <= v <= 1000 for v in p) for p in pts):
            out.append(f"a point off the grid was read: {pts[:3]}")
    for box in result.boxes:
        if not (len(box) == 4 and box[0] <= box[2] and box[1] <= box[3] and all(0 <= v <= 1000 for v in box)):
            out.append(f"a bad box was read: {box}")
    if _FSD_OUTER.search(text) or len(result.issues) > MAX_ISSUES or len(text) > 50_000:
        return out
    # Without think/answer tags every block counts: each <point>, <ref>, <pred> gives a value or an issue.
    got = {"point": len(result.points), "ref": len(result.refs), "pred": len(result.relations)}
    for tag, pattern in _FSD_OPEN.items():
        blocks = len(pattern.findall(text))
        reported = sum(1 for i in result.issues if i.startswith(f"<{tag}> block"))
        if blocks and got[tag] + reported != blocks:
            out.append(f"{blocks} <{tag}> blocks gave {got[tag]} values and {reported} issues")
    return out
