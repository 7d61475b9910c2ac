"""Prefix reuse on the torch backend (policies/prefix_cache.py): a tiny random model answers a multi-call
conversation the same with and without earlier calls' KV state, the stored states stay within their byte bound
(least recently used out first), and each policy step records how many of its tokens were prefilled and reused."""

import threading

import pytest

from toolpath.spec import ModelSpec, parse_spec
from toolpath.state import Message, StepRecord, ToolCall

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = "You are a careful agent. What is 2+3? calculator expression answer result 5 tool user assistant system"
CALC = {"name": "calculator", "description": "Evaluate arithmetic.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from tiny_lm import save_tiny_chat_lm

    folder = tmp_path_factory.mktemp("tiny-chatml")
    tok = save_tiny_chat_lm(folder, WORDS + CHATML)
    tok.chat_template = CHATML
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def policy(tiny):
    from toolpath.policies.hf import HFPolicy

    return HFPolicy.from_path(str(tiny), ModelSpec(name=f"hf:{tiny}", max_new_tokens=8))


def without_reuse(policy, **options):
    from toolpath.policies.hf import HFPolicy

    spec = policy.spec.model_copy(update={"options": {"prefix_cache_mb": 0, **options}})
    return HFPolicy(policy.model, policy.tokenizer, spec, policy.name)


def recording(policy):
    """The policy, with the token ids each generate() produced appended to the returned list."""
    ids, generate = [], policy._generate

    def _generate(inputs, kwargs):
        out, stats = generate(inputs, kwargs)
        ids.append(out[0].tolist())
        return out, stats

    policy._generate = _generate
    return ids


def conversation(question: str, rounds: int):
    """The transcripts of a react episode's policy calls: each round adds the model's call and its result."""
    messages = [Message(role="system", content="You are a careful agent."), Message(role="user", content=question)]
    for i in range(rounds):
        yield list(messages)
        call = ToolCall(id=f"c{i}", name="calculator", arguments={"expression": "2+3"})
        messages += [Message(role="assistant", content="", tool_calls=[call]),
                     Message(role="tool", content="5", name="calculator", tool_call_id=f"c{i}")]


def ask_all(policy, rounds=3):
    """Two episodes sharing the system prompt and tools, `rounds` calls each."""
    return [policy.respond(m, [CALC]) for q in ("What is 2+3?", "What is 5?") for m in conversation(q, rounds)]


def test_greedy_outputs_are_the_same_token_ids_with_and_without_reuse(policy):
    from toolpath.policies.hf import HFPolicy

    fresh = HFPolicy(policy.model, policy.tokenizer, policy.spec, policy.name)  # an empty prefix cache
    plain = without_reuse(policy)
    assert fresh.prefix is not None and plain.prefix is None
    reused_ids, plain_ids = recording(fresh), recording(plain)
    reused, baseline = ask_all(fresh), ask_all(plain)
    assert reused_ids == plain_ids and [r.raw for r in reused] == [r.raw for r in baseline]
    assert all(r.prefill_tokens + r.reused_tokens == r.tokens_in for r in reused)
    assert [r.reused_tokens for r in baseline] == [0] * 6 and reused[0].reused_tokens == 0
    # every later call, in the episode and in the next one (same system prompt and tools), starts from kept state
    assert all(r.reused_tokens > 0 for r in reused[1:])
    assert sum(r.prefill_tokens for r in reused) < sum(r.prefill_tokens for r in baseline) / 2


def test_concurrent_callers_get_what_a_lone_caller_gets(policy):
    from toolpath.policies.hf import HFPolicy

    lone = [r.raw for r in ask_all(without_reuse(policy), rounds=2)]
    shared = HFPolicy(policy.model, policy.tokenizer, policy.spec, policy.name)
    results, errors = {}, []

    def worker(i):
        try:
            results[i] = [r.raw for r in ask_all(shared, rounds=2)]
        except Exception as err:  # noqa: BLE001 — reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == {0: lone, 1: lone}
    assert shared.prefix.nbytes <= shared.prefix.max_bytes


def fake_cache(length: int, fill: float = 0.0):
    """A DynamicCache of 2 layers holding `length` tokens (keys and values: 1 x 2 heads x length x 4, float32)."""
    import torch
    from transformers.cache_utils import DynamicCache

    kv = torch.full((1, 2, length, 4), fill)
    return DynamicCache(ddp_cache_data=[(kv, kv), (kv, kv)])


def test_the_byte_bound_evicts_the_least_recently_used():
    import torch

    from toolpath.policies.prefix_cache import PrefixCache

    per_token = 2 * 2 * 2 * 4 * 4  # layers x (keys, values) x heads x head size x float32 bytes
    cache = PrefixCache(max_bytes=25 * per_token)
    a, b, c = (torch.arange(10) + start for start in (0, 100, 200))
    cache.store(a, fake_cache(10, 1.0))
    cache.store(b, fake_cache(10, 2.0))
    assert cache.lookup(torch.cat([a, torch.tensor([7])])).reused == 10  # a is now the most recently used
    cache.store(c, fake_cache(10, 3.0))  # over the bound: b, the least recently used, goes
    assert len(cache) == 2 and cache.nbytes == 20 * per_token
    assert cache.lookup(torch.cat([b, torch.tensor([7])])).reused == 0
    hit = cache.lookup(torch.cat([c[:6], torch.tensor([999, 998])]))
    assert hit.reused == 6 and hit.cache.get_seq_length() == 6 and float(hit.cache.layers[0].keys[0, 0, 0, 0]) == 3.0
    # extending the copy leaves the store as it was
    hit.cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), 0)
    assert cache.lookup(torch.cat([c, torch.tensor([7])])).reused == 10
    cache.store(torch.arange(40), fake_cache(40))  # larger than the whole bound: not kept, nothing evicted for it
    assert len(cache) == 2
    cache.store(torch.cat([c, torch.tensor([5, 6])]), fake_cache(12, 3.0))  # extends c: replaces it
    assert len(cache) == 2 and cache.nbytes == 22 * per_token


