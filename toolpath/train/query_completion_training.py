"""`toolpath models build query-completion`: the fine-tuned model of `complete_query` (QCQC), written to
$TOOLPATH_HOME/models/query-completion, and the quality-aware retriever it is measured with (retriever/ in it).

Stages (one progress line each):
1. data (query_completion_data.py): easy-vqa and generated-scene pictures in degraded copies, each with its
   measured quality, a 1-2-word query and a descriptive caption worded with the measured quality;
2. retriever: a copy of the tiny CLIP of `toolpath models build tiny-vlm`, fine-tuned briefly on captions that
   word the measured quality ("a blurry, dark picture of a red circle") beside the plain ones, so the text side
   can ask for quality; then the caption-image similarity of every training example under it;
3. levels: terciles of the measured quality and of that similarity (the edges are kept in the report);
4. language model: SmolLM2-135M (the bundled model's weights) fine-tuned with LoRA (merged afterwards) on
   `prompt(query, relevance level, quality level) + " " + caption`, the loss on the caption only; the prompt is
   query_completion.prompt, the very function the tool calls.
The folder is written to a temporary sibling and renamed. Everything follows from the seed.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..tools.retrieval import query_completion as qc
from .folders import replaced_folder
from .stage_times import StageTimes
from .steps import optimizer_step

NAME = qc.NAME
BUILD_COMMAND = qc.BUILD_COMMAND
REPORT = "query_completion.json"
RETRIEVER = "retriever"
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class BuildConfig:
    easy_vqa_images: int = 600
    scenes: int = 600
    copies: int = 2  # degraded copies per picture
    # 60 steps left the retriever blind to the quality words ("a blurry picture of" retrieved sharper pictures
    # than "a sharp, clean picture of"); 300 steps follow the exposure words (dark, washed-out), hardly blur or
    # noise, and raised precision
    clip_steps: int = 300
    clip_batch: int = 96
    clip_lr: float = 2e-4
    lm_steps: int = 400  # 90 steps learned one caption for every level (measured); 400 learn the quality words
    lm_batch: int = 8
    lm_lr: float = 2e-3
    lora_rank: int = 16
    # LoRA on the top N decoder layers only (0: all). Top 8 made steps ~2x faster, but its completions kept the
    # query's words in under a third of samples (they collapsed onto a few frequent captions); on all layers,
    # three in four (measured on 15 queries x 4 levels x 2 seeds).
    lora_layers: int = 0
    threads: int = 2
    samples: int = 3  # completions written into the report


def toy_config() -> BuildConfig:
    """Seconds, not minutes: the pipeline's mechanics (tests)."""
    return BuildConfig(easy_vqa_images=0, scenes=24, copies=1, clip_steps=2, clip_batch=8, lm_steps=2, lm_batch=2,
                       lora_rank=2, lora_layers=1, threads=1, samples=1)


def folder(home: Path | None = None) -> Path:
    return qc.finetuned_folder(home)


def clip_source(home: Path | None = None) -> Path:
    from ..paths import models_dir

    return (home / "models" if home else models_dir()) / "tiny-vlm" / "clip"


def _clip_parts(source: Path):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    if not (source / "config.json").is_file():
        raise RuntimeError(f"the retriever starts from the tiny CLIP, which is not built ({source}): "
                           "run `toolpath models build tiny-vlm` first")
    return (CLIPModel.from_pretrained(str(source), local_files_only=True),
            AutoTokenizer.from_pretrained(str(source), local_files_only=True),
            AutoImageProcessor.from_pretrained(str(source), local_files_only=True))


