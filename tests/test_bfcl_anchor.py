"""BFCL's own prompt handler as the anchor (evals/benchmarks/bfcl_handler.py), with no real model: the prompt is
the package's, a handler-format reply is decoded and scored as the package's evaluation scores it. And BFCL
through `toolpath serve` + the `openai` policy scores item by item what the same scripted model scores in-process.
"""

import json
import sys
import types

import numpy as np
import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.evals.benchmarks import bfcl_data  # noqa: E402
from toolpath.evals.benchmarks import bfcl_handler as bh  # noqa: E402
from toolpath.evals.benchmarks.bfcl import BFCL  # noqa: E402
from toolpath.evals.benchmarks.bfcl_official import checker  # noqa: E402
from toolpath.evals.benchmarks.bfcl_tools import tool_name  # noqa: E402
from toolpath.evals.scoring import score_answer  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402


def handler_text(calls):
    """Calls as a Qwen-family model writes them, which QwenFCHandler's decoder reads."""
    return "\n".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>' for n, a in calls)


class FakeTokenizer:
    """Words for tokens: what the handler's token count and the anchor's completion need of a tokenizer."""

    eos_token_id = 0
    model_max_length = 32768

    def __init__(self, reply):
        self.reply, self.prompts = reply, []

    def tokenize(self, text):
        return text.split()

    def __call__(self, text, add_special_tokens=True, return_tensors=None):
        self.prompts.append(text)
        return {"input_ids": np.arange(1, len(text.split()) + 1)[None, :]}

    def decode(self, ids, skip_special_tokens=False):
        return self.reply


class FakePolicy:
    """A local policy's public pieces (tokenizer, model config, spec, `_generate`), answering one reply."""

    def __init__(self, reply, model_type="qwen2"):
        self.name = "fake"
        self.tokenizer = FakeTokenizer(reply)
        self.model = types.SimpleNamespace(config=types.SimpleNamespace(model_type=model_type,
                                                                        max_position_embeddings=32768))
        self.spec = types.SimpleNamespace(max_new_tokens=256)
        self.asked = []

    def _generate(self, inputs, kwargs):
        self.asked.append(kwargs)
        ids = inputs["input_ids"]
        return np.concatenate([ids, np.full((1, 5), 7)], axis=1), None


def item(category, n=0):
    return dict(bfcl_data.load(category)[n])


def possible_calls(it, name=str):
    """One right answer of an AST item: (name, arguments) per call, each argument's first possible value."""
    return [(name(fn), {k: next(v for v in vs if v != "") for k, vs in args.items() if vs != [""]})
            for entry in it["ground_truth"] for fn, args in entry.items()]


def test_the_prompt_is_the_packages_own_and_the_reply_is_decoded_and_scored_by_its_handler():
    it = item("simple_python", 1)  # math.factorial: the model sees the dotted name, as the package shows it
    policy = FakePolicy(handler_text([("math.factorial", {"number": 5})]))
    anchor = bh.Anchor(policy)
    reply = anchor.respond(it)
    prompt = policy.tokenizer.prompts[-1]
    assert prompt == reply.prompt
    assert prompt.startswith("<|im_start|>system\n# Tools\n\nYou may call one or more functions")
    assert f"<tools>\n{json.dumps(it['function'][0])}\n</tools>" in prompt  # BFCL's schema, "dict" types, hint
    assert "Note that the provided function is in Python 3 syntax." in prompt
    assert prompt.endswith(f"<|im_start|>user\n{it['question'][0][0]['content']}<|im_end|>\n<|im_start|>assistant\n")
    assert policy.asked[-1]["max_new_tokens"] == 256 and policy.asked[-1]["do_sample"] is False
    assert anchor.score("simple_python", it, reply.text) == (True, "")
    right, why = anchor.score("simple_python", it, handler_text([("math.factorial", {"number": 6})]))
    assert not right and "number" in why
    right, why = anchor.score("simple_python", it, "The factorial of 5 is 120.")  # no <tool_call>: no calls
    assert not right


