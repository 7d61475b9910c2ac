"""Real (query, passage) pairs for training and measuring MetaEmbed, with a held-out split by document.

Sources, all text that ships with Python, with this repository or with the installed packages:
- the Python reference topics (`pydoc_data.topics`): each section heading -> the first passage of its section
  (a topic's title heading -> its opening passage);
- the repository's Markdown (README.md, docs/*.md): each heading -> the first passage of its section;
- the standard library's docstrings: a function's or class's summary line -> the first passage of the rest;
- the installed packages' docstrings, the same way (metaembed_packages: a package is one document, and the
  package versions are recorded in `Collection.packages`);
- for training only, the inverse cloze task over the training documents' passages (Collection.sentence_queries).

A document is a topic, a Markdown file, a standard-library module or an installed package; a document is
wholly in training or wholly held out (by a hash of its name, so the split does not move when sources grow or
the seed changes). The collection an
evaluation searches is every passage of the held-out documents, not only the relevant ones. The heading or
summary line is never part of its passage, or the task would be string matching.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..tools.corpus_text import parse_markdown, split_passages
from .metaembed_packages import PER_PACKAGE, manifest, package_files, site_packages, top_level_packages

HELDOUT_PERCENT = 20
_RST_UNDERLINE = re.compile(r"^(\S[^\n]*)\n([=\-*~^\"+#])\2{2,}[ \t]*$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_STDLIB_SKIP = {"test", "tests", "idlelib", "lib2to3", "site-packages", "turtledemo", "ensurepip", "__pycache__",
                "tkinter", "pydoc_data"}  # tests and bundled apps: not prose; pydoc_data is a source of its own


@dataclass(frozen=True)
class Pair:
    source: str  # pydoc, markdown, docstring
    doc: str  # the document it comes from: the unit of the split
    query: str
    passage: int  # index into Collection.passages


@dataclass
class Collection:
    passages: list[str]
    passage_doc: list[str]
    pairs: list[Pair]
    packages: dict[str, str] = field(default_factory=dict)  # installed package read -> "distribution==version"

    def split(self) -> tuple[list[Pair], list[Pair]]:
        """(training pairs, held-out pairs), by document."""
        train = [p for p in self.pairs if not is_heldout(p.doc)]
        return train, [p for p in self.pairs if is_heldout(p.doc)]

    def heldout_passages(self) -> list[int]:
        return [i for i, d in enumerate(self.passage_doc) if is_heldout(d)]

    def sentence_queries(self) -> dict[int, list[str]]:
        """Training passage -> its sentences of 4-30 words, for passages with two or more: the inverse cloze
        task's queries (a sentence asks for the passage it came from, the sentence cut out of it)."""
        out = {}
        for i, doc in enumerate(self.passage_doc):
            if not is_heldout(doc):
                sentences = [x for x in _SENTENCE_END.split(self.passages[i]) if 4 <= len(x.split()) <= 30]
                if len(sentences) >= 2:
                    out[i] = sentences
        return out


def is_heldout(doc: str) -> bool:
    return int(hashlib.sha256(doc.encode()).hexdigest(), 16) % 100 < HELDOUT_PERCENT


def _clean(text: str) -> str:
    return " ".join(text.split())


def _sections_rst(text: str) -> list[tuple[str, str]]:
    """(heading, body) of reStructuredText-style sections (a line underlined with = - * ~ ^ ...)."""
    heads = list(_RST_UNDERLINE.finditer(text))
    return [(h.group(1).strip(), text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)])
            for i, h in enumerate(heads)]


def _sections_markdown(text: str) -> list[tuple[str, str]]:
    text = re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.M | re.S)  # code blocks: no prose, and may hold '#'
    heads = list(_MD_HEADING.finditer(text))
    out = []
    for i, h in enumerate(heads):
        body = text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        out.append((re.sub(r"[`*_]", "", h.group(1)).strip(), parse_markdown(body, "")[1]))
    return out


