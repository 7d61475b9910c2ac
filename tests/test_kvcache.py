"""KV caches (toolpath/policies/kvcache): quantizers, the residual flush, the DynamicCache equivalence at 16 bits,
generate() with each quantized kind, the spec/CLI wiring and resume, on a tiny random Llama."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_kvcache_plugin import plugin  # noqa: E402, F401  (docs/examples' kind, registered for one test)

from toolpath.policies import kvcache  # noqa: E402
from toolpath.policies.kvcache import quant  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    # A tiny model gains nothing from threads, and the test machine's cores are shared.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_llama(seed: int = 0, layers: int = 2, vocab: int = 128):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return transformers.LlamaForCausalLM(cfg).eval()


def with_outliers(shape=(1, 2, 64, 64), seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[..., 3] *= 40  # outlier channels, as real keys have
    x[..., min(17, shape[-1] - 1)] += 25
    return x


# ---- quantizers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("n", [1, 7, 8, 13, 64])
def test_packing_round_trips_at_any_length(bits, n):
    q = torch.randint(0, 1 << bits, (2, 3, 5, n), dtype=torch.uint8)
    packed = quant.pack(q, bits)
    assert packed.dtype == torch.uint8 and packed.shape[-1] == -(-n * bits // 8)  # dense: no padding per code
    assert torch.equal(quant.unpack(packed, bits, n), q)


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_channel_codec_error_is_within_half_a_step_per_channel(bits):
    x = with_outliers()
    codec = quant.ChannelCodec(bits, 32)
    parts = codec.encode(x)
    y = codec.decode(parts, 64, torch.float32)
    xg = x.reshape(1, 2, 2, 32, 64)
    step = (xg.amax(3) - xg.amin(3)) / ((1 << bits) - 1)  # per channel and token group
    bound = step.repeat_interleave(32, dim=2) * 0.5 + 1e-2 * x.abs()  # + float16 rounding of scale and zero
    assert ((y - x).abs() <= bound + 1e-3).all()
    # the outlier channel keeps its own range: the other channels' error does not grow with it
    normal = [c for c in range(64) if c not in (3, 17)]
    assert (y - x)[..., normal].abs().max() < 4.5 / ((1 << bits) - 1) * 1.2 + 0.05


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("channels", [64, 40])
def test_token_codec_error_is_within_half_a_step_per_token_group(bits, channels):
    x = with_outliers((1, 2, 5, channels))
    codec = quant.TokenCodec(bits, 32)
    y = codec.decode(codec.encode(x), channels, torch.float32)
    assert y.shape == x.shape
    width = codec.width(channels)
    assert width == (32 if channels == 64 else 40)  # 40 channels: one group, not 32 + 8
    for lo in range(0, channels, width):
        g = x[..., lo:lo + width]
        step = (g.amax(-1, keepdim=True) - g.amin(-1, keepdim=True)) / ((1 << bits) - 1)
        assert ((y[..., lo:lo + width] - g).abs() <= step * 0.5 + 1e-2 * g.abs() + 1e-3).all()


def test_fp8_codec_keeps_relative_precision_of_outlier_channels():
    x = with_outliers()
    codec = quant.FP8Codec(32)
    y = codec.decode(codec.encode(x), 64, torch.float32)
    assert ((y - x).abs() <= 0.07 * x.abs().amax(2, keepdim=True)).all()


# ---- the KIVI layer ------------------------------------------------------------------------------------------

def test_residual_flush_at_odd_lengths_quantizes_each_block_once():
    from toolpath.policies.kvcache.quantized_layer import QuantizedLayer

    layer = QuantizedLayer(quant.ChannelCodec(2, 8), quant.TokenCodec(2, 8), group=8, residual=16)
    x = with_outliers((1, 2, 45, 16))
    k, v = layer.update(x[..., :13, :], x[..., :13, :] * 2)
    assert torch.equal(k, x[..., :13, :])  # the prompt's own attention sees it exactly
    assert layer.stored == 0 and layer.get_seq_length() == 13
    layer.update(x[..., 13:19, :], x[..., 13:19, :] * 2)  # residual 19 >= 16: flush 16, keep 3
    assert layer.stored == 16 and layer.keys.shape[-2] == 3 and layer.get_seq_length() == 19
    first_block = [t.clone() for t in layer._kstore]
    for t in range(19, 45):  # one token at a time
        k, v = layer.update(x[..., t:t + 1, :], x[..., t:t + 1, :] * 2)
        assert k.shape[-2] == t + 1 and v.shape[-2] == t + 1
        assert torch.equal(k[..., -1:, :], x[..., t:t + 1, :])
    assert layer.stored == 32 and layer.get_seq_length() == 45
    # the first flushed block is untouched by later flushes (never re-quantized)
    assert all(torch.equal(a[:, :, :first.shape[2]], first) for a, first in zip(layer._kstore, first_block))
    # packed bytes: 2 bits per element, plus float16 scales and zeros, plus the full-precision residual
    packed = layer._kstore[0]
    assert packed.dtype == torch.uint8 and packed.shape == (1, 2, 32, 2 * 16 // 8)
    codes = 2 * (2 * 32 * 16 * 2 // 8)  # keys and values, 2 heads x 32 tokens x 16 channels at 2 bits
    key_scales = 2 * (2 * (32 // 8) * 16) * 2  # scale and zero, per channel and group of 8 tokens, float16
    value_scales = 2 * (2 * 32 * (16 // 8)) * 2  # scale and zero, per token and group of 8 channels
    residual = 2 * (2 * 13 * 16) * 4  # 13 recent tokens in float32
    assert layer.nbytes() == codes + key_scales + value_scales + residual


def logits_through(model, ids, cache):
    with torch.no_grad():
        out = model(ids[:, :20], cache=cache, use_cache=True)
        logits = [out.logits]
        for t in range(20, ids.shape[1]):
            out = model(ids[:, t:t + 1], cache=cache, use_cache=True)
            logits.append(out.logits)
    return torch.cat(logits, dim=1)


@pytest.mark.parametrize("kind", ["kivi", "chanmix"])
def test_bits_16_reproduces_dynamic_cache_exactly(kind):
    model = tiny_llama()
    ids = torch.randint(0, 128, (1, 70), generator=torch.Generator().manual_seed(3))
    ref = logits_through(model, ids, transformers.DynamicCache(config=model.config))
    got = logits_through(model, ids, kvcache.attach(model, kind, {"bits": 16}))
    assert (got - ref).abs().max() < 1e-5
    a = model.generate(ids[:, :30], max_new_tokens=30, do_sample=False)
    b = model.generate(ids[:, :30], max_new_tokens=30, do_sample=False, cache=kvcache.attach(model, kind, {"bits": 16}))
    assert torch.equal(a, b)


@pytest.mark.parametrize("bits", [2, 4])
def test_kivi_generates_and_stores_fewer_bytes(bits):
    model = tiny_llama()
    ids = torch.randint(0, 128, (1, 40), generator=torch.Generator().manual_seed(4))
    cache = kvcache.attach(model, "kivi", {"bits": bits})
    out = model.generate(ids, max_new_tokens=60, do_sample=False, cache=cache)
    assert out.shape[1] == 100
    full = kvcache.attach(model, "kivi", {"bits": 16})
    model.generate(ids, max_new_tokens=60, do_sample=False, cache=full)
    assert cache.get_seq_length() == full.get_seq_length() == 99
    assert cache.nbytes() < full.nbytes() * (0.5 if bits == 4 else 0.4)


def test_kivi_4_bit_logits_stay_close_to_full():
    model = tiny_llama()
    ids = torch.randint(0, 128, (1, 90), generator=torch.Generator().manual_seed(5))
    ref = logits_through(model, ids, kvcache.attach(model, "kivi", {"bits": 16})).softmax(-1)
    got = logits_through(model, ids, kvcache.attach(model, "kivi", {"bits": 4})).softmax(-1)
    assert (got - ref).abs().max() < 0.05


# ---- chanmix ---------------------------------------------------------------------------------------------------

def skewed_costs(n=48, seed=0):
    """Per-channel costs at each level as calibration measures them: error falling with bits, a few channels
    (outliers, or read by large queries) far costlier than the rest."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.rand(n, generator=g) ** 4 * 100 + 0.01
    return {str(b): (weight / ((1 << b) - 1) ** 2).tolist() for b in (1, 2, 3, 4)} | {"8": (weight * 1e-4).tolist()}


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_allocation_hits_the_requested_average(bits):
    from toolpath.policies.kvcache.chanmix import allocate

    costs = skewed_costs()
    alloc = allocate(costs, bits)
    assert sum(alloc) == bits * len(alloc) and set(alloc) <= {1, 2, 3, 4}
    if bits == 2:  # the costliest channels get the most bits, the cheapest the fewest: several classes
        order = sorted(range(len(alloc)), key=lambda c: costs["1"][c])
        assert alloc[order[-1]] == 4 and alloc[order[0]] == 1 and len(set(alloc)) >= 3


