"""`toolpath models build tiny-molm`: a small graph-language model in EDT-Former's shape, made on CPU, written
under $TOOLPATH_HOME/models/tiny-molm (policies/molm/model.py's folder).

Stages (one progress stage each): the molecules (RDKit's bundled NCI set, split train / held out by molecule)
and their questions (molqa_data); the graph encoder pretrained on next-atom prediction (molm_pretraining); the
connector and the LM's input embeddings trained on the training molecules' question-answer dialogs with the
encoder and the rest of SmolLM2-135M-Instruct frozen (connector_training, the loop the tiny VLM shares); the
folder written whole and measured on the held-out molecules' questions with toolpath's scorers, the figures in
tiny_molm.json. Everything follows from the seed.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..policies.molm import connector as mc
from ..policies.molm import encoder as me
from ..progress import Progress
from .folders import replaced_folder
from .stage_times import StageTimes

NAME = "tiny-molm"
BUILD_COMMAND = "toolpath models build tiny-molm"
REPORT = "tiny_molm.json"


@dataclass(frozen=True)
class BuildConfig:
    molecules: int | None = None  # NCI molecules used (None: all)
    heldout: float = 0.1  # share of molecules held out (never trained on, by encoder or connector)
    encoder: me.EncoderSize = field(default_factory=me.EncoderSize)
    pretrain_steps: int = 1500
    pretrain_batch: int = 64
    pretrain_lr: float = 2e-3
    connector_kind: str = "dynamic"
    connector: mc.ConnectorSize = field(default_factory=mc.ConnectorSize)
    steps: int = 300
    batch: int = 8
    lr: float = 1e-3
    embed_lr: float = 2e-5  # the LM's input embeddings: small steps, they hold everything the LM knows of words
    max_turns: int = 3
    eval_molecules: int = 200
    eval_per_molecule: int = 3
    threads: int = 1  # on a busy 2-core machine 1 is faster (two OpenMP threads spin-wait on each other)


def toy_config() -> BuildConfig:
    """Seconds, not minutes: the pipeline's mechanics (tests)."""
    return BuildConfig(molecules=60, heldout=0.2, encoder=me.EncoderSize(width=16, layers=1), pretrain_steps=3,
                       pretrain_batch=8, connector=mc.ConnectorSize(node_width=16, width=16, heads=2, lm_width=32),
                       steps=2, batch=2, max_turns=2, eval_molecules=3, eval_per_molecule=1)


def folder(home: Path | None = None) -> Path:
    """Where `local:tiny-molm` looks (policies/local_models.py's BUILT), or the same place under `home`."""
    from ..policies.local_models import BUILT

    return home / "models" / NAME if home else BUILT[NAME].folder()


def train_connector(model, train: list, facts: list, *, steps: int, batch: int, lr: float, embed_lr: float,
                    max_turns: int, seed: int, smiles_as_text: bool = False, progress=None) -> dict:
    """The connector and the LM's input embeddings on dialogs about `train` (graphs; facts[i]: graph i's
    questions), the encoder and the rest of the LM frozen. `smiles_as_text`: the baseline that reads the
    molecule's SMILES before the first question instead of its graph tokens (the embeddings alone train)."""
    import torch

    from ..evals.benchmarks import molqa_data as qa
    from . import connector_training as ct

    states, patch_ids = model.prepare(train)
    per_graph = torch.split(states, [g.size for g in train])
    ct.freeze(model.lm)
    embed = model.lm.get_input_embeddings()
    groups = [{"params": ct.trainable(embed.parameters()), "lr": embed_lr}]
    if not smiles_as_text:
        groups.append({"params": ct.trainable(model.connector.parameters()), "lr": lr})
    lm = ct.ChatLM(embed, model.lm.model, model.lm.lm_head)

    def batch_loss(rng: random.Random):
        idx = [rng.randrange(len(train)) for _ in range(batch)]
        enc = []
        for i in idx:
            turns = [(q.text, q.answer) for q in qa.pick(rng, list(facts[i]), rng.randint(1, max_turns))]
            if smiles_as_text:
                turns[0] = (f"{train[i].smiles}\n{turns[0][0]}", turns[0][1])
                enc.append(ct.encode_dialog(model.tokenizer, turns, 0, placeholder=model.config.placeholder,
                                            item=None))
            else:
                enc.append(ct.encode_dialog(model.tokenizer, turns, model.connector.tokens(patch_ids[i]),
                                            placeholder=model.config.placeholder, item="graph"))
        ids, labels, positions = ct.pack(enc)  # end to end: a padded batch wasted a third of the LM's work
        if smiles_as_text:
            vectors = torch.zeros(0, model.lm.config.hidden_size)
        else:
            vectors = model.connector(torch.cat([per_graph[i] for i in idx]), [train[i].size for i in idx],
                                      [patch_ids[i] for i in idx])
        return ct.answer_loss(lm, ids, labels, None, model.placeholder_id, vectors, positions)

    model.connector.train(), model.lm.train()
    stats = ct.train_connector(groups, batch_loss, steps=steps, seed=seed, progress=progress)
    model.connector.eval(), model.lm.eval()
    ct.freeze(model.lm), ct.freeze(model.connector)
    tokens = [model.connector.tokens(ids) for ids in patch_ids]
    return {"batch": batch, "kind": model.config.connector_kind, "parameters": mc.parameter_count(model.connector),
            "mean_graph_tokens": round(sum(tokens) / max(len(tokens), 1), 2)} | stats


