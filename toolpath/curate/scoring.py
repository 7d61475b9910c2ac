"""Scoring items with the chosen scorer, and the densities a density selection needs."""

from __future__ import annotations

from ..progress import Progress
from .items import CurateError, Item

SCORES = ("askllm", "density", "perplexity")


def score_items(items: list[Item], kind: str, model: str = "local", options: dict | None = None,
                batch: int = 8, shots: str | None = None) -> list[float]:
    """Each item's score by `kind` (higher: keep), also stored in item.scores; askllm and perplexity load the
    proxy model `model` with `options` (model.options: engine, weights). `shots`: AskLLM's worked examples,
    builtin (None), none or a JSONL file (askllm_shots.read_shots)."""
    texts = [item.text for item in items]
    if kind not in SCORES:
        raise CurateError(f"--score {kind!r}: expected one of {', '.join(SCORES)}")
    from .askllm_shots import read_shots

    examples = read_shots(shots)  # a bad file fails before any model loads
    if kind != "density":
        from .proxy import checked_spec

        checked_spec(model, options or {}, every_position=kind == "perplexity")  # a bad model fails, items or not
    if not items:
        return []
    if kind == "density":
        scores = [float(d) for d in densities(items)]
    else:
        from .proxy import load_proxy

        proxy = load_proxy(model, options or {}, every_position=kind == "perplexity")
        with Progress(f"{kind} with {proxy.name} on {proxy.engine}", total=len(texts), unit="texts") as stage:
            if kind == "askllm":
                from .askllm import score

                scores = score(proxy, texts, batch=batch, stage=stage, shots=examples)
            else:
                from .perplexity import score

                scores = score(proxy, texts, stage=stage)
    for item, value in zip(items, scores):
        item.scores[kind] = value
    return scores


def densities(items: list[Item]):
    """The kernel density of each item among them (cached in item.scores['density'])."""
    if all("density" in item.scores for item in items):
        return [item.scores["density"] for item in items]
    from .density import embeddings, kernel_density

    with Progress("embedding for density", total=len(items), unit="texts") as stage:
        values = kernel_density(embeddings([item.text for item in items], stage))
    for item, value in zip(items, values):
        item.scores["density"] = float(value)
    return [float(v) for v in values]