def test_allocation_with_fp8_stays_within_the_budget():
    from toolpath.policies.kvcache.chanmix import allocate

    costs = skewed_costs()
    for level in costs:  # one extreme outlier channel, whose integer error fp8's relative precision beats
        costs[level][7] *= 1e4
    alloc = allocate(costs, 2, fp8=True)
    assert alloc[7] == 8 and 2 * len(alloc) - 3 <= sum(alloc) <= 2 * len(alloc)


def test_allocation_beats_uniform_bits_on_its_cost():
    from toolpath.policies.kvcache.chanmix import allocate

    costs = skewed_costs()
    alloc = allocate(costs, 2)
    assert sum(costs[str(b)][c] for c, b in enumerate(alloc)) < sum(costs["2"]) / 2


def calibrated(model, home):
    from toolpath.policies.kvcache import calibrate

    ids = torch.randint(0, 128, (1, 200), generator=torch.Generator().manual_seed(9))
    return calibrate.profile(model, ids=ids)


def test_calibration_profile_is_saved_per_model_and_reused(home):
    from toolpath.policies.kvcache import calibrate

    model = tiny_llama()
    prof = calibrated(model, home)
    path = calibrate.profile_path(model)
    assert path.parent == home / "kvcache" and path.is_file()
    assert len(prof["layers"]) == 2 and len(prof["layers"][0]["keys"]["2"]) == 2 * 16
    assert all(a >= b for a, b in zip(prof["layers"][0]["keys"]["1"], prof["layers"][0]["keys"]["4"]))
    assert calibrate.profile(model) == prof  # read back, not measured again (no ids, no tokenizer needed)
    assert calibrate.profile_path(tiny_llama(seed=1)) != path


