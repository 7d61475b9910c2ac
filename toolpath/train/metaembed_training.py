"""`toolpath models build metaembed`: Matryoshka multi-vector contrastive training of MetaEmbed's meta tokens,
projection and LoRA adapters on the bundled MiniLM, written to $TOOLPATH_HOME/models/metaembed.

The loss (the paper's Matryoshka multi-vector retrieval): for each group (nq, nd) of GROUPS, the
late-interaction scores of every query in the batch against every document in it, using only the first nq query
and nd document vectors, and InfoNCE with the query's own passage as the answer (the other passages of the
batch are the negatives); the groups' losses are summed with `group_weights` (all 1 by default). Each group's
scores are the mean, not the sum, of its nq MaxSim terms before the temperature: the ranking is the same, and
one temperature then means the same sharpness for every group (with the sum, the 16-vector group's logits are
16 times larger and its loss saturates while the 1-vector group's still learns).

Two additions for a small encoder, where the contrastive loss alone overfits:
- the inverse cloze task: a share of each batch (`ict_share`) is a sentence of a training passage asking for
  that passage with the sentence cut out (kept in 1 case of 10, as in ICT);
- distillation (`distill`) on the groups in `distill_groups` only (default the single-vector one): the KL
  divergence from the frozen encoder's mean-pooled cosine scores over the batch to the group's scores, which
  keeps what the pretrained encoder knows while the adapters move. Distilling every group toward one
  single-vector teacher asks every budget to rank exactly as one vector does, which leaves the extra vectors
  nothing to add; the earlier build did that and its extra vectors stayed copies of the pooled one.

Everything follows from the seed: the meta tokens' initialisation, the order of the pairs, the steps (one
thread: the result is the same on any machine with the same torch).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..tools.retrieval import model as M
from .folders import replaced_folder

if TYPE_CHECKING:
    import torch

NAME = "metaembed"
BUILD_COMMAND = "toolpath models build metaembed"
GROUPS = ((1, 1), (2, 4), (4, 8), (8, 16), (16, 64))


@dataclass(frozen=True)
class TrainConfig:
    model: M.MetaEmbedConfig = field(default_factory=M.MetaEmbedConfig)
    groups: tuple[tuple[int, int], ...] = GROUPS
    group_weights: tuple[float, ...] = ()  # one per group; empty: all 1
    temperature: float = 0.03
    steps: int = 360
    batch: int = 24
    lr: float = 3e-3  # meta tokens
    lora_lr: float = 3e-4  # the encoder's LoRA adapters (model.lora_rank) and the projection
    residual_lr: float = 3e-4  # the meta vectors' residual map (model.pooled_residual), which starts at zero
    warmup: int = 8
    ict_share: float = 0.125  # of each batch: inverse-cloze pairs from training passages
    distill: float = 1.0  # weight of the distillation term (0: contrastive loss only)
    distill_groups: tuple[tuple[int, int], ...] = ((1, 1),)
    teacher_temperature: float = 0.05
    train_doc_tokens: int = 64  # passages are cut here in training (speed); the index reads max_doc_tokens
    threads: int = 1  # two OpenMP threads on a busy 2-core machine spin-wait on each other
    sources: tuple[str, ...] = ("pydoc", "markdown", "docstrings", "packages")
    per_package: int = 0  # pairs read from each installed package (0: metaembed_packages.PER_PACKAGE)


def folder(home: Path | None = None) -> Path:
    from ..paths import models_dir

    return (home / "models" if home else models_dir()) / NAME


def group_scores(q, d, nq: int, nd: int):
    """(B, B) late-interaction scores of every query against every document over the first nq query and nd
    document vectors, as the mean of the nq MaxSim terms (the index sums them: the same ranking)."""
    import torch

    return torch.einsum("iqc,jdc->ijqd", q[:, :nq], d[:, :nd]).max(dim=3).values.mean(dim=2)


def multivector_loss(q, d, groups, temperature: float, same=None, weights=()):
    """Weighted sum over groups of the in-batch InfoNCE loss on late-interaction scores of nested prefixes, and
    each group's loss. q (B, Nq, dim), d (B, Nd, dim) unit vectors; `same` (B, B) marks pairs that share a
    passage (not negatives); `weights` one per group (empty: all 1)."""
    import torch

    target = torch.arange(len(q))
    losses = []
    for nq, nd in groups:
        scores = group_scores(q, d, nq, nd) / temperature
        if same is not None:
            scores = scores.masked_fill(same & ~torch.eye(len(q), dtype=torch.bool), float("-inf"))
        losses.append(torch.nn.functional.cross_entropy(scores, target))
    w = torch.tensor(weights or [1.0] * len(losses))
    return (w * torch.stack(losses)).sum(), [float(x.detach()) for x in losses]


def mean_pooled(model, enc) -> torch.Tensor:
    """The frozen encoder's sentence embeddings of a tokenised batch: mean of the token states, unit length."""
    import torch

    lora = bool(model.config.lora_rank)
    if lora:
        model.set_adapters(False)
    try:
        with torch.no_grad():
            states = model.encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    finally:
        if lora:
            model.set_adapters(True)
    return torch.nn.functional.normalize(M.masked_mean(states, enc["attention_mask"]), dim=-1)


