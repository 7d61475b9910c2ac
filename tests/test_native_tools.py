"""A model's own tool format: its replies read per family (formats/native.py), its prompt made by its own chat
template with `tools=` (a tiny random model whose tokenizer carries a small Qwen-style template), and
`toolpath serve`'s tool_choice through the official `openai` client against that model."""

import json

import pytest

from toolpath.policies.base import PolicyError
from toolpath.policies.formats.json import render_tools
from toolpath.policies.formats.native import family, opener, parse_native, takes_tools
from toolpath.spec import ModelSpec
from toolpath.state import Message, ToolCall

AREA = {"name": "calculate_triangle_area", "description": "area of a triangle", "parameters": {
    "type": "object", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
    "required": ["base", "height"]}}

# The shape of Qwen2.5's template: tools in the system turn, calls as <tool_call> blocks, results as
# <tool_response> in a user turn.
QWEN_STYLE = (
    "{%- if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}\n{% endif %}"
    "# Tools\n<tools>\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>\n"
    "Call a function as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}{%- if m.role == 'system' %}"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{%- elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PLAIN_CHAT = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def calls(text):
    r = parse_native(text)
    return [(c.name, c.arguments) for c in r.calls], r.content, r.issues


# ---- the reader, on replies of each family ----

def test_hermes_calls_several_unclosed_last_and_lenient_json():
    got, content, issues = calls('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
                                 "<tool_call>\n{'name': 'b', 'arguments': {'y': [1, 2,],},}")
    assert got == [("a", {"x": 1}), ("b", {"y": [1, 2]})] and content == "" and issues == []


def test_llama_json_with_and_without_python_tag():
    assert calls('<|python_tag|>{"name": "f", "parameters": {"n": 1}}; {"name": "g", "parameters": {}}')[0] == [
        ("f", {"n": 1}), ("g", {})]
    assert calls('{"name": "f", "parameters": {"n": 1}}') == ([("f", {"n": 1})], "", [])


def test_fenced_and_bare_json_that_small_models_write():
    got, content, _ = calls('Here you go:\n```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": '
                            '{"q": "x"}}]\n```\nDone.')
    assert got == [("a", {}), ("b", {"q": "x"})] and content == "Here you go:\n\nDone."
    assert calls('```json\n{"name": "a", "arguments": {"k": true}}\n```')[0] == [("a", {"k": True})]
    assert calls('[{"name": "a", "arguments": {"k": 2}}]')[0] == [("a", {"k": 2})]


def test_free_text_is_the_answer_and_json_that_is_no_call_stays_text():
    assert calls("The area is 25 square units.") == ([], "The area is 25 square units.", [])
    assert calls('The config is {"size": 3}.') == ([], 'The config is {"size": 3}.', [])
    assert calls("[1, 2, 3] are the sides") == ([], "[1, 2, 3] are the sides", [])


@pytest.mark.parametrize("reply", [
    '<tool_call>\n{"name": "a", "arguments": {oops',
    '<tool_call>{"arguments": {}}</tool_call>',
    '```json\n[{"name": "a", "arguments": {"x": NaN}}]\n```',
    '```json\n[{"name": "a", "arguments": {bad]\n```',
    '<tool_call>{"name": "a", "arguments": "not json"}</tool_call>',
])
def test_garbled_calls_become_issues(reply):
    got, _, issues = calls(reply)
    assert got == [] and len(issues) == 1 and "tool call" in issues[0]


def test_bounds_are_the_json_grammars():
    many = "".join(f'<tool_call>{{"name": "t{i}", "arguments": {{}}}}</tool_call>' for i in range(60))
    got, _, issues = calls(many)
    assert len(got) == 50 and "only the first 50" in issues[0]
    listed = json.dumps([{"name": f"t{i}", "arguments": {}} for i in range(60)])
    assert len(calls(listed)[0]) == 50


# ---- which templates take tools, and their call openers ----

def test_templates_that_take_tools_and_their_families():
    assert takes_tools(QWEN_STYLE) and family(QWEN_STYLE) == "hermes"
    assert not takes_tools(PLAIN_CHAT) and not takes_tools("Use the tools wisely") and not takes_tools(None)
    llama = "{%- if tools is not none %}{{- '<|python_tag|>' }}{% endif %}"
    assert takes_tools(llama) and family(llama) == "llama"
    assert opener("hermes") == '<tool_call>\n{"name": "'
    assert opener("llama", "f") == '{"name": "f", "parameters": '


def test_the_grammars_example_names_the_runs_own_tool_and_arguments():
    guide = render_tools([AREA])
    assert "calculator" not in guide and "expression" not in guide
    assert '{"name": "calculate_triangle_area", "arguments": {"base": 1, "height": 1}}' in guide


# ---- the prompt a tiny model's own template makes ----

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from tiny_lm import save_tiny_chat_lm

    folder = tmp_path_factory.mktemp("tiny-qwen-style")
    tok = save_tiny_chat_lm(folder, QWEN_STYLE + json.dumps(AREA) + " area? Be brief. 25.0 tool_calls")
    tok.chat_template = QWEN_STYLE
    tok.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2048}))  # room for tools
    return folder


def load(folder, **options):
    from toolpath.policies.hf import HFPolicy

    return HFPolicy.from_path(str(folder), ModelSpec(name=f"hf:{folder}", max_new_tokens=6, options=options))


