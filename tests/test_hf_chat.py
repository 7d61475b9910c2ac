"""How a transcript becomes a chat for a local model (no model needed: only the rendering is under test)."""

from toolpath.policies.hf import HFPolicy
from toolpath.spec import ModelSpec
from toolpath.state import ArtifactRef, Message, ToolCall

CALC = {"name": "calculator", "description": "math", "parameters": {"properties": {"expression": {"type": "string"}}}}


class Tok:
    def __init__(self, template):
        self.chat_template = template


def chat(template, messages, tools=(CALC,), **options):
    return HFPolicy(None, Tok(template), ModelSpec(options=options), "t")._chat(messages, list(tools))


def test_tools_join_the_system_prompt_and_calls_are_rendered_back():
    c = chat("plain", [Message(role="system", content="sys"), Message(role="user", content="q"),
                       Message(role="assistant", content="hm", tool_calls=[ToolCall(id="1", name="calculator",
                                                                                  arguments={"expression": "1"})]),
                       Message(role="tool", content="1", name="calculator")], demonstration=False)
    assert c[0]["role"] == "system" and c[0]["content"].startswith("sys\n\nYou can use tools")
    assert "- calculator(expression: string): math" in c[0]["content"]
    assert c[2] == {"role": "assistant",
                    "content": 'hm\n<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>'}
    assert c[3] == {"role": "user", "content": "Result of calculator: 1"}  # a template without a tool role


def test_templates_with_a_tool_role_get_one():
    c = chat("{% if message.role == 'tool' %}", [Message(role="user", content="q"),
                                                  Message(role="tool", content="5", name="calculator")])
    assert c[0]["role"] == "system"  # no system message given: the tool guide becomes one
    assert c[-1] == {"role": "tool", "content": "5"}


def test_images_are_named_for_a_text_only_model():
    ref = ArtifactRef(sha256="ab" * 32, path="/x.png", mime="image/png", name="cat.png")
    c = chat("plain", [Message(role="user", content="what is it?", images=[ref])], tools=())
    assert c == [{"role": "user", "content": "what is it?\n[image: cat.png]"}]


def test_a_worked_example_follows_the_system_prompt_when_the_calculator_is_there():
    c = chat("plain", [Message(role="system", content="sys"), Message(role="user", content="q")])
    assert [m["role"] for m in c] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert c[2]["content"].startswith('<tool_call>{"name": "calculator"') and c[-1]["content"] == "q"
    other = {"name": "search", "description": "s", "parameters": {"properties": {}}}
    assert len(chat("plain", [Message(role="user", content="q")], tools=(other,))) == 2  # no example without it


def test_deepeyes_turns_are_rendered_in_their_own_grammar():
    from toolpath.policies.formats import FORMATS

    py = {"name": "python", "description": "run code", "parameters": {"properties": {"code": {"type": "string"}}}}
    msgs = [Message(role="system", content="sys"), Message(role="user", content="q"),
            Message(role="assistant", content="look",
                    tool_calls=[ToolCall(id="1", name="python", arguments={"code": "1"})]),
            Message(role="tool", content="Code execution result:\nstdout:\n(empty)", name="python")]
    policy = HFPolicy(None, Tok("plain"), ModelSpec(options={"demonstration": False}), "t")
    c = policy._chat(msgs, [py], FORMATS["deepeyes"])
    assert "<code>" in c[0]["content"] and "<answer>" in c[0]["content"]
    assert c[2]["content"] == "<think>look</think>\n<code>\n```python\n1\n```\n</code>"
    assert c[3] == {"role": "user", "content": "Code execution result:\nstdout:\n(empty)"}
