"""SHIELD's answer to statistical bias: re-weight the image's visual tokens by how well they match the tokens of a
first caption, so that the patches the caption is about count more than the ones the encoder merely over-activates.

    sim[p, k]   cosine of patch p (max-pooled to the text width) and caption token k (text encoder states)
    kept        caption tokens whose best patch similarity exceeds the threshold
    s[p]        max_k∈kept sim[p, k]
    w           s min-max scaled to [0, 1], raised to γ, scaled again; w ≤ gain set to 0
    f'          f − w_b·bias + f·w          (bias: inherent.py; either part may be off)

Everything is per image (a row of `features`). When no caption token clears the threshold the best one is kept
rather than dropping the part (the reference indexes an empty selection and fails); a single kept token is an
ordinary case (the reference's squeeze() collapsed it to a scalar index).
"""

from __future__ import annotations

from typing import Any


def stretch(values: Any, gamma: float):
    """Min-max scale along the last dimension, raise to γ, min-max scale again; a flat row becomes zeros."""
    import torch

    def unit(x):
        low = x.min(dim=-1, keepdim=True).values
        span = x.max(dim=-1, keepdim=True).values - low
        return torch.where(span < 1e-6, torch.zeros_like(x), (x - low) / span.clamp_min(1e-6))

    return unit(unit(values).pow(gamma))


def similarity(features: Any, text: Any):
    """[images, patches, caption tokens] cosine similarities, in float32."""
    import torch.nn.functional as F

    pooled = F.adaptive_max_pool1d(features.float(), text.shape[-1])
    return F.normalize(pooled, dim=-1) @ F.normalize(text.float().to(features.device), dim=-1).T


def patch_weights(features: Any, text: Any, *, threshold: float, gamma: float, gain: float):
    """(weights [images, patches], kept [images, caption tokens] bool, fell_back [images] bool)."""
    import torch

    sim = similarity(features, text)
    kept = sim.max(dim=1).values > threshold
    fell_back = ~kept.any(dim=-1)
    if bool(fell_back.any()):
        best = sim.max(dim=1).values.argmax(dim=-1)
        kept[fell_back, best[fell_back]] = True
    per_patch = sim.masked_fill(~kept[:, None, :], -torch.inf).max(dim=-1).values
    weights = stretch(per_patch, gamma)
    weights = torch.where(weights <= gain, torch.zeros_like(weights), weights)
    return weights, kept, fell_back


def reshape_features(features: Any, weights: Any = None, bias: Any = None, bias_weight: float = 0.0):
    """f − w_b·bias + f·w, in the features' dtype."""
    out = features
    if bias is not None:
        out = out - bias_weight * bias.to(features.device, features.dtype)
    if weights is not None:
        out = out + features * weights.to(features.dtype)[..., None]
    return out