def patch_figures(encoder, head, graphs: list) -> dict:
    """How the patcher's token count follows molecule size on `graphs`: Spearman's rho against heavy atoms."""
    from scipy.stats import spearmanr

    from ..policies.molm import patcher as mp

    sizes = [g.size for g in graphs]
    bits = me.entropies(encoder, head, graphs)

    def follows(rule: str) -> dict:
        counts = [mp.count(mp.patch_ids(b, rule=rule)) for b in bits]
        rho = spearmanr(sizes, counts).statistic if len(set(counts)) > 1 and len(set(sizes)) > 1 else None
        return {"mean_tokens": round(sum(counts) / max(len(counts), 1), 2),
                "spearman_tokens_heavy_atoms": None if rho is None else round(float(rho), 4)}

    # every rule on the same entropies, so the build's rule is seen against the others in one run
    by_rule = {rule: follows(rule) for rule in mp.RULES}
    return {"molecules": len(graphs), "mean_heavy_atoms": round(sum(sizes) / max(len(sizes), 1), 2),
            "rule": mp.RULE} | by_rule[mp.RULE] | {"by_rule": by_rule}


def evaluate(model, sample: list, smiles_as_text: bool = False, progress=None) -> dict:
    """Accuracy on (smiles, question) pairs, each reply graded by its question's scorer; by answer type too.
    `smiles_as_text`: the molecule given as its SMILES before the question, as that baseline trained."""
    from ..evals import scorers

    rows = []
    for smiles, q in sample:
        if smiles_as_text:
            reply = model.reply([{"type": "text", "text": f"{smiles}\n{q.text}"}], max_new_tokens=8)[0]
        else:
            reply = model.answer(smiles, q.text, max_new_tokens=8)
        rows.append((q, reply, getattr(scorers, q.scorer)(reply, q.answer, {})))
        if progress:
            progress.update()
    by = {}
    for name, keep in (("all", lambda q: True), ("yes_no", lambda q: q.scorer == "short_answer"),
                       ("numeric", lambda q: q.scorer != "short_answer")):
        scores = [s for q, _, s in rows if keep(q)]
        by[name] = {"questions": len(scores), "accuracy": round(sum(scores) / len(scores), 4) if scores else None}
    by["examples"] = [{"question": q.text, "expected": q.answer, "reply": r} for q, r, _ in rows[:6]]
    by["scores"] = [s for *_, s in rows]  # per question, in `sample`'s order: paired comparisons between models
    return by


def data(cfg: BuildConfig, seed: int) -> tuple[list, list, list, list]:
    """(training graphs, held-out graphs, each training graph's questions, the held-out question sample)."""
    from ..evals.benchmarks import molqa_data as qa
    from ..policies.molm import graphs as mg

    train_smiles, heldout_smiles = qa.split(qa.nci_smiles(cfg.molecules), cfg.heldout, seed)
    train, heldout = [mg.mol_graph(s) for s in train_smiles], [mg.mol_graph(s) for s in heldout_smiles]
    sample = qa.heldout_questions(heldout_smiles[:cfg.eval_molecules], cfg.eval_per_molecule, seed=0)
    return train, heldout, [qa.facts(s) for s in train_smiles], sample