def distillation_loss(q, d, teacher_scores, groups, temperature: float, others=None):
    """Mean over groups of KL(teacher || group): the teacher's (B, B) cosine scores and each group's mean
    late-interaction scores, both over `temperature`; `others` (B, B) masks pairs that are neither the answer
    nor a negative (a second pair of the same passage)."""
    import torch

    def masked(scores):
        return scores if others is None else scores.masked_fill(others, -1e4)

    target = torch.softmax(masked(teacher_scores / temperature), dim=-1)
    losses = []
    for nq, nd in groups:
        s = group_scores(q, d, nq, nd) / temperature
        losses.append(torch.nn.functional.kl_div(torch.log_softmax(masked(s), dim=-1), target, reduction="batchmean"))
    return torch.stack(losses).mean()


def _count_by_source(train_pairs, heldout) -> dict:
    from collections import Counter

    return {"train": dict(Counter(p.source for p in train_pairs)), "heldout": dict(Counter(p.source for p in heldout))}


def _batches(pairs, passages, sentences: dict[int, list[str]], cfg: TrainConfig, seed: int):
    """(queries, passage texts, passage ids) per step, from the seed alone: the pairs in shuffled epochs, and
    `ict_share` of each batch drawn from the inverse-cloze pool."""
    import random

    rng = random.Random(seed)
    pool = sorted(sentences)
    n_ict = round(cfg.ict_share * cfg.batch) if pool else 0
    order: list[int] = []
    while True:
        while len(order) < cfg.batch - n_ict:
            epoch = list(range(len(pairs)))
            rng.shuffle(epoch)
            order += epoch
        idx, order = order[:cfg.batch - n_ict], order[cfg.batch - n_ict:]
        queries = [pairs[i].query for i in idx]
        texts = [passages[pairs[i].passage] for i in idx]
        ids = [pairs[i].passage for i in idx]
        for i in rng.sample(pool, min(n_ict, len(pool))):
            sentence = rng.choice(sentences[i])
            keep = rng.random() < 0.1
            queries.append(sentence)
            texts.append(passages[i] if keep else " ".join(passages[i].replace(sentence, " ").split()))
            ids.append(i)
        yield queries, texts, ids


