"""A call the token limit cut off is read only when nothing its tool takes was cut."""

from toolpath.policies.formats import FORMATS
from toolpath.policies.formats.cut_calls import recover_cut_call, with_cut_call
from toolpath.policies.formats.json import CLOSE, OPEN
from toolpath.policies.formats.native import NATIVE
from toolpath.policies.hf import _with_cut_call

SCHEMAS = [
    {"name": "final_answer", "parameters": {"properties": {"answer": {"type": "string"}}, "required": ["answer"]}},
    {"name": "click", "parameters": {"properties": {"x": {"type": "integer"}, "y": {"type": "integer"},
                                                    "button": {"type": "string"}}, "required": ["x", "y"]}},
]

# What a small model wrote after a transcript: the answer in full, then the tool result's word table copied
# as an argument the tool does not take, until max_new_tokens.
COPIED_TABLE = (OPEN + '\n{"name": "final_answer", "arguments": {"answer": "Maria bought a blue car yesterday.", '
                '"words": [{"word": "Maria", "start": 0.0, "end": 0.38}, {"word": "bought", "st')


def test_a_cut_in_an_argument_the_tool_does_not_take_keeps_the_complete_ones():
    start, call = recover_cut_call(COPIED_TABLE, SCHEMAS)
    assert start == len(OPEN) + 1
    assert call == {"name": "final_answer", "arguments": {"answer": "Maria bought a blue car yesterday."}}
    parsed = FORMATS["json"].parse(with_cut_call(COPIED_TABLE, SCHEMAS, OPEN, CLOSE))
    assert [(c.name, c.arguments) for c in parsed.calls] == [("final_answer", call["arguments"])]
    assert parsed.issues == []


def test_the_policy_reads_the_cut_call_in_either_json_grammar():
    for fmt in (FORMATS["json"], NATIVE):
        assert FORMATS["json"].parse(COPIED_TABLE).calls == []  # read as it is, the call is lost
        parsed = _with_cut_call(fmt, COPIED_TABLE, SCHEMAS, "call3")
        assert [c.id for c in parsed.calls] == ["call3_1"] and parsed.issues == []


def test_a_bare_cut_call_after_a_complete_one_is_read_too():
    raw = ('{"name": "click", "arguments": {"x": 1, "y": 2}}\n'
           '{"name": "final_answer", "arguments": {"answer": "done", "note": "I clicked the')
    parsed = FORMATS["json"].parse(with_cut_call(raw, SCHEMAS, OPEN, CLOSE))
    assert [c.name for c in parsed.calls] == ["click", "final_answer"]


def test_a_cut_that_may_lose_what_the_tool_reads_is_not_recovered():
    cut_inside = [
        '{"name": "click", "arguments": {"x": 1, "y": 2, "button": "le',        # a parameter's value
        '{"name": "click", "arguments": {"x": 1, "y": 2, "butt',                # a key that may be a parameter
        '{"name": "click", "arguments": {"x": 1, "y": 2',                       # the last value may go on
        '{"name": "click", "arguments": {"x": 1, "note": "',                    # y, required, never written
        '{"name": "final_answer", "arguments": {"answer": "The car is bl',    # the only argument
        '{"name": "unknown_tool", "arguments": {"a": 1, "b": "',                # no schema to check against
        '{"name": "click", "arguments": {"x": 1, "y": 2}, "extra": [1, 2',     # the arguments were complete
        '{"name": "click", "arguments": {"x": 1, "y": 2}}',                     # nothing was cut
        'The answer is {"name": "click", "arguments": {"x": 1, "y": 2}}.',
    ]
    for raw in cut_inside:
        assert recover_cut_call(raw, SCHEMAS) is None, raw
        assert with_cut_call(raw, SCHEMAS, OPEN, CLOSE) is None, raw


def test_strings_with_commas_braces_and_escaped_quotes_are_read_as_strings():
    raw = '{"name": "click", "arguments": {"x": 1, "y": 2, "why": "a \\"}, {\\" b", "zz": "q'
    assert recover_cut_call(raw, SCHEMAS)[1]["arguments"] == {"x": 1, "y": 2, "why": 'a "}, {" b'}
