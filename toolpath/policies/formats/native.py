"""A model's own tool-call format: the tools go to its chat template, its replies are read as its family writes.

A chat template that takes `tools` renders them itself (Qwen2.5, Hermes, Llama 3.1+), and the model was trained
to answer in that family's shape, not in toolpath's grammar:

    hermes   <tool_call>{"name": …, "arguments": …}</tool_call>, any number (Qwen2.5, Hermes, many fine-tunes)
    llama    {"name": …, "parameters": …}, after <|python_tag|> or bare, several joined by ';'
    json     what small models write instead: a ```json fenced or bare object, or a list of them

One tolerant reader takes all three (a model of one family often drifts into another's shape), with the same
bounds and issues as json.py's parser: at most MAX_REPLY_CHARS read, MAX_CALLS calls, every unreadable call an
issue, text outside the calls the answer. `opener` is the text a reply starts with when a call is forced
(tool_choice `required` or a named function): the assistant turn is prefilled with it, so the model must call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...state import Message
from .common import MAX_BLOCK_CHARS, Parsed, cap_issues, cut, loads_lenient, read_reply, snippet
from .json import _FENCE, CLOSE, OPEN, JSONFormat, _Calls, _decode_object, _scan_json_objects, _tagged_calls

PYTHON_TAG = "<|python_tag|>"  # Llama's marker before its calls (gone already when special tokens are skipped)
# Where a template shows it takes tools: `tools` as a Jinja variable, inside {% … %} or {{ … }}.
_TAKES_TOOLS = re.compile(r"\{[%{][^}]*?\btools\b")


def takes_tools(template: Any) -> bool:
    """Whether a chat template renders a `tools` list (checked on its text: nothing is rendered)."""
    return isinstance(template, str) and bool(_TAKES_TOOLS.search(template))


# Qwen2.5's templates (and fine-tunes that copied them) show the call's shape as `{{\"name\": <function-name>, …}}`
# inside a Jinja string, where the braces are not an expression and so are rendered doubled: the model is told
# to write `{{"name": …}}`, and small ones do, with no <tool_call> tag. Serving engines patch the example; so do we.
_DOUBLED_EXAMPLE = re.compile(r'\{\{(\\"name\\": <function-name>[^{}]*)\}\}')


def repaired_template(template: Any) -> Any:
    """`template` with a call example written in doubled braces inside a string shown with single ones."""
    return _DOUBLED_EXAMPLE.sub(r"{\1}", template) if isinstance(template, str) else template


def family(template: str) -> str:
    """hermes, llama or json: the shape this template's model writes its calls in."""
    if OPEN in template:
        return "hermes"
    if PYTHON_TAG in template or "<|eom_id|>" in template:
        return "llama"
    return "json"


def opener(kind: str, name: str | None = None) -> str:
    """What a forced call starts with in this family: up to the tool's name, or up to its arguments when the
    tool is named (then the model writes only the arguments)."""
    args = "parameters" if kind == "llama" else "arguments"
    head = f"{OPEN}\n" if kind == "hermes" else ""
    return head + ('{"name": "' if name is None else f'{{"name": {json.dumps(name)}, "{args}": ')


# JSON Schema keys in the order function-calling examples write them (OpenAI's, Qwen's, vLLM's): what a value is,
# then its parts, then which are required. pydantic writes `additionalProperties` first and `type` last, and a
# small model that has just read `…"type": "string"}}, "required": […], "type": "object"}` goes on writing those
# keys into its arguments.
SCHEMA_ORDER = ("type", "description", "properties", "items", "enum", "required")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")  # name -> schema
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")  # [schema, …]
_SCHEMA_ONE = ("items", "not", "additionalProperties")  # schema


def prompt_schema(schema: Any) -> Any:
    """A parameters schema as a chat template shows it: SCHEMA_ORDER's keys first at every level (the rest after,
    as given), without pydantic's `title` and without `additionalProperties: false` (validation, not meaning:
    the tool refuses an unknown argument itself, naming it and the arguments it takes). Nothing else changes."""
    if not isinstance(schema, dict):
        return schema
    out = {k: schema[k] for k in SCHEMA_ORDER if k in schema}
    out.update((k, v) for k, v in schema.items() if k not in out and k != "title"
               and not (k == "additionalProperties" and v is False))
    for k, v in out.items():
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            out[k] = {name: prompt_schema(sub) for name, sub in v.items()}
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            out[k] = [prompt_schema(sub) for sub in v]
        elif k in _SCHEMA_ONE:
            out[k] = prompt_schema(v)
    return out


def openai_tools(schemas: list[dict]) -> list[dict]:
    """toolpath's tool schemas as the function list chat templates take (OpenAI's shape), each parameters schema
    as prompt_schema shows it."""
    return [{"type": "function", "function": {
        "name": s["name"], "description": s.get("description", ""),
        "parameters": prompt_schema(s.get("parameters") or {"type": "object", "properties": {}})}} for s in schemas]