def assemble(cfg: BuildConfig, connector_kind: str, encoder, head, lm_folder: Path, seed: int):
    """A fresh GraphLM: the language model from `lm_folder` grown by the placeholder, the (pretrained) encoder
    and head, a new connector of `connector_kind`."""
    from ..policies.molm import model as mm

    tok = mm.graph_tokenizer(lm_folder)
    lm = mm.grown_lm(lm_folder, tok)
    size = mc.ConnectorSize(node_width=cfg.encoder.width, width=cfg.connector.width, heads=cfg.connector.heads,
                            lm_width=lm.config.hidden_size)
    return mm.GraphLM(mm.GraphLMConfig(kind=NAME, encoder=cfg.encoder, connector_kind=connector_kind,
                                       connector=size), lm, tok, encoder, head,
                      mc.build_connector(connector_kind, size, seed))


def build(seed: int = 0, *, home: Path | None = None, config: BuildConfig | None = None,
          lm_folder: Path | None = None) -> dict:
    """Train, write and measure the tiny graph-LM; returns what tiny_molm.json holds (with its folder)."""
    import torch

    from ..policies.molm import model as mm
    from . import molm_pretraining as mpt
    from .tiny_vlm import default_lm_folder

    cfg = config or BuildConfig()
    torch.set_num_threads(cfg.threads)
    times = StageTimes()
    lm_folder = Path(lm_folder) if lm_folder else default_lm_folder()
    target = folder(home)
    times.restart()
    with Progress("[1/4] data: RDKit's NCI molecules and their questions") as line:
        train, heldout, facts, sample = data(cfg, seed)
        times.done("data")
        line.close(f"{len(train)} training and {len(heldout)} held-out molecules")

    encoder, head = me.build_encoder(cfg.encoder, seed)
    with Progress("[2/4] encoder: next-atom prediction", cfg.pretrain_steps, "steps") as line:
        enc_stats = mpt.pretrain(encoder, head, train, heldout, steps=cfg.pretrain_steps, batch=cfg.pretrain_batch,
                                 lr=cfg.pretrain_lr, seed=seed, progress=line)
        times.done("encoder")
        h = enc_stats["heldout"]
        line.close(f"held-out next-atom accuracy {h['accuracy']:.3f} (majority {h['majority_accuracy']:.3f})")
    for p in list(encoder.parameters()) + list(head.parameters()):
        p.requires_grad_(False)
    enc_stats["patches"] = patch_figures(encoder, head, heldout)

    model = assemble(cfg, cfg.connector_kind, encoder, head, lm_folder, seed)
    with Progress(f"[3/4] connector ({cfg.connector_kind}) and embeddings", cfg.steps, "steps") as line:
        con_stats = train_connector(model, train, facts, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                                    embed_lr=cfg.embed_lr, max_turns=cfg.max_turns, seed=seed, progress=line)
        times.done("connector")
        line.close(f"loss {con_stats['final_loss']:.3f}")

    with Progress("[4/4] eval: the written folder on held-out molecules", len(sample), "questions") as line, \
            replaced_folder(target, NAME) as tmp:
        model.save(tmp)
        del model
        figures = evaluate(mm.load(tmp), sample, progress=line)  # measured through the written folder alone
        figures.pop("scores")
        times.done("eval")
        report = {"name": NAME, "seed": seed, "config": asdict(cfg), "language_model": lm_folder.name,
                  "data": {"train_molecules": len(train), "heldout_molecules": len(heldout),
                           "eval_questions": len(sample)},
                  "encoder": enc_stats, "connector": con_stats, "figures": figures,
                  "seconds": times.report(),
                  "load_average": [round(x, 2) for x in os.getloadavg()], "threads": cfg.threads}
        (tmp / REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        line.close(f"held-out accuracy {figures['all']['accuracy']} (yes/no {figures['yes_no']['accuracy']}, "
                   f"numeric {figures['numeric']['accuracy']}) -> {target}")
    return report | {"folder": str(target)}
