"""retrieve: MetaEmbed multi-vector retrieval with a test-time budget (text -> passages, text -> images).

Configuration:

    TOOLPATH_RETRIEVE_CORPUS=/path/to/folder   the collection: .txt .md .html .htm .jsonl files (read and cut into
                                               passages as `search` does) and .png .jpg .jpeg .webp .bmp .gif images

Text: every passage is encoded once into Nd = 64 unit vectors (its mean-pooled MiniLM state, then that state
plus a learned map of each of 63 learnable meta tokens' states, projected; model.py), stored in a
memory-mapped index under $TOOLPATH_HOME/search/ (index.py: reused across processes, updated for new and
changed files only). A query is encoded into its
first nq of Nq = 16 vectors, and a passage scores by late interaction over its first nd vectors: for each
query vector the best passage vector, summed (scoring.py; with one passage vector, a float32 matrix-vector
product over first vectors the index keeps in memory). The budget "NQxND" is chosen per call: 1x1 is a
single-vector search, 16x64 the most precise; nothing is re-encoded when it changes. The model is trained here
(`toolpath models build metaembed`, toolpath/train/metaembed_training.py) and not shipped.

Images: when the tiny CLIP of `toolpath models build tiny-vlm` exists, the query's CLIP text embedding is matched
to the images' CLIP image embeddings (one vector each, cosine; the budget applies to text only).
`search` uses this ranking too with TOOLPATH_SEARCH_BACKEND=metaembed (at the full budget).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..corpus import Corpus, corpus_root, walk
from ..corpus_text import TEXT_SUFFIXES
from ..registry import ToolError, ToolResult, tool
from ..search.images import IMAGE_SUFFIXES
from .model import MetaEmbedConfig
from .scoring import late_interaction, parse_budget

MAX_K = 20
DEFAULT_BUDGET = "16x64"
CORPUS_VAR = "TOOLPATH_RETRIEVE_CORPUS"


def rank_passages(root: Path, query: str, budget: str, n: int, what: str = "retrieve") -> tuple[list[dict], list[str]]:
    """The n best passages of the text corpus at root for the query, best first, each with its late-interaction
    score; and the index's notes (files skipped)."""
    import numpy as np

    from .text import text_index

    index, model = text_index(root, what)
    nq, nd = parse_budget(budget, model.config.nq, model.config.nd, what)
    if not index.items:
        return [], index.notes
    qvec = model.encode([query], "query", n=nq)[0]  # the first nq meta tokens are all a budget of nq needs
    scores = late_interaction(qvec, index.vectors, nq, nd, first=index.first_vectors if nd == 1 else None)
    order = np.argsort(-scores, kind="stable")[:n]
    return [dict(index.items[i], score=float(scores[i])) for i in order], index.notes


def _rank_images(corpus: Corpus, query: str, k: int) -> tuple[list[dict], list[str]]:
    import numpy as np

    from . import images

    index = images.image_index(corpus)
    if not index.items:
        return [], index.notes
    scores = np.asarray(index.vectors, dtype=np.float32) @ images.embed_text(query)
    order = np.argsort(-scores, kind="stable")[:k]
    return [dict(index.items[i], score=float(scores[i])) for i in order], index.notes