def template_messages(messages: list[Message]) -> list[dict]:
    """The conversation in the message shapes tool-taking templates read: an assistant turn's calls as its
    `tool_calls` (arguments as a mapping, which templates write with `tojson`), a tool result as a `tool` turn
    naming its call. Images are named, since a text model cannot see them."""
    chat = []
    for m in messages:
        if m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                turn["tool_calls"] = [{"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
        elif m.role == "tool":
            turn = {"role": "tool", "content": m.content, "name": m.name or "", "tool_call_id": m.tool_call_id or ""}
        else:
            named = "".join(f"\n[image: {ref.name or ref.sha256[:12]}]" for ref in m.images)
            turn = {"role": m.role, "content": m.content + named}
        chat.append(turn)
    return chat


def _is_call(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    value = value.get("function") if isinstance(value.get("function"), dict) else value
    return (isinstance(value.get("name"), str) and any(k in value for k in ("arguments", "parameters"))
            and not _is_definition(value))


def _is_definition(function: dict) -> bool:
    """A tool's definition, not a call: `parameters` is an object's JSON schema. Small models echo the template's
    tool list before their call; read as Llama's `parameters`, it would call the tool with type/properties."""
    params = function.get("parameters")
    return ("arguments" not in function and isinstance(params, dict) and params.get("type") == "object"
            and isinstance(params.get("properties"), dict))


def _add_list(body: str, found: _Calls) -> bool:
    """A JSON list of calls (fenced or bare); False when `body` is not one, so it stays text."""
    if len(body) > MAX_BLOCK_CHARS:
        found.issues.append(f"a list of tool calls is {len(body):,} characters long (at most {MAX_BLOCK_CHARS:,} "
                            f"are read): {snippet(body)}")
        return True
    try:
        value = loads_lenient(body)
    except json.JSONDecodeError as err:
        if re.search(r'["\']name["\']\s*:', body[:4096]):
            found.issues.append(f"a list of tool calls is not valid JSON ({err.msg}): {snippet(body)}")
            return True
        return False
    if not isinstance(value, list) or not value or not any(_is_call(v) for v in value):
        return False
    for v in value:
        found.add_value(v)
    return True


def _untagged(text: str, found: _Calls) -> str:
    """Fenced calls (an object or a list), else bare ones: objects that look like calls, a list of them, and
    Llama's `;`-joined objects; the text without them."""
    spans = []
    for m in _FENCE.finditer(text):
        body = m.group(1).strip()
        if body.startswith("[") and _add_list(body, found):
            spans.append((m.start(), m.end()))
        elif body.startswith("{") and re.search(r'["\']name["\']\s*:', body[:4096]):
            spans.append((m.start(), m.end()))
            found.add_text(body, closed=True)
    if spans:
        return cut(text, spans)
    start = len(text) - len(text.lstrip())
    if text.startswith("[", start):  # a reply that is a list of calls
        got = _decode_object(text, start)
        if got is not None and isinstance(got[0], list) and any(_is_call(v) for v in got[0]):
            for v in got[0]:
                found.add_value(v)
            return text[got[1]:]
    objects, stopped = _scan_json_objects(text)
    for start, end, value in objects:
        if _is_call(value):
            spans.append((start, end))
            found.add_value(value)
    if stopped is not None:
        found.issues.append(f"stopped looking for JSON tool calls at character {stopped:,}: the reply has too "
                            f"many '{{' that start no valid JSON object")
    return re.sub(r"^[\s;]+|[\s;]+$", "", cut(text, spans)) if spans else text


def parse_native(text: str, id_prefix: str = "call") -> Parsed:
    """Read a reply in any of the native families' shapes; never raises on model text."""
    text, issues = read_reply(text)
    text = text.replace(PYTHON_TAG, "\n")  # a separator, not nothing: taking it out must not join two halves of a tag
    found = _Calls(id_prefix)
    content = _tagged_calls(text, found) if OPEN in text else _untagged(text, found)
    content = content.replace(CLOSE, "").strip()
    return Parsed(content=content, calls=found.calls, issues=cap_issues(issues + found.all_issues()))


class NativeFormat(JSONFormat):
    """The response format of a model prompted through its own template: no guide, no example and no stop
    sequence of toolpath's (the template teaches the tools; the model ends its turn with its own end token);
    earlier calls and tool results go to the template as structured messages, not as rendered text."""

    name = "native"
    stop: tuple[str, ...] = ()
    max_steps: int | None = None

    def guide(self, schemas: list[dict]) -> str:
        return ""

    def demonstration(self, schemas: list[dict]) -> list[dict]:
        return []

    def parse(self, text: str, id_prefix: str = "call") -> Parsed:
        return parse_native(text, id_prefix)

    def render_observation(self, tool: str, content: str) -> str:
        return content


NATIVE = NativeFormat()
