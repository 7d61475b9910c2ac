"""SHIELD's answer to inherent bias: what the vision encoder produces for images with no content at all. The mean of
its features over N uniform-noise images is the bias that reweight.reshape_features subtracts (weight w_b).

The features are the ones the projector receives (the selected layer, CLS dropped where the model drops it), taken by
running the model's own `get_image_features` with a capturing hook, so the bias lives in exactly the space it is
subtracted from. The noise images are uniform in pixel space [0, 1] and normalised like the model's images (the
reference put U[0, 1) straight into the normalised tensor, i.e. a narrow grey band rather than noise). The result is
cached per model (weights fingerprint, image shape, N, seed) under $TOOLPATH_HOME/decoding/ and in the process.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

_MEMO: dict[str, Any] = {}
CHUNK = 8  # noise images per encoder pass: bounds memory for large encoders


def noise_images(shape: tuple, count: int, mean: list[float], std: list[float], seed: int):
    """`count` uniform-noise images of shape (C, H, W), normalised with the processor's mean and std."""
    import torch

    generator = torch.Generator(device="cpu").manual_seed(seed)
    pixels = torch.rand((count, *shape), generator=generator)
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (pixels - m) / s


def projector_inputs(model: Any, projector: Any, pixel_values: Any):
    """The features `projector` receives when the model encodes `pixel_values`."""
    import torch

    seen: list = []

    def capture(module, args):
        seen.append(args[0].detach())

    handle = projector.register_forward_pre_hook(capture)
    try:
        with torch.no_grad():
            model.get_image_features(pixel_values=pixel_values)
    finally:
        handle.remove()
    if not seen:
        raise ValueError(f"decoding.shield: {type(model).__name__}.get_image_features did not go through its projector")
    return torch.cat(seen, dim=0)


def fingerprint(model: Any, parts: list[Any]) -> str:
    """A short hash of what makes the bias this model's: its class, config, and its encoder's and projector's
    weights (the model's one fingerprint, over those parts)."""
    from ..fingerprint import model_fingerprint

    return model_fingerprint(model, parts)


def inherent_bias(model: Any, projector: Any, encoder: Any, image_shape: tuple, *, count: int, seed: int,
                  mean: list[float], std: list[float], home: Path):
    """(bias [1, patches, width] float32 on the CPU, whether it came from the cache)."""
    from safetensors.torch import load_file, save_file

    key_text = json.dumps({"model": fingerprint(model, [encoder, projector]), "shape": list(image_shape),
                           "count": count, "seed": seed, "mean": list(mean), "std": list(std)}, sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
    if key in _MEMO:
        return _MEMO[key], True
    path = Path(home) / "decoding" / f"inherent-bias-{key}.safetensors"
    if path.is_file():
        bias = load_file(str(path))["bias"]
        _MEMO[key] = bias
        return bias, True
    device = next(projector.parameters()).device
    dtype = next(projector.parameters()).dtype
    images = noise_images(image_shape, count, mean, std, seed)
    total = None
    for start in range(0, count, CHUNK):
        chunk = images[start:start + CHUNK].to(device, dtype)
        features = projector_inputs(model, projector, chunk).float().sum(dim=0, keepdim=True)
        total = features if total is None else total + features
    bias = (total / count).cpu().contiguous()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    save_file({"bias": bias}, str(partial), metadata={"key": key_text})
    os.replace(partial, path)  # whole or absent: a crash never leaves a half-written cache entry
    _MEMO[key] = bias
    return bias, False
