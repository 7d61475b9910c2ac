"""VCD, Visual Contrastive Decoding (Leng et al., CVPR 2024): contrast the model's logits on the image with its
logits on the image noised by a diffusion forward step (noise.py), within a plausibility cut (contrast.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .options import STRICT


class Options(BaseModel):
    """model.options.decoding: {kind: vcd, alpha, beta, noise_step, schedule, seed}."""

    model_config = STRICT
    alpha: float = Field(1.0, gt=0, description="weight of the contrast: (1+α)·l(v) − α·l(v')")
    beta: float = Field(0.1, gt=0, le=1,
                        description="plausibility cut: keep tokens with p ≥ β·max p under the real image")
    noise_step: int = Field(500, ge=0, le=999, description="diffusion step t of v' in a 1000-step schedule")
    schedule: Literal["sigmoid", "linear"] = Field(
        "sigmoid", description="β schedule of the diffusion: sigmoid (the reference's) or linear (DDPM's)")
    seed: int = Field(0, ge=0, description="seed of the noise (the same v' every call: temperature 0 is deterministic)")


class VCD:
    name = "vcd"
    Options = Options

    def build(self, model: Any, processor: Any, inputs: dict, options: Options, home: Path):
        from .contrast import ContrastiveLogits
        from .noise import diffuse
        from .session import Decoding, Tally

        tally = Tally()
        with tally.timed():
            noised = diffuse(inputs["pixel_values"], options.noise_step, seed=options.seed, schedule=options.schedule)
        contrastive = ContrastiveLogits(model, inputs, noised, alpha=options.alpha, beta=options.beta, tally=tally)
        return Decoding(self.name, options, processors=[contrastive], tally=tally)


KIND = VCD()
