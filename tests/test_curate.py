"""`toolpath curate`: AskLLM and perplexity on a tiny random chat model (the plumbing: prompts, the yes/no
tokens, batches, selection), density sampling, stored runs as sources, and the fine-tuning export read back by
json and by `datasets`."""

from __future__ import annotations

import json
import math

import pytest

from tests.tiny_lm import save_tiny_chat_lm
from toolpath.curate import askllm, perplexity
from toolpath.curate.density import inverse_propensity_sample, kernel_density, median_squared_distance
from toolpath.curate.export import write_jsonl
from toolpath.curate.items import CurateError, Item
from toolpath.curate.proxy import load_proxy
from toolpath.curate.select import parse_select, select

WORDS = ("yes no Yes No the model reads a paragraph and answers whether it is informative for pre-training "
         "a large-language model OPTIONS well-formatted knowledge of the world ### previous demarcated within ")
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-chat")
    tok = save_tiny_chat_lm(folder, WORDS * 4)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def proxy(tiny):
    return load_proxy(f"hf:{tiny}", {"engine": "torch"})


TEXTS = ["the model reads a paragraph", "yes", "knowledge of the world and a paragraph that is well-formatted " * 3,
         "no no no", "informative for pre-training"]


def test_yes_and_no_are_read_in_every_spelling_the_vocabulary_has(proxy):
    yes, no = askllm.answer_ids(proxy.tokenizer, "yes"), askllm.answer_ids(proxy.tokenizer, "no")
    assert yes and no and not set(yes) & set(no)
    for token in yes:
        assert proxy.tokenizer.decode([token]).strip().lower() == "yes"


def test_p_yes_is_renormalised_over_yes_and_no_tokens():
    import numpy as np

    logits = np.full((2, 6), -50.0)
    logits[0, [0, 1]] = math.log(0.3), math.log(0.1)  # two spellings of yes: 0.4 in all
    logits[0, 2] = math.log(0.1)  # no: 0.1; the rest of the mass (the model starts otherwise) is ignored
    logits[1, 2] = 0.0
    p = askllm.p_yes(logits, [0, 1], [2])
    assert p[0] == pytest.approx(0.8) and p[1] == pytest.approx(0.0, abs=1e-12)


def test_the_prompt_is_the_papers_question_in_the_chat_template(proxy):
    text = proxy.tokenizer.decode(askllm.prompt_ids(proxy, "the model reads a paragraph"))
    assert text.startswith("<|im_start|>user\n###\nthe model reads a paragraph\n###")
    assert "contain informative signal for pre-training a large-language model?" in text
    assert text.endswith("- no<|im_end|>\n<|im_start|>assistant\n")


def test_a_long_text_is_cut_to_its_first_tokens(proxy):
    ids = askllm.prompt_ids(proxy, "paragraph " * 2000, max_text_tokens=20)
    assert len(ids) < len(askllm.prompt_ids(proxy, "paragraph " * 40, max_text_tokens=1000))
    assert len(ids) <= proxy.context


def test_askllm_scores_are_probabilities_and_batches_change_nothing(proxy):
    one = askllm.score(proxy, TEXTS, batch=1, shots=())
    batched = askllm.score(proxy, TEXTS, batch=4, shots=())  # left-padded prompts of different lengths
    assert all(0.0 < s < 1.0 for s in one)
    assert batched == pytest.approx(one, abs=1e-5)


def test_perplexity_is_the_mean_log_probability_of_every_token(proxy):
    import torch

    text = TEXTS[2]
    ids = [proxy.tokenizer.bos_token_id] + proxy.encode(text)
    with torch.inference_mode():
        logits = proxy.model(input_ids=torch.tensor([ids])).logits[0].float()
    expected = sum(torch.log_softmax(logits[i], -1)[ids[i + 1]].item() for i in range(len(ids) - 1)) / (len(ids) - 1)
    assert perplexity.mean_log_prob(proxy, text) == pytest.approx(expected, abs=1e-5)
    assert all(s < 0 for s in perplexity.score(proxy, TEXTS))


def test_perplexity_refuses_an_engine_that_drops_the_positions_it_reads(tiny):
    with pytest.raises(CurateError, match="every token's logits.*--engine torch"):
        load_proxy(f"hf:{tiny}", {"engine": "onnxruntime"}, every_position=True)


