"""DeepEyesV2's response grammar: <think>, then exactly one of <code>, <tool_call>, <answer>."""

import pytest

from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.formats import FORMATS, get_format
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.sandboxes.process import bwrap_works
from toolpath.spec import parse_spec
from toolpath.state import ToolCall

DE = FORMATS["deepeyes"]
needs_bwrap = pytest.mark.skipif(bwrap_works() is not None, reason=f"no bubblewrap sandbox: {bwrap_works()}")


def test_code_block_becomes_one_python_call_and_the_thought_is_kept():
    p = DE.parse("<think>I need the size.</think>\n<code>\n```python\nprint(image_1.size)\n```\n</code>", "call2")
    assert p.issues == [] and p.answer is None
    assert [(c.id, c.name, c.arguments) for c in p.calls] == [("call2_1", "python", {"code": "print(image_1.size)"})]
    assert p.content == "I need the size."


def test_the_stop_sequence_may_be_missing_at_the_end():
    # Servers drop the stop string (</code>) from what they return; that is a complete action.
    p = DE.parse("<think>t</think><code>```python\nx = 1\nx + 1\n```")
    assert p.issues == [] and p.calls[0].arguments == {"code": "x = 1\nx + 1"}
    p = DE.parse('<think>t</think><tool_call>{"name": "search", "arguments": {"query": "q"}}')
    assert p.issues == [] and (p.calls[0].name, p.calls[0].arguments) == ("search", {"query": "q"})


def test_code_without_a_fence_and_other_fence_spellings():
    assert DE.parse("<code>print(1)</code>").calls[0].arguments["code"] == "print(1)"
    assert DE.parse("<code>```py\nprint(2)\n```</code>").calls[0].arguments["code"] == "print(2)"
    assert DE.parse("<CODE>```Python\nprint(3)```</CODE>").calls[0].arguments["code"] == "print(3)"


def test_answer_ends_and_is_separate_from_the_thought():
    p = DE.parse("<think>The bar is 137 px.</think>\n<answer> 137 </answer>")
    assert p.answer == "137" and p.calls == [] and p.issues == [] and p.content == "The bar is 137 px."


@pytest.mark.parametrize("text, expected", [
    ("I think it is 5.", "no action"),
    ("<think>only thinking</think>", "no action"),
    ("<code>print(1)</code><answer>1</answer>", "found 2 actions (<code>, <answer>)"),
    ("<code>\n```python\n```\n</code>", "has no code"),
    ("<answer>  </answer>", "is empty"),
    ("<think>x</think></code>", "found </code> without a matching <code>"),
    ("<code>print(1)<answer>1</answer>", "<code> is not closed with </code> before the next action"),
    ('<tool_call>{"name": "search", "arguments": {"query": </tool_call>', "not valid JSON"),
])
def test_malformed_output_says_what_was_wrong(text, expected):
    p = DE.parse(text)
    assert p.calls == [] and p.answer is None
    assert any(expected in i for i in p.issues), p.issues


def test_unclosed_think_runs_to_the_action():
    p = DE.parse("<think>still thinking <answer>4</answer>")
    assert p.answer == "4" and p.content == "still thinking"


def test_rendering_back_reproduces_the_grammar():
    calls = [ToolCall(id="1", name="python", arguments={"code": "print(1)"})]
    text = DE.render_assistant("look", calls)
    assert text == "<think>look</think>\n<code>\n```python\nprint(1)\n```\n</code>"
    again = DE.parse(text)
    assert again.calls[0].arguments == {"code": "print(1)"} and again.content == "look"
    other = DE.render_assistant("", [ToolCall(id="2", name="search", arguments={"query": "q"})])
    assert DE.parse(other).calls[0].arguments == {"query": "q"}


def test_guide_lists_the_actions_the_episode_has():
    schemas = [{"name": "python", "parameters": {"properties": {"code": {"type": "string"}}}},
               {"name": "search", "description": "web search",
                "parameters": {"properties": {"query": {"type": "string"}}}},
               {"name": "final_answer", "parameters": {"properties": {}}}]
    g = DE.guide(schemas)
    assert "<code>" in g and "- search(query: string): web search" in g and "<answer>" in g
    assert "final_answer(" not in g  # <answer> is how this grammar finishes
    assert "<code>" not in DE.guide(schemas[1:]) and DE.demonstration(schemas[1:]) == []


