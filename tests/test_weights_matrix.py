"""Every combination of model.options.weights, kv_cache and decoding either runs or is refused when the spec loads:
here each one runs, on a tiny random text Llama (every weights x kv_cache) and a tiny random LLaVA (decoding with
every weights option and every kv_cache), one model load per weights option."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_vlm_backend import build_tiny_llava, picture  # noqa: E402
from tiny_lm import save_tiny_chat_lm  # noqa: E402

from toolpath.policies.hf import HFPolicy  # noqa: E402
from toolpath.spec import WEIGHTS, ModelSpec  # noqa: E402
from toolpath.state import Message  # noqa: E402

# budgets below the prompt's length, so the sparse kinds select
KV_CACHES = [None, "kivi:2", "chanmix:2", "quest:32", "icecache:48"]
DECODINGS = [None, "vcd", {"kind": "shield", "parts": ["inherent"]}]  # SHIELD's other parts need a real CLIP
PROMPT = "Say hi to the world and tell me the answer, yes or no. " * 3


@pytest.fixture(autouse=True)
def one_thread(home):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models gain nothing from threads on a shared machine
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    save_tiny_chat_lm(root / "lm", PROMPT)
    build_tiny_llava(root / "vlm")
    return root


def options(weights, kv_cache, decoding):
    return {"weights": weights, **({"kv_cache": kv_cache} if kv_cache else {}),
            **({"decoding": decoding} if decoding else {})}


def test_every_combination_is_accepted_when_the_spec_loads():
    for weights in WEIGHTS:
        for kv in KV_CACHES:
            for decoding in DECODINGS:
                spec = ModelSpec(name="hf:/x", options=options(weights, kv, decoding))
                assert spec.options["weights"] == weights


def answer(base, weights, kv, decoding, images):
    """The loaded model of `base` answered under a spec with these options (the policy's checks at load run)."""
    spec = ModelSpec(name=base.spec.name, max_new_tokens=2, options=options(weights, kv, decoding))
    policy = HFPolicy(base.model, base.tokenizer, spec, base.name, processor=base.processor)
    r = policy.respond([Message(role="user", content=PROMPT, images=images)], [])
    assert r.tokens_out > 0, (weights, kv, decoding)
    assert (r.cache_bytes or 0) > 0 if kv else r.cache_bytes is None, (weights, kv, decoding)
    if decoding:
        assert r.decoding["kind"] == (decoding if isinstance(decoding, str) else decoding["kind"])
    return r


@pytest.mark.parametrize("weights", WEIGHTS)
def test_each_kv_cache_runs_with_each_weights_option_on_a_text_model(weights, folders):
    base = HFPolicy.from_spec(ModelSpec(name=f"hf:{folders / 'lm'}", options={"weights": weights}))
    for kv in KV_CACHES:
        answer(base, weights, kv, None, [])


# Each (kv_cache, decoding) pair once, the i-th on WEIGHTS[i % 4]: every weights option then meets every
# decoding too (weights x kv_cache is the text model's test).
VLM_CASES = [(kv, decoding) for kv in KV_CACHES for decoding in DECODINGS]


@pytest.mark.parametrize("w", range(len(WEIGHTS)))
def test_weights_kv_cache_and_decoding_run_together_on_a_vlm(w, folders, tmp_path):
    weights = WEIGHTS[w]
    base = HFPolicy.from_spec(ModelSpec(name=f"hf:{folders / 'vlm'}", options={"weights": weights}))
    image = picture(tmp_path / "red.png", (200, 30, 30))
    cases = VLM_CASES[w::len(WEIGHTS)]
    assert {str(decoding) for _, decoding in cases} == {str(d) for d in DECODINGS}
    for kv, decoding in cases:
        answer(base, weights, kv, decoding, [image])
    if weights == "int8":
        chanmix_counts_the_language_model_only(base)


def chanmix_counts_the_language_model_only(base):
    from toolpath.policies.kvcache import calibrate

    every = [n for n, m in base.model.named_modules() if n.endswith("self_attn") and hasattr(m, "q_proj")]
    decoder = calibrate.decoder_attention(base.model)
    text_layers = base.model.config.get_text_config().num_hidden_layers
    assert len(every) > text_layers == len(decoder)  # the vision tower's attention is not counted
    prof = calibrate.profile(base.model)
    assert len(prof["layers"]) == text_layers