@pytest.mark.parametrize("name,why", [("openai:gpt-4.1-mini", "a local model's logits"),
                                      ("scripted:r.yaml", "a local model's logits"),
                                      ("nonsense:x", "unknown model kind"),
                                      ("hf:/no/such/folder", "not found")])
def test_a_model_curation_cannot_read_is_one_clear_error(name, why):
    with pytest.raises(CurateError, match=why):
        load_proxy(name, {})


# ---- selection and density --------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [("top:3", ("top", 3)), ("fraction:0.25", ("fraction", 0.25)),
                                           ("density:1", ("density", 1.0))])
def test_select_forms(text, expected):
    assert parse_select(text) == expected


@pytest.mark.parametrize("text", ["top:0", "top:x", "fraction:0", "fraction:1.5", "density:-1", "best:3", "top"])
def test_a_bad_select_is_refused(text):
    with pytest.raises(CurateError, match="--select"):
        parse_select(text)


def test_top_and_fraction_keep_the_best_scores():
    scores = [0.1, 0.9, 0.5, 0.7]
    assert select(scores, "top", 2) == [1, 3]
    assert select(scores, "fraction", 0.5) == [1, 3]
    assert select(scores, "top", 10) == [1, 3, 2, 0]


def test_kernel_density_is_low_for_the_outlier_and_sampling_favours_it():
    import numpy as np

    rng = np.random.default_rng(0)
    crowd = rng.normal(0, 0.05, size=(30, 8)) + 1.0
    vectors = np.vstack([crowd, -np.ones((1, 8))])
    default = kernel_density(vectors)
    assert default == pytest.approx(kernel_density(vectors, bandwidth=0.25 * median_squared_distance(vectors)))
    assert default.argmin() == 30
    density = kernel_density(vectors, bandwidth=1.0)  # wider than the crowd: every crowd text is common
    assert density.argmin() == 30
    picks = [inverse_propensity_sample(density, 3, seed) for seed in range(50)]
    assert sum(30 in p for p in picks) > 20  # uniform sampling would pick it about 5 times in 50
    assert inverse_propensity_sample(density, 3, 7) == inverse_propensity_sample(density, 3, 7)
    assert len(set(inverse_propensity_sample(density, 31, 0))) == 31


# ---- stored runs, export ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs_home(tmp_path_factory):
    """A real store with three runs: an eval's finished run that used a tool, a plain finished run, a run that
    exhausted its budget."""
    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.runs import Store
    from toolpath.spec import parse_spec

    home = tmp_path_factory.mktemp("home")
    store = Store(home)
    calc = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+3"}}]}
    answer = {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "5"}}]}
    spec = parse_spec({"id": "sum", "instruction": "What is 2+3?", "model": "scripted:none.yaml"})
    eval_id = store.create_eval("arith", "scripted", {}, 1)
    tooled = run_episode(spec, store, policy=ScriptedPolicy([calc, answer]), eval_id=eval_id)
    store.update_run(tooled.run_id, score=1.0)
    run_episode(spec, store, policy=ScriptedPolicy(["It is 5."]))
    looping = parse_spec({"id": "loop", "instruction": "Count.", "model": "scripted:none.yaml",
                          "limits": {"max_steps": 1}})
    run_episode(looping, store, policy=ScriptedPolicy([calc, calc]))
    store.close()
    return home, tooled.run_id


def test_runs_filter_names_status_benchmark_and_score(runs_home):
    from toolpath.curate.runs_source import run_items

    home, tooled = runs_home
    assert len(run_items("", home)) == 3
    assert [i.source for i in run_items("benchmark=arith,score>=1", home)] == [f"run:{tooled}"]
    assert {i.meta["status"] for i in run_items("status=finished", home)} == {"finished"}
    assert len(run_items("status!=finished", home)) == 1
    assert run_items("score<1", home) == []  # runs with no score never match a comparison
    assert len(run_items("limit=2", home)) == 2


@pytest.mark.parametrize("text,why", [("colour=red", "unknown key 'colour'"), ("score>=high", "a number"),
                                      ("status>finished", "= or !="), ("limit=0", "positive whole"),
                                      ("status", "KEY=VALUE")])
def test_a_bad_runs_filter_names_the_term(text, why):
    from toolpath.curate.runs_source import parse_filter

    with pytest.raises(CurateError, match=why):
        parse_filter(text)