def test_unknown_format_is_named():
    with pytest.raises(ValueError, match="unknown response format 'xml'; expected one of json, deepeyes"):
        get_format("xml")


def spec(tmp_path, **kw):
    return parse_spec({"id": "de", "instruction": "What is 6*7?", "model": "scripted:none.yaml",
                       "agent": {"name": "react", "params": {"format": "deepeyes"}}, **kw}, base_dir=tmp_path)


def test_bad_agent_params_fail_before_anything_starts(tmp_path, store):
    bad = parse_spec({"id": "de", "instruction": "x", "agent": {"name": "react", "params": {"formt": "deepeyes"}}})
    with pytest.raises(EpisodeError,
                       match="agent.params.formt: agent 'react' has no option 'formt'; its options: format"):
        run_episode(bad, store, policy=ScriptedPolicy([]))
    bad = parse_spec({"id": "de", "instruction": "x", "agent": {"name": "react", "params": {"format": "xml"}}})
    with pytest.raises(EpisodeError, match=r"agent.params.format: unknown response format; expected one of json, "
                                           r"deepeyes \(got 'xml'\)"):
        run_episode(bad, store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []


def test_malformed_turns_become_observations_and_the_run_goes_on(tmp_path, store):
    script = ["I am sure it is 42.",  # no action
              '<think>use the calculator</think><tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}',
              "<think>got it</think><answer>42</answer>"]
    r = run_episode(spec(tmp_path, tools=["calculator"]), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer, r.steps) == ("finished", "42", 3)
    steps = store.steps(r.run_id)
    feedback = steps[1]["payload"]["messages"][-1]
    assert feedback["role"] == "user" and "no action" in feedback["content"]
    assert steps[3]["payload"]["observations"][0]["content"] == "42"


def test_nine_turns_by_default_unless_the_spec_says(tmp_path, store):
    loop = ['<tool_call>{"name": "calculator", "arguments": {"expression": "%d+1"}}' % i  # noqa: UP031 - JSON braces
            for i in range(20)]
    r = run_episode(spec(tmp_path, tools=["calculator"]), store, policy=ScriptedPolicy(loop))
    assert r.status == "budget_exhausted" and r.steps == 9 and "max_steps=9" in r.error
    assert '"max_steps":9' in store.get_run(r.run_id)["spec"]  # kept for a resume
    r = run_episode(spec(tmp_path, tools=["calculator"], limits={"max_steps": 4}), store, policy=ScriptedPolicy(loop))
    assert r.steps == 4


@needs_bwrap
def test_code_runs_in_the_sandbox_and_its_result_reads_like_deepeyes(tmp_path, store):
    script = ["<think>compute</think><code>\n```python\nx = 6 * 7\nprint(x)\n```\n",
              "<think>the kernel kept x</think><code>```python\nx + 1\n```</code>",
              "<answer>42</answer>"]
    r = run_episode(spec(tmp_path, sandbox="process"), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "42")
    obs = [s["payload"]["observations"][0]["content"] for s in store.steps(r.run_id) if s["node"] == "tools"]
    assert obs[0].startswith("Code execution result:\nstdout:\n42\n")
    assert "value:\n43" in obs[1]


def test_text_whose_lower_case_is_longer_keeps_the_blocks_where_they_are():
    # "İ".lower() is two characters: positions found in a lower-cased copy must still hold in the reply.
    p = DE.parse("İİİ <answer>5</answer> x")
    assert p.answer == "5" and p.issues == [] and p.content == "İİİ  x"
    assert DE.parse("<think>İİ</think><answer>6</answer>").answer == "6"


def test_removing_a_thought_never_joins_text_into_a_tag():
    p = DE.parse("<think>ok</think><answ</think>er>yes</answer>")
    assert p.answer is None and p.issues


def test_a_python3_fence_is_a_language_tag_not_code():
    assert DE.parse("<code>```python3\nprint(1)```</code>").calls[0].arguments == {"code": "print(1)"}