@tool(timeout=600.0, cost=1.0, quality=0.75, tags=("search", "retrieval"))
def retrieve(query: str, k: int = 5, budget: str = DEFAULT_BUDGET) -> ToolResult:
    """Find the passages (and images) of the document collection that best match a query, by meaning.

    Args:
        query: what to look for, in words (e.g. "how are class attributes looked up")
        k: how many results of each kind, 1 to 20
        budget: vectors used per query x per document, "NQxND" with NQ 1-16 and ND 1-64 (e.g. 16x64, the most
            precise, or 1x1, the cheapest)
    """
    from .images import CLIP_BUILD_COMMAND
    from .images import available as clip_available

    query = " ".join(query.split())
    if not query:
        raise ToolError("retrieve: the query is empty")
    if not 1 <= k <= MAX_K:
        raise ToolError(f"retrieve: k must be between 1 and {MAX_K}, got {k}")
    # A malformed budget fails before any model loads; the trained model's own limits are checked again after.
    parse_budget(budget, MetaEmbedConfig.nq, MetaEmbedConfig.nd)
    root = corpus_root(CORPUS_VAR, "retrieve", TEXT_SUFFIXES + IMAGE_SUFFIXES)
    texts, images = walk(root, TEXT_SUFFIXES), walk(root, IMAGE_SUFFIXES)
    text_files, image_files = texts.files, images.files
    if not text_files and not image_files:
        skipped = texts.skipped + images.skipped
        raise ToolError(f"retrieve: {root} has no {' '.join(TEXT_SUFFIXES + IMAGE_SUFFIXES)} files"
                        + (f" (skipped: {'; '.join(skipped[:3])})" if skipped else ""))
    hits, notes, pictures = [], list(texts.skipped), []  # the text index names them too, once it is built
    if text_files:
        hits, notes = rank_passages(root, query, budget, k)
    if image_files:
        if clip_available():
            pictures, image_notes = _rank_images(images, query, k)
            notes = notes + image_notes
        elif not text_files:
            raise ToolError(f"retrieve: {root} holds only images, and text -> image retrieval needs the tiny CLIP: "
                            f"build it with `{CLIP_BUILD_COMMAND}`")
        else:
            notes = [f"{len(image_files)} images not searched: text -> image retrieval needs the tiny CLIP "
                     f"(`{CLIP_BUILD_COMMAND}`)"] + notes + images.skipped
    notes = list(dict.fromkeys(notes))  # a link to a folder is seen by both walks: name it once
    return _format(query, budget, root, hits, pictures, notes, searched_text=bool(text_files))


def _format(query: str, budget: str, root: Path, hits: list[dict], pictures: list[dict], notes: list[str],
            searched_text: bool = True) -> ToolResult:
    from ..search.text_index import best_snippet, english_stemmer

    stemmer = english_stemmer()
    lines = [f"{len(hits)} passage{'s' if len(hits) != 1 else ''} for {query!r} in {root} (MetaEmbed, budget {budget}):"
             if hits else f"no passages for {query!r} in {root}" if searched_text else f"{query!r} in {root}:"]
    data = []
    for n, h in enumerate(hits, 1):
        snippet = best_snippet(h["text"], query, stemmer)
        lines += [f"{n}. {h['title']}", f"   {h['url']}", f"   {snippet}"]
        data.append({"kind": "text", "title": h["title"], "url": h["url"], "snippet": snippet,
                     "score": round(h["score"], 4)})
    if pictures:
        lines.append(f"{len(pictures)} image{'s' if len(pictures) != 1 else ''} (tiny CLIP):")
        for n, p in enumerate(pictures, 1):
            lines.append(f"{n}. {p['url']}  score {p['score']:.3f}")
            data.append({"kind": "image", "title": p["title"], "url": p["url"], "path": p["path"],
                         "score": round(p["score"], 4)})
    if notes:
        more = f" and {len(notes) - 5} more" if len(notes) > 5 else ""
        lines.append(f"note: {'; '.join(notes[:5])}{more}")
    return ToolResult(content="\n".join(lines), data=data)


def search_backend() -> str:
    """Which first stage `search` uses over a local corpus: TOOLPATH_SEARCH_BACKEND (bm25, the default, or
    metaembed)."""
    value = os.environ.get("TOOLPATH_SEARCH_BACKEND", "").strip().lower() or "bm25"
    if value not in ("bm25", "metaembed"):
        raise ToolError(f"search: TOOLPATH_SEARCH_BACKEND={value!r} is not a backend; use bm25 or metaembed")
    return value


from . import query_completion  # noqa: E402,F401  (registers complete_query)
