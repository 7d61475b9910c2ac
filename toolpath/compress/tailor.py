"""`toolpath compress MODEL --method tailor`: GPTailor's layer tailoring.

Candidates are the base model and fine-tuned variants of it (given by `candidates=PATH,PATH`, or two made and
cached: tailor_finetune). A zero-order search (tailor_search) picks which layers to remove, where each kept layer
comes from (a candidate or a task-arithmetic merge) and each kept layer's output scale, maximising the share of
the base model's score on calibration data (tailor_data, tailor_layers.share). The result is written as a plain
transformers folder with fewer decoder layers, which `model: hf:OUT` loads.

Options (tailor_options.py): remove=N or keep=SHARE (default keep=0.75), trials=N (40), seed=N (0),
candidates=PATH,PATH, objective=ppl:W,acc:W (ppl:0.5,acc:0.5), finetune_steps=N (8), calib_blocks=N (2).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..spec import ModelSpec
from . import tailor_data
from .tailor_finetune import default_candidates
from .tailor_layers import Composer, Plan, Workbench, angular_block, block_influence, evaluate, share
from .tailor_options import TailorOptions
from .tailor_search import Search

CALIB_LENGTH = 128
CALIB_TRANSCRIPTS_PER_BLOCK = 1.5  # transcripts are about twice a block's length; keep the two parts comparable


def load_source(source: str):
    """(model, tokenizer, cache key) of a model name a spec accepts: `local`, `local:NAME` or `hf:PATH`."""
    from ..policies.hf import HFPolicy
    from ..policies.local import load_local

    kind = source.partition(":")[0]
    if kind == "local":
        policy = load_local(ModelSpec(name=source))
        key = source
    elif kind == "hf":
        policy = HFPolicy.from_spec(ModelSpec(name=source))
        key = "hf:" + str(Path(source.partition(":")[2]).expanduser().resolve())
    else:
        raise ValueError(f"tailor: source {source!r} is not a local model: use local, local:NAME or hf:PATH")
    return policy.model, policy.tokenizer, key


def load_candidate(path: Path):
    import torch
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from ..policies.model_files import check_model_folder

    try:
        check_model_folder(path)  # pickle weights refused, safetensors headers checked (a ValueError naming the file)
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, use_safetensors=True)
    except (OSError, ValueError, SafetensorError) as err:
        raise ValueError(f"tailor option 'candidates': cannot load {path}: {err}") from err
    return model.eval()


def calibration(tokenizer, opts: TailorOptions, split: str = "calibration"):
    english = tailor_data.english_blocks(tokenizer, split, opts.calib_blocks, CALIB_LENGTH)
    n_episodes = max(1, round(opts.calib_blocks * CALIB_TRANSCRIPTS_PER_BLOCK))
    transcripts = tailor_data.transcripts(tokenizer, split, n_episodes)
    return english, transcripts


def tailor(base, tokenizer, candidates: list, names: list[str], opts: TailorOptions, log=print) -> dict:
    """Run the search; returns {'plan', 'value', 'trials', 'base', 'workbench', ...} (the plan is not written)."""
    english, transcripts = calibration(tokenizer, opts)
    composer = Composer(base, candidates)
    n_layers = composer.n_layers
    n_remove = opts.target_removed(n_layers)
    base_metrics = evaluate(base, english, transcripts)
    influence = block_influence(base, english + transcripts)
    angular = angular_block(base, english + transcripts, n_remove)
    bench = Workbench(composer)

    def objective(plan: Plan):
        metrics = evaluate(bench.model(plan), english, transcripts)
        return share(metrics, base_metrics, opts.objective), metrics

    search = Search(objective, n_layers, n_remove, len(candidates), influence, opts.seed)
    result = search.run(opts.trials, angular)
    return {"plan": result.best, "value": result.best_value, "trials": result.trials, "base": base_metrics,
            "influence": influence, "angular": angular, "n_layers": n_layers, "n_remove": n_remove,
            "workbench": bench, "calibration": tailor_data.describe(len(english), CALIB_LENGTH, len(transcripts),
                                                                    "calibration")}


def write(model, tokenizer, base, out: Path) -> None:
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(str(out))


class Tailor:
    """GPTailor: decoder layers removed, the kept ones drawn from fine-tuned candidates and rescaled."""

    name = "tailor"
    packs = False  # writes a plain transformers folder with fewer layers, no packed weights
    Options = TailorOptions

    def compress(self, source: str, out: Path, *, options: TailorOptions, log) -> dict:
        return _compress(source, Path(out), options, log)


KIND = Tailor()


def _compress(source: str, out: Path, opts: TailorOptions, log) -> dict:
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"tailor: output folder {out} is not empty")
    log = log or print
    started = time.perf_counter()
    base, tokenizer, key = load_source(source)
    opts.target_removed(base.config.num_hidden_layers)  # a bad target fails before any fine-tune starts
    paths = opts.candidates or default_candidates(base, tokenizer, key, opts.finetune_steps, opts.seed, log)
    names = ["base"] + [p.name for p in paths]
    candidates = [load_candidate(p) for p in paths]
    found = tailor(base, tokenizer, candidates, names, opts, log)
    plan: Plan = found["plan"]
    model = found["workbench"].model(plan)
    out.mkdir(parents=True, exist_ok=True)
    write(model, tokenizer, base, out)
    return {
        "layers": {"before": found["n_layers"], "after": len(plan.keep), "kept": plan.keep,
                   "removed": [i for i in range(found["n_layers"]) if i not in plan.keep]},
        "per_layer": plan.describe(names),
        "candidates": [{"name": n, "path": str(p)} for n, p in zip(names[1:], paths)],
        "objective": {"weights": opts.objective, "definition": "w_ppl*ppl_base/ppl + w_acc*acc/acc_base, over the "
                      "sum of weights, on the calibration data", "best": round(found["value"], 6),
                      "base": found["base"]},
        "output_scale": "applied: multiplies each kept layer's o_proj and down_proj weights",
        "block_influence": [round(v, 6) for v in found["influence"]],
        "angular_block": found["angular"],
        "trials": found["trials"],
        "calibration": found["calibration"],
        "seed": opts.seed,
        "seconds": round(time.perf_counter() - started, 1),
    }