def similarities(clip, tok, pixels, captions: list[str]) -> np.ndarray:
    """Cosine similarity of each caption with its own picture under the CLIP."""
    import torch
    import torch.nn.functional as F

    out = []
    with torch.inference_mode():
        for i in range(0, len(captions), 256):
            t = tok(captions[i:i + 256], padding=True, truncation=True, return_tensors="pt",
                    max_length=clip.config.text_config.max_position_embeddings)
            txt = F.normalize(clip.get_text_features(**t).pooler_output, dim=-1)
            img = F.normalize(clip.get_image_features(pixel_values=pixels[i:i + 256]).pooler_output, dim=-1)
            out.append((txt * img).sum(-1).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def encode(tok, text: str, prompt_text: str) -> tuple[list[int], list[int]]:
    """Token ids of the training text (with the end-of-text token) and its labels: -100 on the prompt."""
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    n_prompt = len(tok(prompt_text, add_special_tokens=False)["input_ids"])
    return ids, [-100] * n_prompt + ids[n_prompt:]


def train_lm(lm, tok, texts: list[tuple[str, str]], *, steps: int, batch: int, lr: float, rank: int, seed: int,
             layers: int = 0, progress=None) -> dict:
    """LoRA fine-tuning of the causal LM on (text, prompt) pairs, loss on what follows the prompt; merged.
    `layers` > 0: only the top `layers` decoder layers get LoRA; `progress`: a toolpath.progress.Progress told
    of each step and its running loss."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    for p in lm.parameters():
        p.requires_grad_(False)
    n_layers = lm.config.num_hidden_layers
    top = list(range(max(0, n_layers - layers), n_layers)) if layers > 0 else None
    model = get_peft_model(lm, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                          target_modules=list(LORA_TARGETS), layers_to_transform=top))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))))
    encoded = [encode(tok, t, p) for t, p in texts]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    rng = random.Random(seed)
    model.train()
    start, losses = time.monotonic(), []
    for _step in range(steps):
        rows = [encoded[rng.randrange(len(encoded))] for _ in range(batch)]
        width = max(len(x) for x, _ in rows)
        ids = torch.full((batch, width), pad)
        labels = torch.full((batch, width), -100)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for r, (x, y) in enumerate(rows):
            ids[r, :len(x)], labels[r, :len(y)], mask[r, :len(x)] = torch.tensor(x), torch.tensor(y), 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer_step(loss, opt, sched, losses, progress, window=10)
    merged = model.merge_and_unload().eval()
    for p in merged.parameters():
        p.requires_grad_(False)
    return {"model": merged, "steps": steps, "batch": batch, "lora_rank": rank, "lora_layers": layers or n_layers,
            "loss_first": round(losses[0], 4) if losses else None,
            "loss_last10": round(float(np.mean(losses[-10:])), 4) if losses else None,
            "seconds": round(time.monotonic() - start, 1)}


def build(seed: int = 0, *, home: Path | None = None, config: BuildConfig | None = None,
          lm_folder: Path | None = None) -> dict:
    """Build, write and describe the query-completion model; returns what query_completion.json holds. Each
    stage shows its progress on stderr."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..progress import Progress, say
    from . import clip_training as ct
    from . import query_completion_data as qd
    from . import vlm_data as vd
    from .tiny_vlm import default_lm_folder

    cfg = config or BuildConfig()
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(seed)
    times = StageTimes()

    source = clip_source(home)
    clip, clip_tok, proc = _clip_parts(source)
    lm_folder = Path(lm_folder) if lm_folder else default_lm_folder()

    # 1. data
    with Progress("[1/4] data: degraded copies of easy-vqa and scene pictures") as line:
        base = ((vd.easy_vqa_examples("train")[:cfg.easy_vqa_images] if cfg.easy_vqa_images else [])
                + vd.scenes(cfg.scenes, seed))
        pictures = qd.degraded_pictures(base, seed, cfg.copies)
        examples = qd.examples(pictures, seed)
        times.done("data")
        line.close(f"{len(pictures)} degraded pictures of {len(base)} training images")

    # 2. the quality-aware retriever, then each example's caption-image similarity under it
    size = clip.config.vision_config.image_size
    pixels = ct.pixel_values(proc, [p.image for p in pictures])
    captions = [qd.quality_caption(p) for p in pictures] + [vd.scene_caption(list(p.objects)) for p in pictures]
    clip.train()
    bases = [p.base for p in pictures]
    with Progress(f"[2/4] retriever: tiny CLIP ({size} px) on quality-worded captions", cfg.clip_steps,
                  "steps") as line:
        clip_stats = ct.train_clip(clip, clip_tok, torch.cat([pixels, pixels]), captions, steps=cfg.clip_steps,
                                   batch=cfg.clip_batch, lr=cfg.clip_lr, seed=seed, progress=line,
                                   groups=bases + bases)
        clip.eval()
        sims = similarities(clip, clip_tok, pixels, [e.caption for e in examples])
        times.done("retriever")

    # 3. levels
    quality_edges = qd.tercile_edges([p.quality.score for p in pictures])
    relevance_edges = qd.tercile_edges(sims)
    texts, counts = [], {}
    for e, s in zip(examples, sims):
        rel, qual = qd.level(float(s), relevance_edges), qd.level(e.picture.quality.score, quality_edges)
        counts[f"{rel}/{qual}"] = counts.get(f"{rel}/{qual}", 0) + 1
        texts.append((qc.training_text(e.query, rel, qual, e.caption), qc.prompt(e.query, rel, qual)))
    times.done("levels")
    say(f"[3/4] levels: quality terciles at {quality_edges[0]:.3f} / {quality_edges[1]:.3f}, relevance "
        f"(similarity) at {relevance_edges[0]:.3f} / {relevance_edges[1]:.3f}")

    # 4. the language model
    tok = AutoTokenizer.from_pretrained(str(lm_folder), local_files_only=True)
    lm = AutoModelForCausalLM.from_pretrained(str(lm_folder), local_files_only=True, dtype=torch.float32)
    with Progress("[4/4] language model: LoRA on the QCQC prompt", cfg.lm_steps, "steps") as line:
        lm_stats = train_lm(lm, tok, texts, steps=cfg.lm_steps, batch=cfg.lm_batch, lr=cfg.lm_lr,
                            rank=cfg.lora_rank, layers=cfg.lora_layers, seed=seed, progress=line)
        model = lm_stats.pop("model")
        samples = []
        for i, e in enumerate(examples[:cfg.samples]):
            for quality in ("low", "high"):
                caption = qc.generate(model, tok, qc.prompt(e.query, "high", quality), seed=i)
                samples.append({"query": e.query, "relevance": "high", "quality": quality, "completion": caption})
        times.done("lm")
        line.close(f"loss {lm_stats['loss_first']} -> {lm_stats['loss_last10']} (mean of the last 10)")

    target = folder(home)
    report = {"name": NAME, "seed": seed, "config": asdict(cfg), "language_model": lm_folder.name,
              "retriever_from": str(source), "prompt_example": qc.prompt("red circle", "high", "low"),
              "data": {"training_images": len(base), "pictures": len(pictures),
                       "degradations": {k: sum(p.degradation == k for p in pictures) for k, _ in qd.KIND_WEIGHTS}},
              "quality_edges": [round(x, 4) for x in quality_edges],
              "relevance_edges": [round(x, 4) for x in relevance_edges], "levels": dict(sorted(counts.items())),
              "retriever": clip_stats, "training": lm_stats, "samples": samples,
              "seconds": times.report(), "threads": cfg.threads}
    with replaced_folder(target, NAME) as tmp:
        tmp.mkdir()
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        clip.save_pretrained(tmp / RETRIEVER)
        clip_tok.save_pretrained(tmp / RETRIEVER)
        proc.save_pretrained(tmp / RETRIEVER)
        (tmp / REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report | {"folder": str(target)}