def train(model, pairs, passages, cfg: TrainConfig, seed: int, progress=None, sentences=None) -> dict:
    """Train `model`'s meta tokens, projection and LoRA adapters in place (the encoder's own weights stay
    frozen). `sentences`: the inverse-cloze pool (Collection.sentence_queries); `progress`: a
    toolpath.progress.Progress told of each step and its loss. Returns the loss curve."""
    import torch

    torch.manual_seed(seed)
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    lora = list(model.lora_parameters().values())
    for p in lora:
        p.requires_grad_(True)
    # The projection starts as the identity and carries the pooled vector too: at the meta tokens' rate it
    # drifts from MiniLM's space within a few dozen steps (held-out recall@5 at 1x1 fell below MiniLM's), so it
    # moves at the adapters' rate.
    groups = [{"params": [model.query_meta, model.doc_meta, model.query_gate, model.doc_gate], "lr": cfg.lr},
              {"params": list(model.proj.parameters()), "lr": cfg.lora_lr}]
    if lora:
        groups.append({"params": lora, "lr": cfg.lora_lr})
    if model.residual is not None:
        groups.append({"params": [model.residual.weight], "lr": cfg.residual_lr})
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * max(0.05, 1 - s / max(cfg.steps, 1)))
    batches = _batches(pairs, passages, sentences or {}, cfg, seed)
    curve = []
    model.train()
    model.encoder.eval()  # no dropout: the vectors trained on are the ones the index will hold
    t0 = time.monotonic()
    for _step in range(cfg.steps):
        queries, texts, ids = next(batches)
        qt = model.tokenizer(queries, padding=True, truncation=True, max_length=cfg.model.max_query_tokens,
                             return_tensors="pt")
        dt = model.tokenizer(texts, padding=True, truncation=True, max_length=cfg.train_doc_tokens, return_tensors="pt")
        ids = torch.tensor(ids)
        others = (ids[:, None] == ids[None, :]) & ~torch.eye(len(ids), dtype=torch.bool)
        q = model(qt["input_ids"], qt["attention_mask"], "query")
        d = model(dt["input_ids"], dt["attention_mask"], "doc")
        loss, parts = multivector_loss(q, d, cfg.groups, cfg.temperature, same=ids[:, None] == ids[None, :],
                                       weights=cfg.group_weights)
        if cfg.distill and cfg.distill_groups:
            teacher = mean_pooled(model, qt) @ mean_pooled(model, dt).T
            loss = loss + cfg.distill * distillation_loss(q, d, teacher, cfg.distill_groups, cfg.teacher_temperature,
                                                          others)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        curve.append(round(float(loss.detach()), 4))
        if progress:
            progress.update(value=f"loss {curve[-1]:.3f} (groups {' '.join(f'{x:.2f}' for x in parts)})")
    model.eval()
    return {"loss_first": curve[0] if curve else None, "loss_last10": sum(curve[-10:]) / max(len(curve[-10:]), 1),
            "curve_every_10": curve[::10], "seconds": round(time.monotonic() - t0, 1)}


def build(seed: int = 0, *, home: Path | None = None, config: TrainConfig | None = None, encoder=None) -> dict:
    """Train and write the model folder atomically (a temporary sibling, then a rename); returns its report.
    `encoder` = (tokenizer, model) replaces the bundled MiniLM (tests: a tiny random BERT), and is then saved
    with the folder. Each stage shows its progress on stderr."""
    import torch

    from ..progress import Progress
    from .metaembed_pairs import build_collection

    cfg = config or TrainConfig()
    torch.set_num_threads(cfg.threads)
    t0 = time.monotonic()
    with Progress("[1/2] pairs: sections and docstrings of the training text") as line:
        coll = build_collection(pydoc="pydoc" in cfg.sources, markdown="markdown" in cfg.sources,
                                docstrings="docstrings" in cfg.sources, packages="packages" in cfg.sources,
                                per_package=cfg.per_package)
        train_pairs, heldout = coll.split()
        if not train_pairs:
            raise RuntimeError("no training pairs: the sources gave no text (is pydoc_data importable?)")
        line.close(f"{len(train_pairs)} training, {len(heldout)} held out (by document), "
                   f"{len(coll.passages)} passages")
    custom = encoder is not None
    tokenizer, enc = encoder if custom else M.load_encoder(M.bundled_encoder_path())
    model = M.new_model(enc, tokenizer, cfg.model, seed)
    sentences = coll.sentence_queries() if cfg.ict_share else {}
    with Progress(f"[2/2] training on batches of {cfg.batch} pairs", cfg.steps, "steps") as line:
        stats = train(model, train_pairs, coll.passages, cfg, seed, progress=line, sentences=sentences)
        line.close(f"loss {stats['loss_first']} -> {stats['loss_last10']:.3f} (mean of the last 10)")
    target = folder(home)
    report = {"name": NAME, "seed": seed, "config": asdict(cfg), "pairs": {"train": len(train_pairs),
              "heldout": len(heldout), "passages": len(coll.passages), "ict_passages": len(sentences),
              "by_source": _count_by_source(train_pairs, heldout)},
              "packages": coll.packages,  # the installed versions the package pairs came from: the data's manifest
              "training": stats, "seconds": round(time.monotonic() - t0, 1), "threads": cfg.threads,
              "load_average": [round(x, 2) for x in os.getloadavg()]}
    with replaced_folder(target, NAME) as tmp:
        tmp.mkdir()
        M.save(model, tmp, save_encoder=custom)
        (tmp / "metaembed.json").write_text(json.dumps(report, indent=2) + "\n")
    return report | {"folder": str(target)}
