from toolpath.policies.formats import parse_tool_calls, render_tools


def test_one_tagged_call_and_the_text_around_it():
    p = parse_tool_calls('Let me add. <tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}'
                         '</tool_call>')
    assert [(c.name, c.arguments) for c in p.calls] == [("calculator", {"expression": "2+3"})]
    assert p.content == "Let me add." and p.issues == []


def test_two_calls_in_one_message_keep_their_order_and_ids():
    p = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
                         '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>', id_prefix="call3")
    assert [c.name for c in p.calls] == ["a", "b"]
    assert [c.id for c in p.calls] == ["call3_1", "call3_2"]


def test_bad_json_becomes_an_issue_not_a_crash_or_a_silent_drop():
    p = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"</tool_call>')
    assert p.calls == [] and len(p.issues) == 1
    assert "not valid JSON" in p.issues[0] and "calculator" in p.issues[0]


def test_unclosed_tag_is_read_to_the_end():
    p = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}')
    assert [c.name for c in p.calls] == ["calculator"] and p.issues == []


def test_partial_tag_with_truncated_json_says_both():
    p = parse_tool_calls('<tool_call>{"name": "calcul')
    assert p.calls == [] and "no closing </tool_call>" in p.issues[0]


def test_good_call_survives_next_to_a_bad_one():
    p = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>oops</tool_call>')
    assert [c.name for c in p.calls] == ["a"] and len(p.issues) == 1


def test_lenient_forms():
    single = parse_tool_calls("<tool_call>{'name': 'calculator', 'arguments': {'expression': '3*3'}}</tool_call>")
    assert single.calls[0].arguments == {"expression": "3*3"}
    trailing = parse_tool_calls('<tool_call>{"name": "a", "arguments": {"x": 1,},}</tool_call>')
    assert trailing.calls[0].arguments == {"x": 1}
    as_string = parse_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"x\\": 2}"}</tool_call>')
    assert as_string.calls[0].arguments == {"x": 2}
    openai_shape = parse_tool_calls('<tool_call>{"type": "function", "function": {"name": "a", "arguments": {}}}'
                                    '</tool_call>')
    assert openai_shape.calls[0].name == "a"


def test_fenced_and_bare_json_calls_without_tags():
    fenced = parse_tool_calls('Sure:\n```json\n{"name": "calculator", "arguments": {"expression": "4/2"}}\n```')
    assert fenced.calls[0].arguments == {"expression": "4/2"} and fenced.content == "Sure:"
    bare = parse_tool_calls('I will call {"name": "calculator", "arguments": {"expression": "1"}} now')
    assert bare.calls[0].name == "calculator" and bare.content == "I will call  now"


def test_object_that_is_not_a_call_is_reported():
    p = parse_tool_calls('<tool_call>{"arguments": {"x": 1}}</tool_call>')
    assert p.calls == [] and 'missing "name"' in p.issues[0]
    p = parse_tool_calls('<tool_call>[1, 2]</tool_call>')
    assert "expected a JSON object" in p.issues[0]
    p = parse_tool_calls('<tool_call>{"name": "a", "arguments": [1]}</tool_call>')
    assert '"arguments" must be an object' in p.issues[0]


def test_plain_text_is_just_content():
    p = parse_tool_calls("The answer is 5. {not json}")
    assert p.calls == [] and p.issues == [] and p.content == "The answer is 5. {not json}"


def test_render_tools_lists_each_tool_with_its_arguments():
    text = render_tools([{"name": "calculator", "description": "math",
                          "parameters": {"properties": {"expression": {"type": "string"}}}}])
    assert "- calculator(expression: string): math" in text and "<tool_call>" in text


def test_a_bare_call_longer_than_the_decode_window_is_read():
    # Bare JSON is decoded through a window that widens when a value runs past it; a cut inside `true`, a
    # number or a \u escape must not lose the call.
    for pad in range(4080, 4100, 3):
        for value in ("true", "12345678", '"\\u00e9"', "[1, 2.5e10]"):
            text = ('x {"name": "a", "arguments": {"p": "%s", "q": %s}} y'  # noqa: UP031 - JSON braces
                    % ("z" * pad, value))
            p = parse_tool_calls(text)
            assert len(p.calls) == 1 and p.issues == [] and p.content == "x  y", (pad, value, p.issues)


def test_broken_braces_before_a_bare_call_do_not_hide_it():
    p = parse_tool_calls('{"oops" {"x": [1, 2 and then {"name": "calculator", "arguments": {"expression": "1"}}')
    assert [c.arguments for c in p.calls] == [{"expression": "1"}]


def test_a_fence_followed_by_a_long_run_of_spaces_is_plain_text():
    p = parse_tool_calls("```" + " " * 50_000 + "no closing fence")
    assert p.calls == [] and p.issues == []
