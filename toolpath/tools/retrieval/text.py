"""Text retrieval over a corpus with MetaEmbed: the trained model (loaded once), the passages of a file (read
as `search` reads them, so a hit names its file the same way) and their multi-vector index."""

from __future__ import annotations

from pathlib import Path

from ...loaded_once import LoadedOnce
from ...paths import models_dir
from ...redact import redactor
from ..corpus import walk
from ..corpus_text import PASSAGE_WORDS, TEXT_SUFFIXES, file_passages
from ..registry import ToolError
from . import model as M
from .index import VectorIndex, vector_index

BUILD_COMMAND = "toolpath models build metaembed"
_MODELS = LoadedOnce("MetaEmbed models", max_items=1)  # fingerprint -> model: a rebuilt model replaces the old


def model_folder() -> Path:
    return models_dir() / "metaembed"


def trained_model(what: str = "retrieve"):
    """(model, fingerprint) of the trained MetaEmbed under $TOOLPATH_HOME, loaded once per process."""
    folder = model_folder()
    if not (folder / M.WEIGHTS).is_file() or not (folder / "config.json").is_file():
        raise ToolError(f"{what}: no trained MetaEmbed model at {folder}; build it with `{BUILD_COMMAND}` "
                        "(about 45 minutes on 2 CPU cores)")
    fp = M.fingerprint(folder)

    def read():
        try:
            return M.load(folder)
        except (OSError, ValueError, KeyError) as err:
            raise ToolError(f"{what}: cannot load the MetaEmbed model at {folder} ({type(err).__name__}: {err}); "
                            f"rebuild it with `{BUILD_COMMAND}`") from None

    return _MODELS.get(fp, read), fp


def text_index(root: Path, what: str = "retrieve") -> tuple[VectorIndex, object]:
    """(index of every passage's Nd vectors, model) for the corpus at root."""
    corpus = walk(root, TEXT_SUFFIXES)
    model, fp = trained_model(what)
    cfg = model.config
    redact_text = redactor()

    def encode_file(path: Path):
        items, notes = file_passages(path, redact_text)
        # The title travels with every passage, as search indexes it: a passage deep in a page is still about it.
        vecs = model.encode([f"{p['title']}. {p['text']}" for p in items], "doc") if items else None
        return items, vecs, notes

    index = vector_index("metaembed", corpus, fp, (cfg.nd, cfg.dim), encode_file,
                         params={"passage": PASSAGE_WORDS}, what=what)
    return index, model
