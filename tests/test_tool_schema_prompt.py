"""What a model is shown of a tool and told when it calls one wrongly. The native path hands each parameters schema
to the chat template in the order function-calling examples write it (type, properties, required) without
pydantic's bookkeeping (title, additionalProperties: false), since small models copy the keys that follow the
properties into their arguments; a call with an unknown or missing argument is refused naming it and the
arguments the tool takes."""

import copy
import json

import pytest

from toolpath.policies.formats.native import openai_tools, prompt_schema
from toolpath.tools.registry import ToolError, get_tool


def test_a_tools_schema_reaches_the_template_in_the_conventional_shape():
    calculator = get_tool("calculator").schema()
    given = copy.deepcopy(calculator)
    (tool,) = openai_tools([calculator])
    params = tool["function"]["parameters"]
    assert list(params) == ["type", "properties", "required"]
    assert list(params["properties"]["expression"]) == ["type", "description"]
    assert calculator == given  # the tool's own schema is left as it was


def test_every_level_is_ordered_and_nothing_but_bookkeeping_is_dropped():
    schema = {"title": "Args", "additionalProperties": False, "required": ["title"], "type": "object",
              "properties": {
                  "title": {"title": "Title", "description": "a property may be named title", "type": "string"},
                  "tags": {"items": {"title": "Tag", "enum": ["a", "b"], "type": "string"}, "type": "array"},
                  "size": {"anyOf": [{"type": "integer", "title": "n"}, {"type": "null"}], "default": None},
                  "extra": {"type": "object", "additionalProperties": {"type": "string", "title": "v"}}},
              "$defs": {"Tag": {"title": "Tag", "type": "string"}}}
    shown = prompt_schema(schema)
    assert list(shown) == ["type", "properties", "required", "$defs"]
    assert list(shown["properties"]) == ["title", "tags", "size", "extra"]  # property names are not keys to order
    assert shown["properties"]["title"] == {"type": "string", "description": "a property may be named title"}
    assert shown["properties"]["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    assert shown["properties"]["size"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert shown["properties"]["extra"]["additionalProperties"] == {"type": "string"}  # a schema: kept
    assert shown["$defs"] == {"Tag": {"type": "string"}}


@pytest.mark.parametrize("arguments, says", [
    ({"expression": "2+3", "required": ["expression"]},
     "calculator: bad arguments: required: unknown argument; calculator takes expression (required)"),
    ({}, "calculator: bad arguments: expression: Field required; calculator takes expression (required)"),
])
def test_a_refused_call_names_the_argument_and_what_the_tool_takes(arguments, says):
    with pytest.raises(ToolError) as err:
        get_tool("calculator").call(arguments)
    assert str(err.value) == says


def test_an_echoed_tool_list_is_not_read_as_a_call():
    """Small models sometimes repeat the template's <tools> block before their call: only the call is one."""
    from toolpath.policies.formats.native import parse_native

    (tool,) = openai_tools([get_tool("calculator").schema()])
    reply = (f"I'll use the calculator.\n<tools>\n{json.dumps(tool)}\n</tools>\n\n"
             '{"name": "calculator", "arguments": {"expression": "645 * 830"}}')
    parsed = parse_native(reply)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("calculator", {"expression": "645 * 830"})]
    assert parsed.issues == []


# The tool-call line of Qwen2.5's template: a Jinja string whose braces are text, so they are rendered doubled.
QWEN_LINE = ('{{- "\\n<tool_call>\\n{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}\\n'
             '</tool_call>" }}{% for tool in tools %}{{ tool }}{% endfor %}')


def test_a_call_example_in_doubled_braces_is_shown_with_single_ones():
    import jinja2

    from toolpath.policies.formats.native import repaired_template, takes_tools

    render = lambda t: jinja2.Environment().from_string(t).render(tools=["x"])  # noqa: E731
    assert '{{"name": <function-name>' in render(QWEN_LINE)
    fixed = repaired_template(QWEN_LINE)
    assert '\n{"name": <function-name>, "arguments": <args-json-object>}\n' in render(fixed)
    assert takes_tools(fixed)
    plain = '{{- "{\\"name\\": <function-name>}" }}{{ tools }}'  # already single: left as it is
    assert repaired_template(plain) == plain
    assert repaired_template(None) is None
