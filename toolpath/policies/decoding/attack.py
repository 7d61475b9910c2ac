"""SHIELD's answer to vulnerability: a small adversarial perturbation of the image that makes the CLIP image
embedding stop matching the first caption. The perturbed image feeds the contrastive branch (contrast.py), so
tokens the model would still say about an image that no longer shows its content are pushed down.

As in the reference's CW-style attack: δ starts at zero; x = clip(x₀ + c·δ) within the normalised range of real
pixels; Adam on δ minimises the CLIP similarity logit (logit_scale · cosine) of x and the caption; δ is clipped to
[−ε, ε] after each step (so the perturbation is bounded by c·ε in normalised units); it stops early once every
image's similarity is below zero. Unlike the reference it runs on the model's own pixel tensor (resized to the
CLIP's input size where they differ), on any device, in float32 whatever the model's dtype, and needs no gradient
of the CLIP's weights.
"""

from __future__ import annotations

from typing import Any


def _features(output: Any):
    """get_*_features returns the embedding, or (newer transformers) an output holding it as pooler_output."""
    import torch

    return output if isinstance(output, torch.Tensor) else output.pooler_output


def adversarial_image(clip: Any, tokenizer: Any, pixel_values: Any, caption: str, *, epsilon: float, steps: int,
                      lr: float, scale: float, mean: list[float], std: list[float]):
    """(the perturbed pixel_values in their dtype and device, the Adam steps taken)."""
    import torch
    import torch.nn.functional as F

    device = clip.device
    size = clip.config.vision_config.image_size
    with torch.inference_mode(False), torch.enable_grad():
        x0 = pixel_values.detach().clone().to(device, torch.float32)
        m = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        low, high = (0 - m) / s, (1 - m) / s
        limit = clip.config.text_config.max_position_embeddings
        enc = tokenizer(caption, truncation=True, max_length=limit, return_tensors="pt").to(device)
        with torch.no_grad():
            text = F.normalize(_features(clip.get_text_features(**enc)), dim=-1)
        delta = torch.zeros_like(x0, requires_grad=True)
        optimizer = torch.optim.Adam([delta], lr=lr)
        taken = 0
        for _ in range(steps):
            x = torch.maximum(torch.minimum(x0 + scale * delta, high), low)
            if tuple(x.shape[-2:]) != (size, size):
                x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
            image = F.normalize(_features(clip.get_image_features(pixel_values=x)), dim=-1)
            similarity = clip.logit_scale.exp() * (image @ text.T).squeeze(-1)
            if bool((similarity < 0).all()):
                break
            (grad,) = torch.autograd.grad(similarity.sum(), delta)
            optimizer.zero_grad()
            delta.grad = grad
            optimizer.step()
            with torch.no_grad():
                delta.clamp_(-epsilon, epsilon)
            taken += 1
        adversarial = torch.maximum(torch.minimum(x0 + scale * delta.detach(), high), low)
    return adversarial.to(pixel_values.device, pixel_values.dtype), taken
