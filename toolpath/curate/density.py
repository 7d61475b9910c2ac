"""Density sampling (Sachdeva et al. 2024): a kernel density estimate of each text in the embedding space of the
corpus, and inverse-propensity sampling, which draws texts with probability proportional to 1 / density, so a
sample covers the space (rare kinds of text as well as common ones) instead of mirroring its crowded regions.

The embeddings are the bundled MiniLM's (tools/search/rerank.py: mean-pooled, L2-normalised), the ones search
re-ranks with. The kernel is Gaussian, exp(-|x - y|^2 / h), with the bandwidth h a share (BANDWIDTH_SCALE) of
the median squared distance between texts unless given, so the estimate neither sees every text as alone nor
all as one crowd.
"""

from __future__ import annotations

from .items import CurateError

EMBED_BATCH = 32
ROWS = 1024  # kernel rows computed at once: memory stays ROWS x n, however large the corpus
# The kernel's width: a quarter of the median squared distance. Wider kernels flatten the density towards
# uniform sampling; benchmarks/curate.py measures coverage at several widths (docs/results/curate.md).
BANDWIDTH_SCALE = 0.25


def embeddings(texts: list[str], stage=None):
    """(n, 384) MiniLM embeddings of the texts."""
    import numpy as np

    from ..tools.search.rerank import RerankUnavailable, embed

    parts = []
    for start in range(0, len(texts), EMBED_BATCH):
        try:
            parts.append(embed(texts[start:start + EMBED_BATCH]))
        except RerankUnavailable as err:
            raise CurateError(f"density needs the MiniLM embedder: {err}") from None
        if stage is not None:
            stage.update(len(parts[-1]))
    return np.concatenate(parts).astype(np.float64)


def median_squared_distance(vectors) -> float:
    """The median squared distance between two of the vectors, from a seeded sample of at most 512 of them (the
    median moves little beyond that); 1.0 when they are all one point."""
    import numpy as np

    sample = vectors[np.random.default_rng(0).choice(len(vectors), size=min(len(vectors), 512), replace=False)]
    off = _squared_distances(sample, sample)[~np.eye(len(sample), dtype=bool)]
    median = float(np.median(off)) if off.size else 0.0
    return median if median > 0 else 1.0


def kernel_density(vectors, bandwidth: float | None = None, scale: float = BANDWIDTH_SCALE):
    """The mean Gaussian kernel between each vector and all of them (itself included), shape (n,). The bandwidth
    is `scale` times the median squared distance unless given."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float64)
    n = len(vectors)
    if bandwidth is None:
        bandwidth = scale * median_squared_distance(vectors)
    out = np.empty(n)
    for start in range(0, n, ROWS):
        d2 = _squared_distances(vectors[start:start + ROWS], vectors)
        out[start:start + ROWS] = np.exp(-d2 / bandwidth).mean(axis=1)
    return out


def _squared_distances(a, b):
    import numpy as np

    d2 = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T
    return np.maximum(d2, 0.0)


def inverse_propensity_sample(density, k: int, seed: int = 0) -> list[int]:
    """`k` indices drawn without replacement, each with probability proportional to 1 / its density."""
    import numpy as np

    density = np.asarray(density, dtype=np.float64)
    weights = 1.0 / np.maximum(density, 1e-12)
    chosen = np.random.default_rng(seed).choice(len(density), size=min(k, len(density)), replace=False,
                                                p=weights / weights.sum())
    return [int(i) for i in chosen]
