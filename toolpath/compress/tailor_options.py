"""The `tailor` method's options: strings from the command line, parsed and checked, each error naming its option."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

KNOWN = ("remove", "keep", "trials", "seed", "candidates", "objective", "finetune_steps", "calib_blocks")


@dataclass
class TailorOptions:
    remove: int | None = None        # layers to remove
    keep: float | None = None        # or the share of layers to keep (floor of layers × keep)
    trials: int = 40                 # objective evaluations of the whole search
    seed: int = 0
    candidates: list[Path] = field(default_factory=list)  # fine-tuned variants; empty: made and cached
    objective: dict[str, float] = field(default_factory=lambda: {"ppl": 0.5, "acc": 0.5})
    finetune_steps: int = 8          # optimizer steps of each default fine-tune
    calib_blocks: int = 2            # calibration blocks per data kind (English text, tool-call transcripts)

    def target_removed(self, layers: int) -> int:
        """How many of `layers` decoder layers to remove (at least one is removed, at least one kept)."""
        if self.remove is not None:
            n, name = self.remove, "remove"
        else:
            n, name = layers - math.floor(layers * (0.75 if self.keep is None else self.keep) + 1e-9), "keep"
        if not 0 < n < layers:
            raise ValueError(f"tailor option {name!r}: removing {n} of {layers} layers is not possible "
                             f"(remove at least one layer and keep at least one)")
        return n


# The highest value of each whole-number option: what one machine carries out in one sitting. A trial is one
# evaluation of the tailored model on the calibration blocks (seconds for a small model), a fine-tune step one
# optimizer step of a whole model, a calibration block 128 tokens of each data kind (the English text holds a
# few hundred); `remove` is bounded by the model's layers (target_removed); every candidate is a whole model
# in memory (MAX_CANDIDATES).
LIMITS = {"remove": (1, 10_000), "trials": (1, 2_000), "seed": (0, 2**32 - 1), "finetune_steps": (1, 10_000),
          "calib_blocks": (1, 512)}
MAX_CANDIDATES = 8


def _int(options: dict[str, str], name: str) -> int | None:
    if name not in options:
        return None
    low, high = LIMITS[name]
    try:
        value = int(str(options[name]).strip())
    except ValueError:
        raise ValueError(f"tailor option {name!r}: expected an integer, got {str(options[name])[:40]!r}") from None
    if value < low:
        raise ValueError(f"tailor option {name!r}: must be at least {low}, got {value}")
    if value > high:
        raise ValueError(f"tailor {name}: at most {high:,}, got {value}")
    return value


def _objective(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in str(text).split(","):
        key, sep, value = part.partition(":")
        key = key.strip()
        if not sep or key not in ("ppl", "acc"):
            raise ValueError(f"tailor option 'objective': expected weights like 'ppl:0.5,acc:0.5', got {text!r}")
        try:
            weights[key] = float(value)
        except ValueError:
            raise ValueError(f"tailor option 'objective': weight of {key!r} is not a number: {value!r}") from None
        if not math.isfinite(weights[key]) or weights[key] < 0:
            raise ValueError(f"tailor option 'objective': weight of {key!r} must be a finite number >= 0")
    if sum(weights.values()) <= 0:
        raise ValueError("tailor option 'objective': at least one weight must be above 0")
    return {"ppl": weights.get("ppl", 0.0), "acc": weights.get("acc", 0.0)}


def parse_options(options: dict[str, str] | None) -> TailorOptions:
    options = dict(options or {})
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        raise ValueError(f"unknown tailor option(s) {', '.join(unknown)}; options: {', '.join(KNOWN)}")
    if "remove" in options and "keep" in options:
        raise ValueError("tailor options 'remove' and 'keep' both name the target: give one of them")
    out = TailorOptions()
    out.remove = _int(options, "remove")
    if "keep" in options:
        try:
            out.keep = float(options["keep"])
        except ValueError:
            raise ValueError(f"tailor option 'keep': expected a share of layers like 0.75, got {options['keep']!r}") \
                from None
        if not 0 < out.keep < 1:
            raise ValueError(f"tailor option 'keep': must be between 0 and 1 (exclusive), got {out.keep}")
    out.trials = _int(options, "trials") or out.trials
    seed = _int(options, "seed")
    out.seed = out.seed if seed is None else seed
    out.finetune_steps = _int(options, "finetune_steps") or out.finetune_steps
    out.calib_blocks = _int(options, "calib_blocks") or out.calib_blocks
    if "objective" in options:
        out.objective = _objective(options["objective"])
    if "candidates" in options:
        paths = [Path(p.strip()).expanduser() for p in str(options["candidates"]).split(",") if p.strip()]
        if not paths:
            raise ValueError("tailor option 'candidates': expected folders separated by commas, got none")
        if len(paths) > MAX_CANDIDATES:
            raise ValueError(f"tailor candidates: at most {MAX_CANDIDATES} folders (each is a whole model in "
                             f"memory), got {len(paths)}")
        for p in paths:
            if not (p / "config.json").is_file():
                raise ValueError(f"tailor option 'candidates': {p} is not a model folder (no config.json)")
        out.candidates = paths
    return out
