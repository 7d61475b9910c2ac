"""The BM25 passage index of a text corpus (bm25s, Snowball stemming) and the snippets of its hits."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from ...redact import redactor
from ..corpus import Corpus, walk
from ..corpus_text import PASSAGE_WORDS, TEXT_SUFFIXES, file_passages
from ..registry import ToolError
from .cache import cache_dir, cached_index, stats

log = logging.getLogger(__name__)

SNIPPET_CHARS = 320


# The BM25 text index


def _bm25s():
    try:
        import bm25s
    except ImportError:
        raise ToolError("search: the local corpus backend needs bm25s: pip install bm25s PyStemmer") from None
    return bm25s


def english_stemmer():
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None  # bm25s works without stemming, only with lower recall ("dances" misses "dance")
    return Stemmer.Stemmer("english").stemWords


def _tokenize(texts: list[str], stemmer) -> list[list[str]]:
    bm25s = _bm25s()

    # en_plus (NLTK's list) drops question words too: "who first climbed" should not match every "who".
    return bm25s.tokenize(texts, stopwords="en_plus", stemmer=stemmer, return_ids=False, show_progress=False)


class _TextIndex:
    def __init__(self, retriever, passages: list[dict], notes: list[str], stemmer):
        self.retriever = retriever
        self.passages = passages
        self.notes = notes
        self.stemmer = stemmer

    def top(self, query: str, n: int) -> list[tuple[int, float]]:
        """The n best passages with a positive BM25 score, best first."""
        import numpy as np

        tokens = [t for t in _tokenize([query], self.stemmer)[0] if t in self.retriever.vocab_dict]
        if not tokens:  # no query word occurs anywhere in the corpus
            return []
        scores = self.retriever.get_scores(tokens)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]


def _build_text_index(corpus: Corpus, out: Path, stemmer) -> _TextIndex:
    bm25s = _bm25s()

    redact_text = redactor()
    passages, notes = [], list(corpus.skipped)
    for path in corpus.files:
        file_items, file_notes = file_passages(path, redact_text)
        passages += file_items
        notes += file_notes
    if not passages:
        raise ToolError(f"search: no text to index in {corpus.root}"
                        + (f" ({'; '.join(notes[:3])})" if notes else ""))
    # The title is indexed with every passage: a passage deep in "Mount Everest" is still about Everest.
    corpus_tokens = _tokenize([f"{p['title']}\n{p['text']}" for p in passages], stemmer)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    retriever.save(str(out / "bm25"))  # scores and vocabulary only: the passages live in passages.json
    (out / "passages.json").write_text(json.dumps({"passages": passages, "notes": notes}, ensure_ascii=False))
    stats["text_builds"] += 1
    for note in notes:
        log.warning("search index: skipped %s", note)
    return _TextIndex(retriever, passages, notes, stemmer)


def _load_text_index(folder: Path, stemmer) -> _TextIndex:
    bm25s = _bm25s()

    retriever = bm25s.BM25.load(str(folder / "bm25"))
    meta = json.loads((folder / "passages.json").read_text())
    return _TextIndex(retriever, meta["passages"], meta["notes"], stemmer)


def text_index(root: Path) -> _TextIndex:
    """The BM25 index of a corpus folder: from memory, else from the disk cache, else built (and cached)."""
    corpus = walk(root, TEXT_SUFFIXES)
    if not corpus.files:
        raise ToolError(f"search: {root} has no {' '.join(TEXT_SUFFIXES)} files to search"
                        + (f" (skipped: {'; '.join(corpus.skipped[:3])})" if corpus.skipped else ""))
    stemmer = english_stemmer()
    folder = cache_dir("text", corpus, {"stem": stemmer is not None, "passage": PASSAGE_WORDS})
    return cached_index(folder, "passages.json", lambda f: _load_text_index(f, stemmer),
                        lambda tmp: _build_text_index(corpus, tmp, stemmer), "search")


# Snippets, re-ranking, the HTTP backend


def best_snippet(text: str, query: str, stemmer) -> str:
    """The run of sentences (at most SNIPPET_CHARS) that holds the most distinct query terms."""
    if len(text) <= SNIPPET_CHARS:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    terms = set(_tokenize([query], stemmer)[0])
    sent_terms = [set(t) & terms for t in _tokenize(sentences, stemmer)]
    best, best_i, best_j = -1, 0, 1
    for i in range(len(sentences)):
        j, size, seen = i, 0, set()
        while j < len(sentences) and (j == i or size + len(sentences[j]) + 1 <= SNIPPET_CHARS):
            size += len(sentences[j]) + 1
            seen |= sent_terms[j]
            j += 1
        if len(seen) > best:
            best, best_i, best_j = len(seen), i, j
    out = " ".join(sentences[best_i:best_j])
    if len(out) > SNIPPET_CHARS:  # one very long sentence
        out = out[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
    return ("… " if best_i > 0 else "") + out + (" …" if best_j < len(sentences) and not out.endswith("…") else "")