def test_a_parallel_reply_and_an_irrelevance_reply_are_judged_as_the_package_judges_them():
    it = item("parallel")
    truth = possible_calls(it)
    anchor = bh.Anchor(FakePolicy(""))
    assert len(truth) > 1 and anchor.score("parallel", it, handler_text(reversed(truth)))[0]
    assert not anchor.score("parallel", it, handler_text(truth[:1]))[0]
    irr = item("irrelevance")
    assert anchor.score("irrelevance", irr, "None of these functions can answer that.") == (True, "")
    fn = irr["function"][0]
    assert not anchor.score("irrelevance", irr, handler_text([(fn["name"], {})]))[0]


@pytest.mark.parametrize("name_as", ["dotted", "underscored", "other"])
def test_names_are_judged_as_the_package_judges_this_handlers_models(monkeypatch, name_as):
    """The package scores Qwen's handler with names kept as shown (underscore_to_dot false): the anchor's
    verdict is that checker's, run directly, for a dotted name written as shown, with "_", or not at all."""
    it = item("simple_python", 1)
    name = {"dotted": "math.factorial", "underscored": "math_factorial", "other": "factorial"}[name_as]
    output = [{name: {"number": 5}}]
    mod = checker()
    monkeypatch.setitem(mod.MODEL_CONFIG_MAPPING, "qwen-anchor", types.SimpleNamespace(underscore_to_dot=False))
    package = mod.ast_checker(it["function"], output, it["ground_truth"], mod.Language.PYTHON, "simple_python",
                              "qwen-anchor")["valid"]
    assert bh.score_decoded("simple_python", it, output)[0] == package == (name_as == "dotted")


def test_the_handler_code_loads_with_stand_ins_that_are_gone_afterwards():
    before = {m: sys.modules.get(m) for m in ("openai", "requests", "overrides", "bfcl_eval.utils")}
    bh.handler_class.cache_clear()
    cls = bh.handler_class("qwen_fc", "QwenFCHandler")
    assert cls.__name__ == "QwenFCHandler" and cls._format_prompt.__module__ == "toolpath_bfcl_qwen_fc"
    assert {m: sys.modules.get(m) for m in before} == before
    assert "bfcl_eval.model_handler.local_inference.base_oss_handler" not in sys.modules


def test_a_model_family_the_package_has_no_handler_for_is_one_clear_error():
    with pytest.raises(bh.AnchorError, match="no handler for 'fake' \\(model_type llama\\)"):
        bh.Anchor(FakePolicy("", model_type="llama"))


# ---- the serve path ----------------------------------------------------------------------------------------

def scripted_answers():
    """(category, item id, the scripted model's one response): right and wrong answers of each kind."""
    simple = item("simple_python", 1)
    par = item("parallel")
    irr = item("irrelevance")
    truth = possible_calls(par, tool_name)

    def calls(pairs):
        return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}

    fn = irr["function"][0]
    return [("simple_python", simple["id"], calls([("math_factorial", {"number": 5})])),
            ("simple_python", simple["id"], calls([("math_factorial", {"number": 5.0})])),  # a float: wrong type
            ("parallel", par["id"], calls(truth)),
            ("parallel", par["id"], calls(truth[:1])),
            ("irrelevance", irr["id"], {"text": "None of the functions given can answer that."}),
            ("irrelevance", irr["id"], calls([(tool_name(fn["name"]), {p: 1 for p in fn["parameters"].get(
                "required", [])})]))]


def test_bfcl_through_serve_and_the_openai_policy_scores_what_it_scores_in_process(store, tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import yaml

    from toolpath import serve

    in_process, served = [], []
    for n, (category, item_id, response) in enumerate(scripted_answers()):
        bench = BFCL(categories=category)
        rec = next(r for r in bench.records() if r.id == item_id)
        run = run_episode(bench.to_task(rec), store, policy=ScriptedPolicy([response]))
        in_process.append(score_answer(bench, rec, run.answer).scores)
        script = tmp_path / f"answer{n}.yaml"
        script.write_text(yaml.safe_dump([response]))
        server = serve.start(f"scripted:{script}", model_id="scripted")
        try:
            spec = bench.to_task(rec, model="openai:scripted")
            spec.model.base_url = server.url
            run = run_episode(spec, store)
            served.append(score_answer(bench, rec, run.answer).scores)
            assert server.engine.served >= 1  # the answer came through the server
        finally:
            server.stop()
    assert served == in_process
    assert [s["official"] for s in in_process] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
