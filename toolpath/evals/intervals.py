"""Confidence intervals of an eval's score: percentile bootstrap, seeded, so a report is reproducible.

    bootstrap_ci(values)            the interval of a plain mean
    weighted_ci(values, weights)    the interval of a weighted mean (a score pooled over the set)
    mean_figure(values)             a benchmark script's figure: {"value", "ci", "n"}, rounded for a report
"""

from __future__ import annotations

# Bootstrap resamples per interval. Measured: an interval end moves by 0.002 (s.d. over seeds) at 300 0/1
# samples, 0.01 at 20, so the printed third decimal is stable from a few hundred samples on.
N_RESAMPLES = 2000
LEVEL = 0.95


def bootstrap_ci(values, n: int = N_RESAMPLES, seed: int = 0, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values`: (low, high).

    A resample of k values drawn with replacement has the same mean as a multinomial draw of counts over
    the distinct values, so for scores with few distinct values (0/1, graded) that is what is drawn: exact,
    and n × (distinct values) of work instead of n × k, which matters for thousands of 0/1 samples.
    """
    import numpy as np

    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        raise ValueError("bootstrap_ci: no values to resample")
    if not np.all(np.isfinite(v)):
        raise ValueError("bootstrap_ci: values must be finite numbers")
    if n < 1 or not 0 < level < 1:
        raise ValueError(f"bootstrap_ci: need n >= 1 and 0 < level < 1, got n={n}, level={level}")
    uniq, counts = np.unique(v, return_counts=True)
    if uniq.size == 1:
        return float(uniq[0]), float(uniq[0])
    rng = np.random.default_rng(seed)
    k = v.size
    if uniq.size <= 64:  # 0/1 or graded scores: draw counts per distinct value
        chunk = max(1, 1_000_000 // uniq.size)  # bound the memory of one draw
        means = np.concatenate([rng.multinomial(k, counts / k, size=min(chunk, n - i)) @ uniq / k
                                for i in range(0, n, chunk)])
    else:  # continuous scores: plain index resampling (the multinomial over k values would cost more)
        chunk = max(1, 4_000_000 // k)
        means = np.concatenate([v[rng.integers(0, k, size=(min(chunk, n - i), k))].mean(axis=1)
                                for i in range(0, n, chunk)])
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def weighted_ci(values, weights, n: int = N_RESAMPLES, seed: int = 0, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of a weighted mean (a pooled ratio such as VABench's points inside over
    all points): samples are resampled whole, each resample's Σ w·v / Σ w taken (0 where Σ w is 0)."""
    import numpy as np

    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    rng = np.random.default_rng(seed)
    chunk = max(1, 4_000_000 // v.size)
    means = []
    for i in range(0, n, chunk):
        idx = rng.integers(0, v.size, size=(min(chunk, n - i), v.size))
        tw = w[idx].sum(axis=1)
        means.append(np.divide((w[idx] * v[idx]).sum(axis=1), tw, out=np.zeros_like(tw), where=tw > 0))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(np.concatenate(means), [alpha, 1 - alpha])
    return float(lo), float(hi)


def mean_figure(values, digits: int = 4) -> dict:
    """A benchmark script's figure of a plain mean: {"value", "ci": [low, high], "n"}, rounded to `digits`;
    {"value": None, "ci": None, "n": 0} for no values (a subset a run did not reach)."""
    values = list(values)
    if not values:
        return {"value": None, "ci": None, "n": 0}
    low, high = bootstrap_ci(values)
    return {"value": round(sum(values) / len(values), digits), "ci": [round(low, digits), round(high, digits)],
            "n": len(values)}
