"""Train the small Mixtral-architecture model the MoE bit-allocation benchmark quantizes
(toolpath/compress/tiny_moe.py).

    python benchmarks/train_tiny_moe.py [--steps N] [--seed S] [--out DIR] [--force] [--json]

Writes $TOOLPATH_HOME/models/tiny-moe (config, weights, tokenizer, router_init.safetensors, training.json) and
reuses it when present. It takes the CPU for several minutes: run it with `nice`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from toolpath.compress.tiny_moe import train
from toolpath.paths import models_dir


def default_dir() -> Path:
    return models_dir() / "tiny-moe"


def ensure(out: Path | None = None, *, steps: int = 800, seed: int = 0, force: bool = False, log=print) -> Path:
    """The trained model's folder, training it first when it is missing (or `force`)."""
    out = out or default_dir()
    if force or not (out / "router_init.safetensors").is_file():
        train(out, steps=steps, seed=seed, lr=4e-3, log=log)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--force", action="store_true", help="train again even if the folder exists")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = ensure(args.out, steps=args.steps, seed=args.seed, force=args.force,
                 log=lambda s: print(s, file=sys.stderr, flush=True))
    info = json.loads((out / "training.json").read_text(encoding="utf-8"))
    print(json.dumps({"folder": str(out), **info}) if args.json else
          f"{out}: {info['steps']} steps, final loss {info['final_loss']:.3f}, {info['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
