"""EDT-Former's ablation on the tiny graph-LM, in one run: the same pretrained encoder and SmolLM2-135M, trained for
the same steps on the same dialogs with the same seed, several ways, then asked the same held-out questions.

    python benchmarks/molqa.py [--json] [--steps N] [--pretrain-steps N] [--eval-molecules M] [--seed S] [--toy]
                               [--ways dynamic,fixed,text] [--encoder FILE] [--built FOLDER]

- dynamic: one query token per entropy patch (the build's connector);
- dynamic-global: the same patch queries, each reading every atom (the reference's mask), not only its patch's;
- edt: the 8 fixed queries followed by one per patch, all reading every atom (EDT-Former's reference connector);
- fixed: a Q-Former-like connector with 8 learned queries, exactly as many parameters as the dynamic one;
- text: no graph at all, the molecule's SMILES written before the question (the LM's embeddings train alone);
- prior: no model and no molecule: per question kind, the one reply that scores best on the training molecules'
  questions. A way that does not beat it has learned the answers' distribution, not read the molecule.

Reported: each way's held-out accuracy (all, yes/no, numeric; toolpath's scorers; a bootstrap interval of all,
and of each pair's per-question difference), the connectors' parameter
counts, the dynamic tokens per molecule, each accuracy as a ratio against the text baseline, and the goals:
dynamic beats fixed by at least 3 points, both beat text, and the patcher's token count follows heavy-atom count
(Spearman's rho >= 0.8 on the held-out molecules). `--toy` runs the tests' toy sizes with a tiny random LM made
here (the mechanics in seconds; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WAYS = ("dynamic", "dynamic-global", "edt", "fixed", "text", "prior")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def built_dynamic(folder: Path, cfg, seed: int):
    """The dynamic way as a build of the same configuration and seed trained it: (the loaded model, its
    connector figures). A ValueError when the folder's report says another configuration or seed."""
    from toolpath.policies.molm import model as mm
    from toolpath.train import tiny_molm as tm

    report_file = Path(folder) / tm.REPORT
    if not report_file.is_file():
        raise ValueError(f"{folder}: no {tm.REPORT} (not a tiny-molm build)")
    report = json.loads(report_file.read_text(encoding="utf-8"))
    expected = json.loads(json.dumps(dataclasses.asdict(cfg)))  # tuples as the report's JSON lists
    differs = sorted(k for k in expected if k not in ("eval_molecules", "eval_per_molecule")
                     and report["config"].get(k) != expected[k])
    if report.get("seed") != seed or report["config"].get("connector_kind") != "dynamic" or differs:
        raise ValueError(f"{report_file}: built with seed {report.get('seed')} and another configuration "
                         f"({', '.join(differs) or 'connector_kind'}) than this run's")
    return mm.load(folder), report["connector"]


def prior_figures(facts: list, sample: list, per_molecule: int, seed: int, candidates: int = 20) -> dict:
    """The prior way's figures, as tiny_molm.evaluate gives a model's: each held-out question answered with its
    kind's best constant reply, chosen among the kind's commonest training answers (and, for measured
    quantities, their median) by the mean score on training questions drawn as the held-out ones are."""
    import random
    import statistics
    from collections import Counter, defaultdict

    from toolpath.evals import scorers
    from toolpath.evals.benchmarks import molqa_data as qa

    rng, by_kind = random.Random(seed + 1), defaultdict(list)  # not the held-out sample's draw
    for questions in facts:
        for q in qa.pick(rng, list(questions), per_molecule):
            by_kind[q.kind].append(q)

    def mean_score(reply: str, questions: list) -> float:
        return sum(getattr(scorers, q.scorer)(reply, q.answer, {}) for q in questions) / len(questions)

    best = {}
    for kind, questions in by_kind.items():
        replies = [a for a, _ in Counter(q.answer for q in questions).most_common(candidates)]
        if questions[0].scorer == "mra":
            replies.append(f"{statistics.median(float(q.answer) for q in questions):.1f}")
        best[kind] = max(replies, key=lambda r: mean_score(r, questions))
    # a kind never asked in training is a rare group: its questions come with yes and no at even odds
    rows = [(q, getattr(scorers, q.scorer)(best.get(q.kind, "no"), q.answer, {})) for _, q in sample]
    out = {}
    for name, keep in (("all", lambda q: True), ("yes_no", lambda q: q.scorer == "short_answer"),
                       ("numeric", lambda q: q.scorer != "short_answer")):
        kept = [x for q, x in rows if keep(q)]
        out[name] = {"questions": len(kept), "accuracy": round(sum(kept) / len(kept), 4) if kept else None}
    return out | {"scores": [x for _, x in rows], "replies": best}