@pytest.mark.parametrize("options", [{"bits": 2}, {"bits": 2, "fp8": True}, {"bits": 4}])
def test_chanmix_generates_with_its_classes(home, options):
    model = tiny_llama()
    calibrated(model, home)
    ids = torch.randint(0, 128, (1, 40), generator=torch.Generator().manual_seed(4))
    cache = kvcache.attach(model, "chanmix", options)
    out = model.generate(ids, max_new_tokens=60, do_sample=False, cache=cache)
    assert out.shape[1] == 100 and cache.get_seq_length() == 99
    full = kvcache.attach(model, "chanmix", {"bits": 16})
    model.generate(ids, max_new_tokens=60, do_sample=False, cache=full)
    assert cache.nbytes() < full.nbytes() * (0.5 if options["bits"] == 4 else 0.4)


@pytest.mark.parametrize("sizes", [[1], [3, 5], [7, 1, 13, 2], [64, 64, 64, 0]])
def test_stream_packing_of_mixed_widths_round_trips_in_whole_bytes_only(sizes):
    bits = [1, 2, 3, 4][:len(sizes)]
    codes = [torch.randint(0, 1 << b, (2, 1, 5, n), dtype=torch.uint8) for b, n in zip(bits, sizes)]
    packed = quant.pack_stream(codes, bits)
    assert packed.shape[-1] == -(-sum(b * n for b, n in zip(bits, sizes)) // 8)  # one padding, not one per class
    for q, back in zip(codes, quant.unpack_stream(packed, bits, sizes)):
        assert torch.equal(back, q)


def test_mixed_codec_round_trips_each_class():
    from toolpath.policies.kvcache.chanmix import MixedCodec

    x = with_outliers((1, 2, 64, 16))
    bits = [4, 1, 2, 2, 3, 8, 2, 1] * 4
    for per_token in (False, True):
        codec = MixedCodec(bits, heads=2, head_dim=16, group=32, per_token=per_token)
        y = codec.decode(codec.encode(x), 16, torch.float32)
        err = (y - x).abs().transpose(1, 2).reshape(64, 32).amax(0)  # per flattened channel
        scale = x.abs().transpose(1, 2).reshape(64, 32).amax(0)
        for c, b in enumerate(bits):
            if b == 8:
                assert err[c] <= 0.07 * scale[c]
            elif not per_token:
                assert err[c] <= scale[c] * 2 / ((1 << b) - 1) * 0.5 * 1.05 + 1e-3


def test_mixed_codec_codes_cost_the_average_bits_exactly():
    from toolpath.policies.kvcache.chanmix import MixedCodec

    bits = [4, 1, 2, 2, 3, 1, 2, 1] * 4  # 32 channels, 2 bits on average: 64 bits = 8 bytes per token
    for per_token in (False, True):
        codec = MixedCodec(bits, heads=2, head_dim=16, group=32, per_token=per_token)
        assert codec.encode(with_outliers((1, 2, 64, 16)))[0].shape[-1] == 8


def test_chanmix_without_a_profile_or_tokenizer_says_how(home):
    with pytest.raises(ValueError, match="calibrate.profile"):
        kvcache.attach(tiny_llama(seed=5), "chanmix", {"bits": 2})


# ---- options -------------------------------------------------------------------------------------------------

def kv_cache(value):
    from toolpath.policies.settings import setting

    return setting("kv_cache", value).dump()


def test_short_form_and_validation():
    assert kv_cache("chanmix:2") == {"kind": "chanmix", "bits": 2, "fp8": False, "sinks": 1, "classes": "both",
                                     "group": 32, "residual": 32}
    assert kv_cache("quest:256")["budget"] == 256 and kv_cache("quest:inf")["budget"] == float("inf")
    assert kv_cache("kivi:4") == {"kind": "kivi", "bits": 4, "group": 32, "residual": 32}
    with pytest.raises(ValueError, match=r"kv_cache.kind: unknown kind 'nope'"):
        kv_cache("nope:2")
    with pytest.raises(ValueError, match=r"kv_cache.bits: Input should be 2, 4 or 16 \(got 3\)"):
        kv_cache({"kind": "kivi", "bits": 3})
    with pytest.raises(ValueError, match=r"kv_cache.residual: must be a multiple of group \(32\)"):
        kv_cache({"kind": "kivi", "residual": 40})
    with pytest.raises(ValueError, match=r"kv_cache.bits: Input should be 1, 2, 3, 4 or 16 \(got 8\)"):
        kv_cache("chanmix:8")
    with pytest.raises(ValueError, match=r"kv_cache.fp8: Input should be a valid boolean"):
        kv_cache({"kind": "chanmix", "fp8": "yes"})
    with pytest.raises(ValueError, match=r"kv_cache.colour: kivi has no option 'colour'"):
        kv_cache({"kind": "kivi", "colour": 1})
    with pytest.raises(ValueError, match=r"kv_cache.bits: Input should be 2, 4 or 16 \(got 'two'\)"):
        kv_cache("kivi:two")


@pytest.mark.parametrize("kind", ["kivi", "chanmix", "quest", "icecache"])
def test_every_kind_reads_its_settings_by_the_same_rules(kind):
    """A number written as text is that number in every kind (`KIND:N` and --option give text); a bool or a
    fraction is no number of tokens or bits in any."""
    short = {"kivi": "bits", "chanmix": "bits", "quest": "budget", "icecache": "budget"}[kind]
    n = "4" if short == "bits" else "64"
    assert kv_cache({"kind": kind, short: n})[short] == int(n) == kv_cache(f"{kind}:{n}")[short]
    for bad in (True, 4.5, "four"):
        with pytest.raises(ValueError, match=rf"kv_cache\.{short}: "):
            kv_cache({"kind": kind, short: bad})


def test_sliding_window_models_are_refused_by_name():
    from toolpath.policies.kvcache import chanmix, icecache, kivi, quest

    qwen = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=128, vocab_size=128, max_window_layers=0)
    windowed = transformers.Qwen2Config(**qwen, use_sliding_window=True, sliding_window=16)
    unused = transformers.Qwen2Config(**qwen, use_sliding_window=False, sliding_window=16)  # kept, never used
    for kind in (kivi.KIND, chanmix.KIND, quest.KIND, icecache.KIND):
        assert "sliding" in kind.refuse(windowed)
        assert kind.refuse(unused) is None and kind.refuse(tiny_llama().config) is None