def test_a_kv_cache_kind_or_zero_megabytes_turns_reuse_off(tiny, policy):
    from toolpath.policies.hf import HFPolicy

    quantized = HFPolicy.from_path(str(tiny), ModelSpec(name=f"hf:{tiny}", max_new_tokens=4,
                                                        options={"kv_cache": "kivi:4"}))
    assert quantized.prefix is None and without_reuse(policy).prefix is None
    first, second = (quantized.respond(m, [CALC]) for m in conversation("What is 2+3?", 2))
    assert (second.reused_tokens, second.prefill_tokens) == (0, second.tokens_in)
    with pytest.raises(ValueError, match=r"options.prefix_cache_mb must be a number of MiB from 0 \(off\)"):
        ModelSpec(options={"prefix_cache_mb": "lots"})


def test_policy_steps_record_prefilled_and_reused_tokens(tiny, policy, store):
    from toolpath.agents.episode import run_episode

    spec = parse_spec({"id": "t", "instruction": "What is 2+3?", "limits": {"max_steps": 2},
                       "model": {"name": f"hf:{tiny}", "max_new_tokens": 8}})
    runs = [run_episode(spec, store, policy=policy) for _ in range(2)]
    steps = [StepRecord.from_row(s) for r in runs for s in store.steps(r.run_id) if s["node"] == "policy"]
    assert steps and all(s.prefill_tokens + s.reused_tokens == s.tokens_in for s in steps)
    later = [s for s in store.steps(runs[1].run_id) if s["node"] == "policy"]
    assert StepRecord.from_row(later[0]).reused_tokens > 0  # the second episode starts from the first one's prompt


def test_loading_keeps_a_thread_count_the_user_set(tiny, monkeypatch):
    import torch

    from toolpath.policies.hf import HFPolicy

    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    try:
        HFPolicy.from_path(str(tiny), ModelSpec(name=f"hf:{tiny}", max_new_tokens=8))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
