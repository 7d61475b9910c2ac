"""ChanMix's sink layer and its ablation options (toolpath/policies/kvcache/sink_layer.py, chanmix.py) on tiny
tensors and a tiny random Llama."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_kvcache import calibrated, logits_through, tiny_llama, with_outliers  # noqa: E402

from toolpath.policies import kvcache  # noqa: E402
from toolpath.policies.kvcache import quant  # noqa: E402


def test_sink_tokens_stay_exact_and_out_of_their_group():
    from toolpath.policies.kvcache.quantized_layer import QuantizedLayer
    from toolpath.policies.kvcache.sink_layer import SinkLayer

    layer = SinkLayer(quant.ChannelCodec(2, 8), quant.TokenCodec(2, 8), group=8, residual=8, sinks=2)
    plain = QuantizedLayer(quant.ChannelCodec(2, 8), quant.TokenCodec(2, 8), group=8, residual=8)
    x = with_outliers((1, 2, 27, 16))
    x[..., 0, :] *= 50  # a sink far from every other key
    layer.update(x[..., :1, :], x[..., :1, :])  # the first step holds only a sink
    plain.update(x[..., :1, :], x[..., :1, :])
    k, v = layer.update(x[..., 1:5, :], x[..., 1:5, :])
    plain.update(x[..., 1:5, :], x[..., 1:5, :])
    for t in range(5, 27):
        k, v = layer.update(x[..., t:t + 1, :], x[..., t:t + 1, :])
        plain.update(x[..., t:t + 1, :], x[..., t:t + 1, :])
        assert torch.equal(k[..., :2, :], x[..., :2, :]) and torch.equal(v[..., :2, :], x[..., :2, :])
    # blocks, residual and bytes where the plain layer has them, plus the sinks' own bytes
    assert (layer.get_seq_length(), layer.stored, layer.keys.shape) == (27, 24, plain.keys.shape)
    sinks = 2 * (2 * 2 * 16) * 4  # keys and values, 2 heads x 2 tokens x 16 channels in float32
    assert layer.nbytes() == plain.nbytes() + sinks
    # the first block's ranges never saw the sink: its other tokens are quantized as if it were token 2
    alone = quant.ChannelCodec(2, 8)
    block = torch.cat([x[..., 2:3, :], x[..., 2:3, :], x[..., 2:8, :]], dim=-2)
    assert torch.equal(k[..., 2:8, :], alone.decode(alone.encode(block), 16, torch.float32)[..., 2:, :])
    assert torch.equal(k[..., 8:24, :], alone.decode(alone.encode(x[..., 8:24, :]), 16, torch.float32))


@pytest.mark.parametrize("classes", ["both", "keys", "values", "none"])
def test_chanmix_options_choose_the_classes_side_and_the_sinks(home, classes):
    from toolpath.policies.kvcache.chanmix import MixedCodec
    from toolpath.policies.kvcache.sink_layer import SinkLayer

    model = tiny_llama()
    calibrated(model, home)
    cache = kvcache.attach(model, "chanmix", {"bits": 2, "classes": classes, "sinks": 3})
    layer = cache.layers[0]
    assert isinstance(layer, SinkLayer) and layer.sinks == 3
    assert isinstance(layer.key_codec, MixedCodec) == (classes in ("both", "keys"))
    assert isinstance(layer.value_codec, MixedCodec) == (classes in ("both", "values"))
    ids = torch.randint(0, 128, (1, 40), generator=torch.Generator().manual_seed(4))
    out = model.generate(ids, max_new_tokens=30, do_sample=False, cache=cache)
    assert out.shape[1] == 70 and cache.get_seq_length() == 69


def test_chanmix_without_sinks_decodes_as_the_plain_quantized_layer(home):
    from toolpath.policies.kvcache.cache import KVCache
    from toolpath.policies.kvcache.quantized_layer import QuantizedLayer

    model = tiny_llama()
    calibrated(model, home)
    ids = torch.randint(0, 128, (1, 60), generator=torch.Generator().manual_seed(5))
    cache = kvcache.attach(model, "chanmix", {"bits": 2, "sinks": 0})
    plain = KVCache([QuantizedLayer(layer.key_codec, layer.value_codec, 32, 32) for layer in cache.layers])
    assert torch.equal(logits_through(model, ids, cache), logits_through(model, ids, plain))
    with pytest.raises(ValueError, match="kv_cache.classes"):
        kvcache.attach(model, "chanmix", {"bits": 2, "classes": "queries"})