def _docstrings(path: Path) -> list[tuple[str, str]]:
    """(summary, rest) of the module's function and class docstrings that have both."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node)
            if doc and "\n\n" in doc:
                summary, rest = doc.split("\n\n", 1)
                out.append((summary, rest))
    return out


def _stdlib_files() -> list[Path]:
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if not (set(p.relative_to(root).parts[:-1]) & _STDLIB_SKIP))


def _repo_markdown() -> list[Path]:
    root = Path(__file__).resolve().parents[2]  # the checkout; an installed package has none and skips this
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


class _Builder:
    def __init__(self):
        self.passages: list[str] = []
        self.passage_doc: list[str] = []
        self.pairs: list[Pair] = []
        self._seen: dict[str, int] = {}
        self.packages: dict[str, str] = {}

    def section(self, source: str, doc: str, query: str, body: str, min_words: int = 20) -> None:
        query = _clean(query).strip(" .:")
        parts = split_passages(body)
        if not parts or not 2 <= len(query) <= 200 or len(parts[0].split()) < min_words:
            return
        first = None
        for text in parts:
            key = _dedupe_key(text)
            if key in self._seen:  # the same text twice (a shared or templated docstring): one item, first owner
                first = self._seen[key] if first is None else first
                continue
            self._seen[key] = len(self.passages)
            self.passages.append(text)
            self.passage_doc.append(doc)
            first = len(self.passages) - 1 if first is None else first
        if self.passage_doc[first] == doc:
            self.pairs.append(Pair(source, doc, query, first))

    def done(self) -> Collection:
        # A query text that names two different passages ("Return the name.") has no one right answer: drop it.
        count: dict[str, int] = {}
        for p in self.pairs:
            count[p.query.lower()] = count.get(p.query.lower(), 0) + 1
        pairs = [p for p in self.pairs if count[p.query.lower()] == 1]
        return Collection(self.passages, self.passage_doc, pairs, self.packages)


def _dedupe_key(text: str) -> str:
    """Passages equal but for case, numbers and punctuation are one passage: generated docstrings ("Sets the
    color of ...", one per class) differ in nothing else, and as separate items one query would have several
    right answers."""
    return " ".join(re.sub(r"[^a-z]+", " ", text.lower()).split())


def build_collection(*, pydoc: bool = True, markdown: bool = True, docstrings: bool = True, packages: bool = False,
                     per_package: int = 0) -> Collection:
    """Every pair of the sources, in a fixed order (sources, then documents sorted by name). `packages`: also
    the installed packages' docstrings, at most `per_package` pairs each (0: metaembed_packages.PER_PACKAGE)."""
    b = _Builder()
    if pydoc:
        from pydoc_data.topics import topics

        for key in sorted(topics):
            for heading, body in _sections_rst(topics[key]):
                b.section("pydoc", f"pydoc:{key}", heading, body)
    if markdown:
        for path in _repo_markdown():
            for heading, body in _sections_markdown(path.read_text(encoding="utf-8", errors="replace")):
                b.section("markdown", f"markdown:{path.name}", heading, body)
    if docstrings:
        import sysconfig

        root = Path(sysconfig.get_paths()["stdlib"])
        for path in _stdlib_files():
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            for summary, rest in _docstrings(path):
                if 3 <= len(summary.split()) <= 30:
                    b.section("docstring", f"module:{module}", summary, rest, min_words=30)
    if packages:
        _add_packages(b, per_package or PER_PACKAGE)
    return b.done()


def _add_packages(b: _Builder, per_package: int) -> None:
    root = site_packages()
    names = top_level_packages(root)
    for name in names:
        before = len(b.pairs)
        for path in package_files(root, name):
            for summary, rest in _docstrings(path):
                if 3 <= len(summary.split()) <= 30:
                    b.section("package", f"package:{name}", summary, rest, min_words=30)
            if len(b.pairs) - before >= per_package:
                break
        if len(b.pairs) > before:
            b.packages[name] = ""
    b.packages = manifest(sorted(b.packages))