# ---- the wiring: spec, CLI, run record, resume ---------------------------------------------------------------

def test_spec_names_the_field_on_bad_kv_cache():
    from toolpath.spec import SpecError, TaskSpec, describe_errors

    def task(kv):
        return {"id": "t", "instruction": "x", "model": {"name": "local", "options": {"kv_cache": kv}}}

    def problems(kv):
        try:
            TaskSpec.model_validate(task(kv))
        except Exception as err:  # noqa: BLE001 — pydantic's ValidationError
            return str(SpecError("t.yaml", describe_errors(err)))
        return ""

    assert "model.options" in problems({"kind": "nope"})
    assert "kv_cache.kind: unknown kind 'nope'" in problems({"kind": "nope"})
    assert "kv_cache.kind: unknown kind 'nope'" in problems("nope:4")
    # the spec (floor 0) checks only the kind's name; its options are the policies floor's, checked once there
    from toolpath.policies.settings import settled

    spec = TaskSpec.model_validate(task("kivi:4"))
    assert settled(spec).model.options["kv_cache"] == {"kind": "kivi", "bits": 4, "group": 32, "residual": 32}
    bad = TaskSpec.model_validate(task("quest:0"))
    with pytest.raises(ValueError, match=r"^model\.options\.kv_cache\.budget: "):
        settled(bad)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama saved as a transformers folder, with a byte-level BPE tokenizer trained here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("tiny-llama")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["User: Assistant: final_answer tool_call answer the question"] * 4,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    fast.save_pretrained(folder)
    model = tiny_llama(layers=2, vocab=len(fast))
    model.config.eos_token_id = fast.eos_token_id
    model.save_pretrained(folder)
    return folder


