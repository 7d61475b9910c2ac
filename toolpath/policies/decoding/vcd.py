"""VCD, Visual Contrastive Decoding (Leng et al., CVPR 2024): contrast the model's logits on the image with its
logits on the image noised by a diffusion forward step (noise.py), within a plausibility cut (contrast.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .options import choice, integer, known_only, number

OPTIONS = {
    "alpha": "weight of the contrast: (1+α)·l(v) − α·l(v'); default 1.0, > 0",
    "beta": "plausibility cut: keep tokens with p ≥ β·max p under the real image; default 0.1, in (0, 1]",
    "noise_step": "diffusion step t of v' in a 1000-step schedule; default 500",
    "schedule": "β schedule of the diffusion: sigmoid (the reference's) or linear (DDPM's); default sigmoid",
    "seed": "seed of the noise (the same v' every call: temperature 0 is deterministic); default 0",
}


def validate(options: dict[str, Any]) -> dict[str, Any]:
    known_only(options, OPTIONS, "vcd")
    return {"alpha": number(options, "alpha", 1.0, above=0),
            "beta": number(options, "beta", 0.1, above=0, at_most=1),
            "noise_step": integer(options, "noise_step", 500, minimum=0, maximum=999),
            "schedule": choice(options, "schedule", "sigmoid", ("sigmoid", "linear")),
            "seed": integer(options, "seed", 0, minimum=0)}


def build(model: Any, processor: Any, inputs: dict, options: dict, home: Path):
    from .contrast import ContrastiveLogits
    from .noise import diffuse
    from .session import Decoding, Tally

    tally = Tally()
    with tally.timed():
        noised = diffuse(inputs["pixel_values"], options["noise_step"], seed=options["seed"],
                         schedule=options["schedule"])
    contrastive = ContrastiveLogits(model, inputs, noised, alpha=options["alpha"], beta=options["beta"], tally=tally)
    return Decoding("vcd", options, processors=[contrastive], tally=tally)
