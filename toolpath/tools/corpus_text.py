"""Reading a text corpus: Markdown, HTML, plain text and JSONL files into documents and passages, as `search`
(its BM25 index) and `retrieve` (its MetaEmbed index) both read them, so a hit names its file the same way in
either; MetaEmbed's training pairs cut Python's and the repository's text with the same functions."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from .corpus import read_bytes

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".jsonl")
PASSAGE_WORDS = (100, 200)  # a passage is closed once it has 100 words and the next paragraph would pass 200


# Reading documents


@dataclass
class _Doc:
    title: str
    url: str
    text: str


class _HTMLText(HTMLParser):
    """Visible text of an HTML page, with paragraph breaks at block elements, and its title."""

    _SKIP = {"script", "style", "noscript", "template", "svg", "head", "nav"}  # code and menus are not content
    _BLOCK = {"p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer", "main",
              "blockquote", "pre", "hr", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6", "nav", "aside", "figure"}

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.title = ""
        self.h1 = ""  # the first <h1>'s text: the title when there is no <title>
        self._h1_done = False
        self._skip = 0
        self._in = ""  # "title" or "h1" while inside one

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._skip += 1
        if tag in ("title", "h1"):
            self._in = tag
        if tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        if tag == self._in:
            self._h1_done = self._h1_done or tag == "h1"
            self._in = ""
        if tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self._in == "title":
            self.title += data  # <title> lives in <head>, which is otherwise skipped
        elif self._in == "h1" and not self._h1_done and not self._skip:
            self.h1 += data  # <h1>The <em>waggle</em> dance</h1> arrives in three pieces
        if not self._skip:
            self.parts.append(data)


def _parse_html(raw: str, fallback: str) -> tuple[str, str]:
    p = _HTMLText()
    p.feed(raw)
    p.close()
    title = " ".join((p.title or p.h1).split()) or fallback
    return title, "".join(p.parts)


_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def parse_markdown(raw: str, fallback: str) -> tuple[str, str]:
    lines = raw.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
    if first is None:
        title = fallback
    else:  # the title is indexed with every passage already; in the body it would only repeat in snippets
        title = lines.pop(first)[2:].strip() or fallback
    text = _MD_LINK.sub(r"\1", "\n".join(lines))  # [text](url) reads as text; the url is noise for ranking
    # A heading becomes a sentence of its own, so a snippet does not run "…Chomolungma. Height The most…".
    text = re.sub(r"^#{1,6}\s+(.*?)[.:]?\s*$", r"\1.", text, flags=re.M)
    text = re.sub(r"(\*\*|__|`)", "", text)
    return title, text


_JSONL_TEXT_FIELDS = ("text", "contents", "body", "content")


def _parse_jsonl(path: Path) -> tuple[list[_Doc], list[str]]:
    docs, notes = [], []
    with io.TextIOWrapper(io.BytesIO(read_bytes(path)), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path.name} line {n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                notes.append(f"{where}: not valid JSON ({err.msg})")
                continue
            if not isinstance(rec, dict):
                notes.append(f"{where}: expected a JSON object, got {type(rec).__name__}")
                continue
            text = next((rec[k] for k in _JSONL_TEXT_FIELDS if isinstance(rec.get(k), str) and rec[k].strip()), None)
            if text is None:
                notes.append(f"{where}: no text field ({', '.join(_JSONL_TEXT_FIELDS)})")
                continue
            title = str(rec.get("title") or f"{path.name} line {n}")
            url = str(rec.get("url") or f"{path.resolve().as_uri()}#line-{n}")
            docs.append(_Doc(title=title, url=url, text=text))
    return docs, notes


def _read_document(path: Path) -> tuple[list[_Doc], list[str]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _parse_jsonl(path)
    raw = read_bytes(path).decode("utf-8", errors="replace")
    if suffix in (".html", ".htm"):
        title, text = _parse_html(raw, path.stem)
    elif suffix in (".md", ".markdown"):
        title, text = parse_markdown(raw, path.stem)
    else:
        title, text = path.stem.replace("_", " "), raw
    if not text.strip():
        return [], [f"{path.name}: no text"]
    return [_Doc(title=title, url=path.resolve().as_uri(), text=text)], []


def _passage_url(url: str, n: int, count: int) -> str:
    """Where passage n of a document is: a fragment on our own file:// urls; a record's own url stays as given."""
    if not url.startswith("file://"):
        return url
    if "#" not in url:
        return f"{url}#passage-{n}"
    return url if count == 1 else f"{url}-passage-{n}"  # a JSONL record's #line-N


def file_passages(path: Path, redact_text: Callable[[str], str]) -> tuple[list[dict], list[str]]:
    """The passages of one corpus file (doc, title, url, text) and the notes on what was skipped in it. Every
    string passes through `redact_text` first: what is indexed is what is cached on disk and what a hit shows,
    so a key pasted into a document is neither written to the index nor returned."""
    try:
        docs, notes = _read_document(path)
    except OSError as err:  # unreadable, or no longer a regular file within the bound: say so, index the rest
        docs, notes = [], [f"{path.name}: cannot read ({err.strerror or err})"]
    out = []
    for doc in docs:
        parts = split_passages(redact_text(doc.text))
        title, url = redact_text(doc.title), redact_text(doc.url)
        for n, text in enumerate(parts, 1):
            out.append({"doc": url, "title": title, "url": _passage_url(url, n, len(parts)), "text": text})
    return out, [redact_text(note) for note in notes]


def split_passages(text: str) -> list[str]:
    """Split a document into passages of about 100–200 words at paragraph breaks; long paragraphs by words."""
    low, high = PASSAGE_WORDS
    paragraphs = [p.split() for p in re.split(r"\n\s*\n", text)]
    out: list[list[str]] = []
    cur: list[str] = []
    for words in paragraphs:
        if not words:
            continue
        if len(words) > high:  # one huge paragraph: cut into overlapping windows so no sentence is lost at a cut
            if cur:
                out.append(cur)
                cur = []
            step = (low + high) // 2
            for i in range(0, len(words), step - 25):
                out.append(words[i:i + step])
                if i + step >= len(words):
                    break
            continue
        if cur and len(cur) >= low and len(cur) + len(words) > high:
            out.append(cur)
            cur = []
        cur = cur + words
    if cur:
        out.append(cur)
    return [" ".join(p) for p in out]