def write_task(tmp_path, model_dir, kv_cache=None, steps=2):
    options = f", options: {{kv_cache: {kv_cache}}}" if kv_cache else ""
    path = tmp_path / "task.yaml"
    path.write_text(f"id: tiny\ninstruction: say w5\nmodel: {{name: 'hf:{model_dir}', max_new_tokens: 40{options}}}\n"
                    f"tools: [final_answer]\nlimits: {{max_steps: {steps}}}\n")
    return path


def policy_steps(store, run_id):
    return [s for s in store.steps(run_id) if s["node"] == "policy"]


def test_cli_run_records_the_cache_and_its_bytes_per_step(tmp_path, home, tiny_model_dir):
    import json

    from conftest import toolpath_cli

    from toolpath.runs import Store

    r = toolpath_cli("run", write_task(tmp_path, tiny_model_dir), "--kv-cache", "kivi:2", "--json", home=home,
                     timeout=300)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run_id"]
    store = Store(home)
    spec = json.loads(store.get_run(run_id)["spec"])
    assert spec["model"]["options"]["kv_cache"] == {"kind": "kivi", "bits": 2, "group": 32, "residual": 32}
    steps = policy_steps(store, run_id)
    assert steps and all(s["payload"]["cache_bytes"] > 0 for s in steps)

    bad = toolpath_cli("run", write_task(tmp_path, tiny_model_dir), "--kv-cache", "kivi:3", home=home)
    assert bad.returncode != 0 and "kv_cache.bits" in bad.stderr and "model.options" in bad.stderr