def test_a_run_is_exported_in_the_chat_fine_tuning_form_and_reads_back(runs_home, tmp_path):
    from toolpath.curate.runs_source import run_items

    home, tooled = runs_home
    [item] = run_items("benchmark=arith", home)
    assert "calculator(" in item.text and "tool calculator: 5" in item.text
    out = tmp_path / "sft.jsonl"
    assert write_jsonl([item], out) == 1
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    messages = row["messages"]
    assert [m["role"] for m in messages][:2] == ["system", "user"]
    call = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "2+3"}
    result = next(m for m in messages if m["role"] == "tool" and m["name"] == "calculator")
    assert result["tool_call_id"] == call["id"] and result["content"] == "5"

    from datasets import load_dataset

    loaded = load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    back = [{k: v for k, v in m.items() if v is not None} for m in loaded[0]["messages"]]
    assert back == messages


def test_texts_are_exported_as_text_rows(tmp_path):
    out = tmp_path / "texts.jsonl"
    write_jsonl([Item("a.txt", "first"), Item("b.txt", "second")], out)
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"text": "first"}, {"text": "second"}]


def test_an_export_that_cannot_be_written_says_where_and_leaves_the_old_file(tmp_path):
    with pytest.raises(CurateError, match="no folder"):
        write_jsonl([Item("a", "x")], tmp_path / "missing" / "out.jsonl")
    with pytest.raises(CurateError, match="a folder"):
        write_jsonl([Item("a", "x")], tmp_path)


def test_worked_examples_come_first_as_answered_turns_and_the_text_last(proxy):
    import dataclasses

    shots = (("the model reads a paragraph", "yes"), ("no no no", "no"))
    roomy = dataclasses.replace(proxy, context=4096)  # the tiny tokenizer spends a token on most letters
    text = proxy.tokenizer.decode(askllm.prompt_ids(roomy, "knowledge of the world", shots=shots))
    assert text.count("contain informative signal for pre-training") == 3
    first, second, last = text.split("<|im_start|>user\n")[1:]
    assert "###\nthe model reads a paragraph\n###" in first and first.endswith("<|im_start|>assistant\nyes<|im_end|>\n")
    assert second.endswith("<|im_start|>assistant\nno<|im_end|>\n")
    assert last.startswith("###\nknowledge of the world\n###") and last.endswith("<|im_start|>assistant\n")
    plain = askllm.prompt_ids(proxy, "knowledge of the world")  # no examples: the paper's prompt alone
    assert proxy.tokenizer.decode(plain).count("contain informative signal") == 1


def test_examples_longer_than_the_context_are_one_clear_error(proxy):
    with pytest.raises(CurateError, match=r"context of 256 tokens leaves no room .* --askllm-shots none"):
        askllm.score(proxy, TEXTS)  # the tiny model's 256 tokens cannot hold the built-in examples


def test_builtin_examples_answer_both_ways_and_none_is_the_zero_shot_prompt():
    from toolpath.curate.askllm_shots import BUILTIN, read_shots

    assert read_shots(None) == read_shots("builtin") == BUILTIN
    assert {answer for _, answer in BUILTIN} == {"yes", "no"}
    assert read_shots("none") == ()


def test_examples_from_a_file_and_each_bad_line_named(tmp_path):
    from toolpath.curate.askllm_shots import read_shots

    good = tmp_path / "shots.jsonl"
    good.write_text('{"text": "A paragraph.", "answer": "Yes"}\n\n{"text": "buy buy", "answer": "no"}\n')
    assert read_shots(str(good)) == (("A paragraph.", "yes"), ("buy buy", "no"))
    for body, why in (('{"text": "x", "answer": "maybe"}\n', r"shots.jsonl:1: answer must be yes or no"),
                      ('{"text": "x", "answer": "no"}\nnot json\n', r"shots.jsonl:2: not JSON"),
                      ('{"answer": "no"}\n', r"shots.jsonl:1: expected .* non-empty text"),
                      ("\n", "no examples")):
        good.write_text(body)
        with pytest.raises(CurateError, match=why):
            read_shots(str(good))
    with pytest.raises(CurateError, match="expected builtin, none or a JSONL file"):
        read_shots(str(tmp_path / "missing.jsonl"))
