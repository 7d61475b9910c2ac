"""VCD's distorted image v': one forward step of a diffusion process applied to the processed pixels.

    x_t = sqrt(ᾱ_t)·x_0 + sqrt(1 − ᾱ_t)·ε,   ᾱ_t = Π_{s≤t} (1 − β_s),   ε ~ N(0, I),   t in [0, 1000)

The β schedule is VCD's own (vcd_utils/vcd_add_noise.py): β = 1e-5 + (5e-3 − 1e-5)·sigmoid(linspace(−6, 6, 1000)),
a sigmoid ramp, not DDPM's linear one; `linear` (DDPM's 1e-4 → 0.02) is kept as an option. As in the reference the
noise is added to the normalised tensor the model reads and is not clipped. The noise comes from a generator seeded
on the CPU and then moved, so v' is the same for a seed on every device (temperature 0 stays deterministic).
"""

from __future__ import annotations

from typing import Any

STEPS = 1000
SCHEDULES = ("sigmoid", "linear")


def betas(schedule: str = "sigmoid"):
    import torch

    if schedule == "sigmoid":
        return torch.sigmoid(torch.linspace(-6, 6, STEPS, dtype=torch.float64)) * (5e-3 - 1e-5) + 1e-5
    if schedule == "linear":
        return torch.linspace(1e-4, 0.02, STEPS, dtype=torch.float64)
    raise ValueError(f"decoding.schedule: must be one of {', '.join(SCHEDULES)}, got {schedule!r}")


def signal_fraction(step: int, schedule: str = "sigmoid") -> float:
    """ᾱ_t: how much of the image's variance survives step t."""
    import torch

    if not 0 <= step < STEPS:
        raise ValueError(f"decoding.noise_step: must be in [0, {STEPS - 1}], got {step}")
    return float(torch.cumprod(1 - betas(schedule), dim=0)[step])


def diffuse(pixel_values: Any, step: int, *, seed: int = 0, schedule: str = "sigmoid"):
    """x_t of the processed pixels (any shape, dtype, device)."""
    import torch

    keep = signal_fraction(step, schedule)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    eps = torch.randn(pixel_values.shape, generator=generator, dtype=torch.float32)
    x0 = pixel_values.detach().float()
    out = keep ** 0.5 * x0 + (1 - keep) ** 0.5 * eps.to(x0.device)
    return out.to(pixel_values.dtype)
