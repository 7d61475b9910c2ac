"""The sparse KV caches (quest, icecache) on a tiny random Llama: exactness at an infinite budget, the
selection machinery, the clustered page store and option checking."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolpath import kinds  # noqa: E402
from toolpath.policies import kvcache  # noqa: E402
from toolpath.policies.kvcache import chanmix, icecache, kivi, quest, quest_layer  # noqa: E402
from toolpath.policies.kvcache import sparse_attention as sa  # noqa: E402
from toolpath.policies.kvcache.icecache_index import ClusterIndex, cluster  # noqa: E402

KINDS = {"quest": quest, "icecache": icecache}


def attach(model, kind, **options):
    return kvcache.attach(model, kind, options)


def validate(kind, options):
    return kinds.options(KINDS[kind].KIND, options, "kv_cache")


def tiny_llama(layers=4, attn="sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         attn_implementation=attn)
    return LlamaForCausalLM(config).eval()


def generate(model, ids, cache, n=12, mask=None):
    return model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                          cache=cache, output_logits=True, return_dict_in_generate=True, pad_token_id=0)


def assert_same(ref, out, tol=1e-5):
    assert torch.equal(ref.sequences, out.sequences)
    assert max((a - b).abs().max().item() for a, b in zip(ref.logits, out.logits)) <= tol


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread avoids OpenMP spin-waits on a loaded machine (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


@pytest.fixture(scope="module")
def prompt():
    torch.manual_seed(1)
    return torch.randint(1, 96, (1, 90))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("budget", [None, math.inf, "inf", 100_000])
def test_unbounded_budget_reproduces_dynamic_cache(model, prompt, kind, budget):
    from transformers import DynamicCache

    ref = generate(model, prompt, DynamicCache())
    out = generate(model, prompt, attach(model, kind, budget=budget))
    assert_same(ref, out)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_sparse_path_selecting_everything_matches_dense(kind, attn):
    """Force the sparse path with a selection that covers every token: the gathered attention equals dense,
    also for a padded batch (the model's mask follows the selected positions)."""
    from transformers import DynamicCache

    model = tiny_llama(attn=attn)
    torch.manual_seed(2)
    ids = torch.randint(1, 96, (2, 70))
    mask = torch.ones_like(ids)
    mask[1, :9] = 0
    ref = generate(model, ids, DynamicCache(), mask=mask)
    budget = 16 * 40 if kind == "quest" else 4 + 16 + 16 * 40
    cache = attach(model, kind, budget=budget, dense_layers=1)
    for layer in cache.layers[1:]:
        layer.wants_sparse = lambda q: q == 1  # sparse from the first decode step on
    out = generate(model, ids, cache, mask=mask)
    assert cache.decode_steps() == 11
    assert_same(ref, out, tol=1e-4)


def test_quest_page_scores_match_brute_force():
    torch.manual_seed(3)
    keys = torch.randn(1, 2, 37, 8)
    query = torch.randn(1, 4, 8)
    kmax, kmin = quest_layer.page_bounds(keys, 16)
    scores = quest_layer.page_scores(query, kmax, kmin)
    for h in range(4):
        for p in range(3):
            page = keys[0, h // 2, p * 16:(p + 1) * 16]
            hi, lo = page.max(0).values, page.min(0).values
            want = sum(max(query[0, h, d] * hi[d], query[0, h, d] * lo[d]).item() for d in range(8))
            assert scores[0, h, p].item() == pytest.approx(want, rel=1e-5, abs=1e-5)
            assert scores[0, h, p] >= (page @ query[0, h]).max() - 1e-5  # an upper bound of every q.k


def test_quest_selection_respects_budget_and_keeps_the_current_page(model, prompt):
    cache = attach(model, "quest", budget=48)
    generate(model, prompt, cache, n=5)
    layer = cache.layers[3]
    sel = layer.last_selection  # [B, Hq, n]
    t = layer.get_seq_length()
    assert ((sel >= 0).sum(-1) <= 48).all()
    assert (sel == t - 2).any(-1).all()  # the newest stored token's page (the step attended t - 1 keys)
    assert len(cache.layers) == model.config.num_hidden_layers


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_first_two_layers_stay_dense(kind):
    model = tiny_llama(layers=5)
    torch.manual_seed(4)
    cache = attach(model, kind, budget=48)
    generate(model, torch.randint(1, 96, (1, 80)), cache, n=4)
    steps = [getattr(layer, "sparse_steps", 0) for layer in cache.layers]
    assert len(steps) == 5
    assert steps[:2] == [0, 0] and all(s == 3 for s in steps[2:])


@pytest.mark.parametrize("select, score", [("query", "key"), ("kv", "key"), ("query", "bound"), ("query", "centroid")])
def test_icecache_selection_respects_budget(model, prompt, select, score):
    cache = attach(model, "icecache", budget=52, select=select, score=score)
    generate(model, prompt, cache, n=6)
    layer = cache.layers[2]
    sel = layer.last_selection  # [B, Hq, n] when each query head chooses, else [B, Hkv, n]
    assert sel.shape[1] == (4 if select == "query" else 2)
    assert ((sel >= 0).sum(-1) <= 52).all()
    t = layer.get_seq_length()
    for head in sel.flatten(0, 1):
        valid = head[head >= 0]
        assert valid.unique().numel() == valid.numel()  # no token twice
        assert set(range(4)) <= set(valid.tolist())  # the sinks
        assert set(range(t - 16, t)) <= set(valid.tolist())  # the recent window, the new token included


def test_icecache_query_heads_choose_their_own_best_page(model, prompt):
    """Each query head's selection holds its own best-scoring page; the KV head's near pool holds the union."""
    cache = attach(model, "icecache", budget=52)
    generate(model, prompt, cache, n=3)
    layer = cache.layers[3]
    b, h, d = layer.shape
    query = layer.last_query[:, :, -1].reshape(b * h, -1, d)
    scores = layer.index.scores(query)  # [G, Hg, pages]
    sel = layer.last_selection.view(b * h, scores.shape[1], -1)
    for g in range(b * h):
        for j in range(scores.shape[1]):
            best = int(scores[g, j].argmax())
            page_tokens = layer.index.pos[g, best][layer.index.pos[g, best] >= 0]
            assert set(page_tokens.tolist()) <= set(sel[g, j].tolist())
        near = set(layer.near_page[g][layer.near_page[g] >= 0].tolist())
        assert {int(scores[g, j].argmax()) for j in range(scores.shape[1])} <= near


def check_index(index: ClusterIndex, n_tokens: int):
    pos = index.pos[index.pos >= 0]
    per_group = index.pos.flatten(1)
    for g in range(index.groups):
        p = per_group[g][per_group[g] >= 0]
        assert sorted(p.tolist()) == list(range(n_tokens))  # every token in exactly one cluster
    assert pos.numel() == index.groups * n_tokens
    assert (index.count <= index.page_size).all()
    assert torch.equal(index.count, (index.pos >= 0).sum(-1))
    for g in range(index.groups):
        for page in range(int(index.pages[g])):
            m = index.pos[g, page] >= 0
            keys = index.far.keys[g, page][m].float()
            assert torch.allclose(index.kmax[g, page], keys.max(0).values)
            assert torch.allclose(index.kmin[g, page], keys.min(0).values)


def test_clustering_invariants_through_build_and_splits():
    torch.manual_seed(5)
    index = ClusterIndex(groups=3, page_size=8, dim=6, dtype=torch.float32)
    keys = torch.randn(3, 100, 6)
    index.build(keys, keys * 2, torch.arange(100))
    check_index(index, 100)
    built = index.pages.clone()
    for t in range(100, 160):
        k = torch.randn(3, 6)
        index.insert(k, k, t)
    check_index(index, 160)
    assert (index.pages > built).all()  # full clusters split into new pages


def test_clustering_splits_identical_keys_and_groups_similar_ones():
    same = torch.zeros(40, 4)
    page, pages = cluster(same, torch.zeros(40, dtype=torch.long), 1, 8)
    assert int(pages[0]) >= 5 and torch.bincount(page).max() <= 8
    torch.manual_seed(6)
    centres = torch.randn(4, 16) * 10
    points = centres.repeat_interleave(8, 0) + 0.01 * torch.randn(32, 16)
    page, pages = cluster(points, torch.zeros(32, dtype=torch.long), 1, 8)
    assert int(pages[0]) == 4
    assert all(page[i * 8:(i + 1) * 8].unique().numel() == 1 for i in range(4))


def test_page_scores_rank_by_the_best_key_and_the_bound_stays_above_it():
    """`key` is the largest q.k in each page (brute force); Quest's bound and the centroid score are the ablations."""
    torch.manual_seed(7)
    index = ClusterIndex(groups=2, page_size=8, dim=6, dtype=torch.float32)
    keys = torch.randn(2, 60, 6)
    index.build(keys, keys, torch.arange(60))
    query = torch.randn(2, 3, 6)
    best = index.scores(query)
    bound = index.scores(query, rule="bound")
    centroid = index.scores(query, rule="centroid")
    for g in range(2):
        for page in range(int(index.pages[g])):
            members = index.pos[g, page][index.pos[g, page] >= 0]
            qk = query[g] @ keys[g, members].T  # [3, members]
            assert torch.allclose(best[g, :, page], qk.max(1).values, atol=1e-5)
            assert (bound[g, :, page] >= best[g, :, page] - 1e-5).all()
            assert torch.allclose(centroid[g, :, page], qk.mean(1), atol=1e-5)
    empty = index.count == 0
    assert torch.isneginf(best.masked_select(empty.unsqueeze(1))).all()
    with pytest.raises(ValueError, match="rule"):
        index.scores(query, rule="median")


def test_bytes_moved_counts_pages_brought_near(model, prompt):
    cache = attach(model, "icecache", budget=52)
    ids = generate(model, prompt, cache, n=2).sequences
    layer = cache.layers[2]
    page_bytes = 2 * 16 * 16 * 4  # K and V, page_size x head_dim x fp32
    assert cache.decode_steps() == 1
    first = sum(layer.bytes_moved for layer in cache.layers[2:])
    near = sum(int((layer.near_page >= 0).sum()) for layer in cache.layers[2:])
    assert first == near * page_bytes and first > 0
    assert cache.bytes_moved() == first
    model(ids[:, -1:], cache=cache)
    assert layer.bytes_moved <= 2 * layer.near_page.numel() * page_bytes  # at most every slot, each step


def test_mmap_far_store_matches_memory(model, prompt, home):
    a = generate(model, prompt, attach(model, "icecache", budget=52))
    cache = attach(model, "icecache", budget=52, far="mmap", far_dir=str(home / "far"))  # only under TOOLPATH_HOME
    b = generate(model, prompt, cache)
    assert_same(a, b, tol=0)
    assert any((home / "far").iterdir())
    assert cache.layers[2].far_nbytes() > 0 and cache.nbytes() > cache.layers[2].far_nbytes()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_generate_with_small_budget(model, prompt, kind):
    cache = attach(model, kind, budget=48)
    out = generate(model, prompt, cache, n=10)
    assert out.sequences.shape == (1, 100)
    assert cache.decode_steps() == 9 and cache.nbytes() > 0


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("options, field", [
    ({"budget": 0}, "budget"), ({"budget": -5}, "budget"), ({"budget": "lots"}, "budget"),
    ({"budget": 2.5}, "budget"), ({"budget": True}, "budget"), ({"budget": 8}, "budget"),
    ({"page_size": 0}, "page_size"), ({"dense_layers": -1}, "dense_layers"), ({"pages": 3}, "pages"),
])
def test_bad_options_name_the_field(kind, options, field):
    with pytest.raises(ValueError, match=rf"kv_cache\.{field}"):
        validate(kind, options)


def test_icecache_specific_options():
    with pytest.raises(ValueError, match=r"kv_cache\.far"):
        validate("icecache", {"far": "disk"})
    with pytest.raises(ValueError, match=r"kv_cache\.score"):
        validate("icecache", {"score": "median"})
    with pytest.raises(ValueError, match=r"kv_cache\.budget: must be at least"):
        validate("icecache", {"budget": 30})
    assert validate("icecache", {"budget": "64"}).budget == 64
    assert validate("quest", {}).budget == math.inf


def test_refuse_sliding_window_models():
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen2Config

    mistral = MistralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, sliding_window=32)
    gemma = Gemma3TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=16, sliding_window=32)
    for kind in (kivi.KIND, chanmix.KIND, quest.KIND, icecache.KIND):  # one rule for every kind
        assert "sliding" in kind.refuse(mistral)
        assert "sliding" in kind.refuse(gemma)
        assert kind.refuse(LlamaConfig(num_hidden_layers=2)) is None
        assert kind.refuse(Qwen2Config(num_hidden_layers=2, use_sliding_window=False)) is None
    from transformers import MistralForCausalLM

    with pytest.raises(ValueError, match="quest cannot run"):
        attach(MistralForCausalLM(mistral), "quest", budget=64)


def test_attention_function_falls_back_for_other_caches(model, prompt):
    from transformers import DynamicCache

    attach(model, "quest", budget=32)
    assert model.config._attn_implementation == sa.PREFIX + "sdpa"
    ref = generate(tiny_llama(), prompt, DynamicCache())
    assert_same(ref, generate(model, prompt, DynamicCache()))