def test_a_run_with_a_plugin_cache(home, tiny_model_dir, plugin):  # noqa: F811 (the fixture)
    """docs/examples/plugin_kv_cache.py's kind, registered as TOOLPATH_PLUGINS does, runs an episode (its plain
    DynamicCache's bytes recorded per step); a bad option for it stops the run before it starts."""
    import json

    from test_kvcache_plugin import task

    from toolpath.agents.episode import EpisodeError, run_episode
    from toolpath.runs import Store

    folder = tiny_model_dir
    store = Store(home)
    result = run_episode(task("plain", f"hf:{folder}"), store)
    spec = json.loads(store.get_run(result.run_id)["spec"])
    assert spec["model"]["options"]["kv_cache"] == {"kind": "plain"}
    assert all(s["payload"]["cache_bytes"] > 0 for s in policy_steps(store, result.run_id))
    with pytest.raises(EpisodeError, match=r"model\.options\.kv_cache\.bits: plain has no option"):
        run_episode(task({"kind": "plain", "bits": 4}, f"hf:{folder}"), store)
    assert len(store.list_runs()) == 1  # the refused one never started


def test_refused_before_the_run_starts(tmp_path, home, tiny_model_dir, monkeypatch):
    from dataclasses import replace

    from toolpath import registry
    from toolpath.agents.episode import EpisodeError, run_episode
    from toolpath.policies.kvcache import kivi
    from toolpath.runs import Store
    from toolpath.spec import load_spec

    registry.add("kv_cache", "kivi", replace(kivi.KIND, refuse=lambda config: "it has sliding_attention layers"))
    try:
        store = Store(home)
        with pytest.raises(EpisodeError, match="kivi cannot run with .*sliding_attention"):
            run_episode(load_spec(write_task(tmp_path, tiny_model_dir, "{kind: kivi, bits: 4}")), store)
        assert store.list_runs() == []
    finally:
        registry.reset()


def test_resume_keeps_the_cache(tmp_path, home, tiny_model_dir):
    from toolpath.agents.episode import resume_episode, run_episode
    from toolpath.policies.base import load
    from toolpath.runs import Store
    from toolpath.spec import load_spec

    spec = load_spec(write_task(tmp_path, tiny_model_dir, "{kind: kivi, bits: 4}", steps=3))
    real = load(spec.model)
    assert real.kv_cache.kind == "kivi" and real.kv_cache.options.bits == 4

    class Interrupted(BaseException):
        pass

    class Dies:  # the run's process "dies" during its first model call (a random model's first answer may end it)
        name = real.name

        def respond(self, messages, tools, **generation):
            raise Interrupted

    store = Store(home)
    with pytest.raises(Interrupted):
        run_episode(spec, store, policy=Dies())
    (run,) = store.list_runs()
    store.update_run(run["id"], status="interrupted")
    result = resume_episode(run["id"], store)  # loads the model from the stored spec, cache settings included
    assert result.steps >= 1
    assert stored_spec(store, run["id"]).model.options["kv_cache"]["bits"] == 4
    steps = policy_steps(store, run["id"])
    assert len(steps) == result.steps and all(s["payload"]["cache_bytes"] > 0 for s in steps)


def stored_spec(store, run_id):
    from toolpath.spec import TaskSpec

    return TaskSpec.model_validate_json(store.get_run(run_id)["spec"])


@pytest.mark.slow  # an eval's agent takes several model turns: a minute or two on a busy CPU
def test_cli_eval_runs_every_sample_with_the_cache(tmp_path, home, tiny_model_dir):
    import json

    from conftest import toolpath_cli

    from toolpath.runs import Store

    r = toolpath_cli("eval", "arith", "--limit", "1", "--model", f"hf:{tiny_model_dir}", "--kv-cache", "kivi:4",
                     "--json", home=home, timeout=300)
    assert r.returncode == 0, r.stderr
    store = Store(home)
    (run,) = store.list_runs()
    assert json.loads(store.get_run(run["id"])["spec"])["model"]["options"]["kv_cache"]["bits"] == 4
    assert all(s["payload"]["cache_bytes"] > 0 for s in policy_steps(store, run["id"]))
    assert store.get_eval(json.loads(r.stdout)["eval_id"])["params"]["kv_cache"]["kind"] == "kivi"
    bad = toolpath_cli("eval", "arith", "--limit", "1", "--kv-cache", "lru:4", home=home)
    assert bad.returncode != 0 and "--kv-cache 'lru:4'" in bad.stderr and "unknown kind" in bad.stderr