def run(cfg, seed: int, lm_folder: Path, ways=WAYS, cache: Path | None = None, built: Path | None = None) -> dict:
    import torch

    from toolpath.evals.intervals import mean_figure
    from toolpath.policies.molm import connector as mc
    from toolpath.progress import Progress
    from toolpath.train import molm_pretraining as mpt
    from toolpath.train import tiny_molm as tm

    torch.set_num_threads(cfg.threads)
    train, heldout, facts, sample = tm.data(cfg, seed)
    log(f"{len(train)} training, {len(heldout)} held-out molecules, {len(sample)} questions")
    if built:  # the build's encoder is the one its dynamic way read: every way reads it here
        built_model, built_stats = built_dynamic(built, cfg, seed)
        encoder, head = built_model.encoder, built_model.head
        held = mpt.next_atom_scores(encoder, head, heldout)
    else:
        encoder, head, held = mpt.pretrained(cfg, seed, train, heldout, cache)
    for p in list(encoder.parameters()) + list(head.parameters()):
        p.requires_grad_(False)
    out, scores = {"encoder": held, "patches": tm.patch_figures(encoder, head, heldout), "ways": {}}, {}
    log(f"encoder: held-out next-atom accuracy {held['accuracy']}; patches {out['patches']}")
    for way in ways:
        text = way == "text"
        if way == "prior":
            started = time.monotonic()
            figures = prior_figures(facts, sample, cfg.eval_per_molecule, seed)
            scores[way] = figures["scores"]
            out["ways"][way] = {"accuracy": figures["all"]["accuracy"], "accuracy_ci": mean_figure(scores[way])["ci"],
                                "yes_no": figures["yes_no"]["accuracy"], "numeric": figures["numeric"]["accuracy"],
                                "questions": figures["all"]["questions"], "connector_parameters": 0,
                                "graph_tokens_per_molecule": 0, "final_loss": None,
                                "train_seconds": round(time.monotonic() - started, 1), "replies": figures["replies"]}
            log(f"{way}: {out['ways'][way]} scores {json.dumps(scores[way])}")
            continue
        if built and way == "dynamic":
            model, trained = built_model, built_stats
        else:
            model = tm.assemble(cfg, "dynamic" if text else way, encoder, head, lm_folder, seed)
            with Progress(f"{way}: connector and embeddings", cfg.steps, "steps") as line:
                trained = tm.train_connector(model, train, facts, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                                             embed_lr=cfg.embed_lr, max_turns=cfg.max_turns, seed=seed,
                                             smiles_as_text=text, progress=line)
        figures = tm.evaluate(model, sample, smiles_as_text=text)
        scores[way] = figures["scores"]
        out["ways"][way] = {"accuracy": figures["all"]["accuracy"], "accuracy_ci": mean_figure(scores[way])["ci"],
                            "yes_no": figures["yes_no"]["accuracy"],
                            "numeric": figures["numeric"]["accuracy"], "questions": figures["all"]["questions"],
                            "connector_parameters": 0 if text else mc.parameter_count(model.connector),
                            "graph_tokens_per_molecule": 0 if text else trained["mean_graph_tokens"],
                            "final_loss": trained["final_loss"], "train_seconds": trained["seconds"]}
        # the scores too: a run stopped before its last way still pairs the ways it finished
        log(f"{way}: {out['ways'][way]} scores {json.dumps(scores[way])}")
        del model
    # the same questions for every way: intervals of the paired differences, tighter than comparing two intervals
    out["paired_differences"] = {f"{a}_minus_{b}": mean_figure([x - y for x, y in zip(scores[a], scores[b])])
                                 for a, b in (("dynamic", "fixed"), ("dynamic-global", "fixed"),
                                              ("dynamic-global", "dynamic"), ("edt", "fixed"), ("edt", "dynamic"),
                                              ("dynamic", "text"), ("dynamic-global", "text"), ("edt", "text"),
                                              ("fixed", "text"), ("dynamic", "prior"), ("dynamic-global", "prior"),
                                              ("edt", "prior"), ("fixed", "prior"), ("text", "prior"))
                                 if a in scores and b in scores}
    out["scores"] = scores  # per question, the same questions in the same order for every way
    return out


