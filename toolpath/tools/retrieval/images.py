"""Text -> image retrieval with the tiny CLIP made by `toolpath models build tiny-vlm` (its clip/ folder: a
transformers CLIPModel, its tokenizer and image processor). Single-vector: one CLIP embedding per image and
per query, cosine similarity; the images are indexed like the text (index.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ...loaded_once import LoadedOnce
from ...paths import models_dir
from ...quiet import quiet_model_loading
from ..corpus import Corpus, open_image
from ..registry import ToolError
from .index import VectorIndex, vector_index

CLIP_BUILD_COMMAND = "toolpath models build tiny-vlm"
_CLIP = LoadedOnce("retrieval CLIP models", max_items=1)  # fingerprint -> (model, tokenizer, processor)


def clip_folder() -> Path:
    return models_dir() / "tiny-vlm" / "clip"


def available() -> bool:
    return (clip_folder() / "config.json").is_file()


def _clip():
    folder = clip_folder()
    fp = hashlib.sha256((folder / "config.json").read_bytes()
                        + str((folder / "model.safetensors").stat().st_mtime_ns).encode()).hexdigest()[:16]

    def read():
        from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

        quiet_model_loading()
        try:
            model = CLIPModel.from_pretrained(str(folder), local_files_only=True).eval()
            tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            proc = AutoImageProcessor.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError) as err:
            raise ToolError(f"retrieve: cannot load the tiny CLIP at {folder} ({err}); rebuild it with "
                            f"`{CLIP_BUILD_COMMAND}`") from None
        return model, tok, proc

    return (*_CLIP.get(fp, read), fp)


def embed_text(query: str):
    import torch

    model, tok, _, _ = _clip()
    with torch.inference_mode():
        t = model.get_text_features(**tok([query], return_tensors="pt", truncation=True,
                                          max_length=model.config.text_config.max_position_embeddings))
    vec = t.pooler_output if hasattr(t, "pooler_output") else t
    return torch.nn.functional.normalize(vec, dim=-1)[0].numpy()


def image_index(corpus: Corpus) -> VectorIndex:
    import torch

    model, _, proc, fp = _clip()
    dim = model.config.projection_dim

    def encode_file(path: Path):
        try:
            with open_image(path) as im:
                pixels = proc([im.convert("RGB")], return_tensors="pt")["pixel_values"]
        except OSError as err:
            return [], None, [f"{path.name}: cannot read image ({err})"]
        with torch.inference_mode():
            f = model.get_image_features(pixel_values=pixels)
        vec = torch.nn.functional.normalize(f.pooler_output if hasattr(f, "pooler_output") else f, dim=-1)
        return [{"path": str(path), "url": path.as_uri(), "title": path.name}], vec.numpy(), []

    return vector_index("clip", corpus, fp, (dim,), encode_file)