def prompt(policy, messages, tools=(AREA,), **generation):
    from toolpath.policies.formats import FORMATS

    inputs, _ = policy._inputs(messages, list(tools), generation.get("format") or FORMATS["json"],
                               generation.get("tool_choice"))
    return policy.tokenizer.decode(inputs["input_ids"][0])


def test_tools_reach_the_template_and_a_call_and_result_round_trip(tiny):
    policy = load(tiny)
    call = ToolCall(id="c1", name="calculate_triangle_area", arguments={"base": 10, "height": 5})
    text = prompt(policy, [Message(role="system", content="Be brief."), Message(role="user", content="area?"),
                           Message(role="assistant", content="", tool_calls=[call]),
                           Message(role="tool", content="25.0", name=call.name, tool_call_id="c1")])
    assert '"name": "calculate_triangle_area"' in text.split("</tools>")[0]  # the tool list, as the template writes it
    assert "You can use tools" not in text and "calculator" not in text  # no toolpath grammar, no worked example
    assert ('<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n'
            '</tool_call>') in text
    assert "<tool_response>\n25.0\n</tool_response>" in text and text.endswith("<|im_start|>assistant\n")


def test_toolpath_grammar_on_request_and_for_agents_with_their_own(tiny):
    from toolpath.policies.formats import FORMATS

    grammar = prompt(load(tiny, tool_format="toolpath"), [Message(role="user", content="area?")])
    assert "You can use tools" in grammar and "<tools>" not in grammar
    deepeyes = prompt(load(tiny), [Message(role="user", content="area?")], format=FORMATS["deepeyes"])
    assert "<tools>" not in deepeyes and "<answer>" in deepeyes


def test_native_on_a_template_without_tools_is_refused_when_it_loads(tiny, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    other = tmp_path / "plain-chat"
    shutil.copytree(tiny, other)
    tok = AutoTokenizer.from_pretrained(str(other))
    tok.chat_template = PLAIN_CHAT
    tok.save_pretrained(other)
    with pytest.raises(PolicyError, match="tool_format: native needs a text model whose chat template takes tools"):
        load(other, tool_format="native")
    assert "You can use tools" in prompt(load(other), [Message(role="user", content="q")])  # auto: the grammar


def test_a_forced_call_starts_the_reply_with_the_families_opener(tiny):
    policy = load(tiny)
    named = prompt(policy, [Message(role="user", content="area?")], tool_choice={"name": "calculate_triangle_area"})
    assert named.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "calculate_triangle_area", "arguments": ')
    r = policy.respond([Message(role="user", content="area?")], [AREA], tool_choice="required")
    # random weights: a call or an issue
    assert r.raw.startswith('<tool_call>\n{"name": "') and (r.tool_calls or r.issues)


def test_a_template_that_raises_is_a_policy_error(tiny):
    policy = load(tiny)
    policy.tokenizer.chat_template = "{{ raise_exception('roles must alternate') }}{{ tools }}"
    try:
        with pytest.raises(PolicyError, match="its chat template refused the conversation: roles must alternate"):
            prompt(policy, [Message(role="user", content="q")])
    finally:
        policy.tokenizer.chat_template = QWEN_STYLE


# ---- toolpath serve: tool_choice through the openai client ----

def test_a_streamed_list_of_calls_is_held_back_from_its_bracket():
    from toolpath.serve.gate import TextGate

    gate = TextGate(calls=True)
    assert gate.feed("Calling: ") == "Calling:" and gate.feed('[{"name": "a", "arguments": {}}]') == ""


@pytest.fixture(scope="module")
def served(tiny):
    pytest.importorskip("openai")
    pytest.importorskip("uvicorn")
    from toolpath import serve

    srv = serve.start(ModelSpec(name=f"hf:{tiny}", max_new_tokens=6), model_id="tiny")
    yield srv
    srv.stop()


def test_serve_honours_each_tool_choice(served):
    import openai

    c = openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0, timeout=60)
    tools = [{"type": "function", "function": AREA}]
    ask = [{"role": "user", "content": "area?"}]

    def create(**kw):
        return c.chat.completions.create(model="tiny", messages=ask, tools=tools, max_tokens=6, **kw)

    auto, none = create(), create(tool_choice="none")
    assert none.usage.prompt_tokens < auto.usage.prompt_tokens  # "none": the template got no tools
    assert not none.choices[0].message.tool_calls
    for choice, start in [("required", '<tool_call>\n{"name": "'),
                          ({"type": "function", "function": {"name": "calculate_triangle_area"}},
                           '<tool_call>\n{"name": "calculate_triangle_area", "arguments": ')]:
        r = create(tool_choice=choice)
        message = r.choices[0].message
        # Random weights rarely finish a call: what they wrote after the forced opener comes back as text.
        assert message.tool_calls or message.content.startswith(start.rstrip()), (choice, message)
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in create(tool_choice=choice, stream=True)
                           if chunk.choices)
        assert streamed == (message.content or "")  # held back while written, sent whole at the end


def test_serve_reports_the_prompt_tokens_prefix_reuse_did_not_compute_again(served):
    import openai

    c = openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0, timeout=60)
    ask = [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "area?"}]
    c.chat.completions.create(model="tiny", messages=ask, max_tokens=2)
    again = c.chat.completions.create(model="tiny", messages=[*ask[:1], {"role": "user", "content": "volume?"}],
                                      max_tokens=2)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < again.usage.prompt_tokens  # the shared system turn, not the new question