def goals(out: dict) -> dict:
    """Each goal's verdict; None where a way it compares was not run (--ways)."""
    w = out["ways"]
    acc = {way: w[way]["accuracy"] for way in w}
    base = acc.get("text")
    for way in w:
        w[way]["ratio_to_text"] = round(acc[way] / base, 3) if base else None
    rho = out["patches"]["spearman_tokens_heavy_atoms"]
    both = "dynamic" in acc and "fixed" in acc
    gap = round(100 * (acc["dynamic"] - acc["fixed"]), 2) if both else None
    edt_gap = round(100 * (acc["edt"] - acc["fixed"]), 2) if "edt" in acc and "fixed" in acc else None
    global_gap = (round(100 * (acc["dynamic-global"] - acc["fixed"]), 2) if "dynamic-global" in acc and "fixed" in acc
                  else None)
    return {"dynamic_beats_fixed_by_3_points": gap >= 3 if both else None, "dynamic_minus_fixed_points": gap,
            "edt_minus_fixed_points": edt_gap, "dynamic_global_minus_fixed_points": global_gap,
            "both_beat_text": min(acc["dynamic"], acc["fixed"]) > base if both and base is not None else None,
            "minus_prior_points": {way: round(100 * (acc[way] - acc["prior"]), 2) for way in acc
                                   if "prior" in acc and way != "prior"} or None,
            "token_count_spearman_at_least_0.8": rho is not None and rho >= 0.8, "spearman": rho}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, help="connector training steps of each way (default: the build's)")
    ap.add_argument("--pretrain-steps", type=int, help="encoder pretraining steps (default: the build's)")
    ap.add_argument("--eval-molecules", type=int, help="held-out molecules asked (default: the build's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ways", default=",".join(WAYS), help="the ways trained, comma-separated (default: all)")
    ap.add_argument("--encoder", type=Path, help="a file for the pretrained encoder: read if it exists, else written")
    ap.add_argument("--built", type=Path, help="a tiny-molm folder built with this run's configuration and seed: "
                    "its connector is the dynamic way (not trained again) and its encoder every way's")
    ap.add_argument("--toy", action="store_true", help="toy sizes and a tiny random LM: the mechanics only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from toolpath.train.heap import reuse_freed_memory

    reuse_freed_memory()  # a training process: freed gradients' pages are kept for the next step (train/heap.py)
    ways = tuple(w.strip() for w in args.ways.split(",") if w.strip())
    if not ways or any(w not in WAYS for w in ways):
        ap.error(f"--ways {args.ways!r}: expected some of {', '.join(WAYS)}")
    from toolpath.train import tiny_molm as tm

    cfg = tm.toy_config() if args.toy else tm.BuildConfig()
    changes = {k: v for k, v in (("steps", args.steps), ("pretrain_steps", args.pretrain_steps),
                                 ("eval_molecules", args.eval_molecules)) if v is not None}
    cfg = dataclasses.replace(cfg, **changes)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="molqa-") as tmp:
        if args.toy:
            from tests.tiny_lm import save_tiny_chat_lm

            lm_folder = Path(tmp) / "lm"
            save_tiny_chat_lm(lm_folder, "How many rings does this molecule have yes no Does contain 0 1 2 3 4 5 .")
        else:
            from toolpath.train.tiny_vlm import default_lm_folder

            lm_folder = default_lm_folder()
        try:
            out = run(cfg, args.seed, lm_folder, ways, args.encoder, args.built)
        except ValueError as err:  # an --encoder file or a --built folder of another configuration
            raise SystemExit(f"--{'built' if args.built else 'encoder'} {err}") from None
    out |= {"goals": goals(out), "config": dataclasses.asdict(cfg), "seed": args.seed, "toy": args.toy,
            "seconds": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for way, f in out["ways"].items():
            print(f"{way:8} accuracy {f['accuracy']:.3f} (yes/no {f['yes_no']}, numeric {f['numeric']}) "
                  f"x{f['ratio_to_text']} of text; {f['connector_parameters']} connector parameters, "
                  f"{f['graph_tokens_per_molecule']} graph tokens")
        print(f"paired differences (95% bootstrap intervals): {out['paired_differences']}")
        print(f"goals: {out['goals']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
