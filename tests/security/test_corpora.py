"""Hostile search and retrieval corpora, made of real files on disk: links out of the corpus and in loops,
FIFOs, sockets, sparse files past the size bound, images whose header claims billions of pixels, secrets in
documents, and index builds that fail or are killed. Each hostile file is skipped and named once with the
reason, the rest of the corpus is searched, nothing outside the corpus is read, no secret reaches the cache,
and no half-written index survives."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import zlib

import pytest
from conftest import ROOT, write

from toolpath.tools import corpus as corpus_mod
from toolpath.tools.registry import ToolError, get_tool
from toolpath.tools.search import cache as search_cache

MARKER = "zanzibarquokka"  # the outside file's word: it must never be indexed or returned
GOOD = "Glaciers carve U-shaped valleys as they flow downhill under their own weight."
BIG = 2 << 30  # the 2 GB file: sparse, so it costs no disk


def _png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims width x height pixels (PIL reads the size before any pixel)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def _socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    return s  # a bound socket file stays after close; keep it referenced until the corpus is built


# Each hostile entry: (file name in the corpus, how it is made, words its note must hold).
HOSTILE = [
    ("shadow.txt", lambda d, out: os.symlink("/etc/shadow", d / "shadow.txt"), "leaves the corpus"),
    ("outside.md", lambda d, out: os.symlink(out / "secret.md", d / "outside.md"), "leaves the corpus"),
    ("up.txt", lambda d, out: os.symlink("../outside/secret.md", d / "up.txt"), "leaves the corpus"),
    ("loop.txt", lambda d, out: os.symlink("loop.txt", d / "loop.txt"), "link loop"),
    ("ping.txt", lambda d, out: (os.symlink("pong.txt", d / "ping.txt"), os.symlink("ping.txt", d / "pong.txt")),
     "link loop"),
    ("gone.html", lambda d, out: os.symlink("nowhere.html", d / "gone.html"), "broken link"),
    ("pipe.txt", lambda d, out: os.mkfifo(d / "pipe.txt"), "FIFO"),
    ("sub/pipe.jsonl", lambda d, out: os.mkfifo(d / "sub" / "pipe.jsonl"), "FIFO"),
    ("sock.md", lambda d, out: _socket(d / "sock.md").close(), "socket"),
    ("huge.txt", lambda d, out: os.truncate(write(d / "huge.txt", "x"), BIG), "over the 32 MiB bound"),
    ("outdir/", lambda d, out: os.symlink(out, d / "outdir"), "link to a folder"),
    ("pipe.png", lambda d, out: os.mkfifo(d / "pipe.png"), "FIFO"),
    ("shadow.jpg", lambda d, out: os.symlink("/etc/shadow", d / "shadow.jpg"), "leaves the corpus"),
    ("bomb.png", lambda d, out: (d / "bomb.png").write_bytes(_png_claiming(100_000, 100_000)), "pixel"),
    ("huge.png", lambda d, out: os.truncate(write(d / "huge.png", "x"), BIG), "over the 32 MiB bound"),
]
TEXT_HOSTILE = [h for h in HOSTILE if not h[0].endswith((".png", ".jpg"))]
IMAGE_HOSTILE = [h for h in HOSTILE if h[0].endswith((".png", ".jpg"))]


def hostile_corpus(base):
    """docs/ with one good document, a link to it, a real image and every hostile entry; outside/ beside it."""
    from PIL import Image

    out, docs = base / "outside", base / "docs"
    write(out / "secret.md", f"# Secret\n\n{MARKER} lives outside the corpus.")
    write(docs / "good.txt", GOOD)
    (docs / "sub").mkdir()
    os.symlink("good.txt", docs / "alias.txt")  # a link inside the corpus: read once, where it points
    Image.new("RGB", (64, 48), (200, 40, 40)).save(docs / "red.png")
    for _name, make, _ in HOSTILE:
        make(docs, out)
    return docs


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return hostile_corpus(tmp_path_factory.mktemp("corpora"))


@pytest.fixture(autouse=True)
def clean(home, monkeypatch):
    for var in ("TOOLPATH_SEARCH_CORPUS", "TOOLPATH_SEARCH_URL", "TOOLPATH_SEARCH_RERANK", "TOOLPATH_SEARCH_BACKEND",
                "TOOLPATH_IMAGE_CORPUS", "TOOLPATH_RETRIEVE_CORPUS", corpus_mod.MAX_MB_VAR):
        monkeypatch.delenv(var, raising=False)
    search_cache.clear_memory_cache()
    yield
    search_cache.clear_memory_cache()


def _noted_once(notes, name, words):
    mine = [n for n in notes if n.startswith(name + ":") or n.startswith(name.rstrip("/") + "/:")]
    assert len(mine) == 1, f"{name} should be named once in the notes, got {mine} of {notes}"
    assert words in mine[0], mine[0]


def _everything_under(folder) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


# The guard: a FIFO that blocked an open() would hang the process, so the hostile corpus is searched in a
# child process that must return by its timeout (a hang fails the test; nothing is timed).
SEARCH_IN_A_CHILD = """
import json, sys
from pathlib import Path
from toolpath.tools.registry import ToolContext, get_tool
from toolpath.tools.search.text_index import text_index
from toolpath.tools.search.images import image_index
text = get_tool("search").call({"query": "glaciers valleys quokka", "k": 5})
shown = get_tool("image_search").call({"image": "red.png", "k": 5}, ToolContext(inputs=[Path(sys.argv[1])]))
print(json.dumps({"text": text.content, "hits": [h["url"] for h in text.data],
                  "notes": text_index(Path(sys.argv[2])).notes, "images": [h["path"] for h in shown.data],
                  "image_notes": image_index(Path(sys.argv[2]))[1]}))
"""


@pytest.fixture(scope="module")
def searched(docs, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_SEARCH_CORPUS": str(docs),
           "TOOLPATH_IMAGE_CORPUS": str(docs), "PYTHONPATH": str(ROOT)}
    for var in ("TOOLPATH_SEARCH_URL", "TOOLPATH_SEARCH_BACKEND", "TOOLPATH_SEARCH_RERANK", corpus_mod.MAX_MB_VAR):
        env.pop(var, None)
    try:
        out = subprocess.run([sys.executable, "-c", SEARCH_IN_A_CHILD, str(docs / "red.png"), str(docs)], env=env,
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("searching a corpus with FIFOs and sockets in it never returned")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1]), home


def test_search_skips_every_hostile_file_and_searches_the_rest(searched):
    result, _ = searched
    assert MARKER not in json.dumps(result) and "root:" not in json.dumps(result)
    assert [h.split("#")[0].rsplit("/", 1)[1] for h in result["hits"]] == ["good.txt"]  # the link adds no copy
    assert "note:" in result["text"]


@pytest.mark.parametrize("name, words", [(h[0], h[2]) for h in TEXT_HOSTILE])
def test_each_hostile_text_file_is_named_once_with_why(searched, name, words):
    _noted_once(searched[0]["notes"], name, words)


@pytest.mark.parametrize("name, words", [(h[0], h[2]) for h in IMAGE_HOSTILE])
def test_each_hostile_image_is_named_once_with_why(searched, name, words):
    result, _ = searched
    assert [os.path.basename(p) for p in result["images"]] == ["red.png"]
    _noted_once(result["image_notes"], name, words)


def test_nothing_outside_the_corpus_reaches_the_cache(searched):
    _, home = searched
    cached = _everything_under(home / "search")
    assert MARKER.encode() not in cached and b"root:x:" not in cached
    assert not list((home / "search").glob("*.tmp"))


def test_retrieve_walks_the_same_way(docs, home, monkeypatch):
    """retrieve's text and image walks are the shared one; a FIFO here would hang, so it runs in a daemon thread
    the test can leave behind (as a guard, not a timing)."""
    import threading

    from test_retrieval import tiny_model

    from toolpath.tools.retrieval import model as M
    from toolpath.tools.retrieval import text as text_mod

    text_mod._MODELS.clear()
    folder = home / "models" / "metaembed"
    folder.mkdir(parents=True)
    M.save(tiny_model(), folder)
    monkeypatch.setenv("TOOLPATH_RETRIEVE_CORPUS", str(docs))
    box = {}
    worker = threading.Thread(target=lambda: box.update(r=get_tool("retrieve").call({"query": "glaciers", "k": 5})),
                              daemon=True)
    worker.start()
    worker.join(120)
    assert "r" in box, "retrieve over a corpus with FIFOs never returned"
    r = box["r"]
    assert [d["url"].split("#")[0].rsplit("/", 1)[1] for d in r.data] == ["good.txt"]
    assert MARKER not in r.content and MARKER.encode() not in _everything_under(home / "search")
    from toolpath.tools.retrieval.text import text_index

    notes = text_index(docs)[0].notes
    for name, _, words in TEXT_HOSTILE:
        _noted_once(notes, name, words)
    assert r.content.count("outdir/:") == 1  # seen by the text and the image walk, named once


def test_the_size_bound_is_configurable_and_checked(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    write(docs / "small.txt", GOOD)
    os.truncate(write(docs / "two_mib.txt", "x"), 2 << 20)
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(docs))
    monkeypatch.setenv(corpus_mod.MAX_MB_VAR, "1")
    r = get_tool("search").call({"query": "glaciers"})
    assert r.data[0]["title"] == "small" and "two_mib.txt: 2.0 MiB, over the 1 MiB bound" in r.content
    for bad in ("lots", "-3", "0"):
        monkeypatch.setenv(corpus_mod.MAX_MB_VAR, bad)
        with pytest.raises(ToolError, match=f"{corpus_mod.MAX_MB_VAR}=.*is not a size"):
            get_tool("search").call({"query": "glaciers"})


def test_a_file_swapped_for_a_fifo_after_the_walk_is_not_opened_blocking(tmp_path):
    """The walk checks with stat; the read checks again on the open descriptor, which O_NONBLOCK gets at once."""
    os.mkfifo(tmp_path / "late.txt")
    with pytest.raises(corpus_mod.Unreadable, match="FIFO"):
        corpus_mod.read_bytes(tmp_path / "late.txt")
    os.symlink(tmp_path / "late.txt", tmp_path / "link.txt")
    with pytest.raises(OSError):  # the walk gives real paths: a link put in later is not followed
        corpus_mod.read_bytes(tmp_path / "link.txt")


# --- secrets -----------------------------------------------------------------------------------------------------

SECRET = "tok-4f9a8c2e7b1d6053aa"
UNRELATED = "sk-unrelated-to-this-corpus-77"


def _secret_corpus(tmp_path):
    docs = tmp_path / "docs"
    write(docs / "notes.md", f"# Deploy notes\n\nGlaciers aside, the deploy token is {SECRET} and the mirror is "
                             "https://deploy:hunter2hunter2@mirror.example/simple for pip.")
    write(docs / "records.jsonl", json.dumps({"title": f"key {SECRET}", "url": f"https://x.example/?k={SECRET}",
                                              "text": f"Glaciers and {SECRET} again."}) + "\n")
    return docs


def test_a_secret_in_a_document_never_reaches_the_cache_or_a_hit(tmp_path, home, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(_secret_corpus(tmp_path)))
    r = get_tool("search").call({"query": "glaciers deploy token", "k": 5})
    assert len(r.data) == 2 and "[redacted]" in r.content
    shown = r.content + json.dumps(r.data)
    assert SECRET not in shown and "hunter2hunter2" not in shown
    cached = _everything_under(home / "search")
    assert cached and SECRET.encode() not in cached and b"hunter2hunter2" not in cached
    assert SECRET.split("-")[1].encode() not in cached  # nor the token's pieces in the BM25 vocabulary


def test_a_secret_known_only_later_replaces_the_index_that_held_it(tmp_path, home, monkeypatch):
    monkeypatch.delenv("DEPLOY_TOKEN", raising=False)
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(_secret_corpus(tmp_path)))
    get_tool("search").call({"query": "glaciers"})
    assert SECRET.encode() in _everything_under(home / "search")  # not a secret yet: indexed as any word
    builds = search_cache.stats["text_builds"]
    monkeypatch.setenv("OTHER_API_KEY", UNRELATED)  # a key the corpus does not hold: the index is reused
    search_cache.clear_memory_cache()
    get_tool("search").call({"query": "glaciers"})
    assert search_cache.stats["text_builds"] == builds
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    assert SECRET not in get_tool("search").call({"query": "glaciers deploy"}).content
    assert SECRET.encode() not in _everything_under(home / "search")  # the old index is gone, not kept beside


def _tiny_metaembed(home):
    """A tiny MetaEmbed where `retrieve` looks for its model."""
    from test_retrieval import tiny_model

    from toolpath.tools.retrieval import model as M
    from toolpath.tools.retrieval import text as text_mod

    text_mod._MODELS.clear()
    folder = home / "models" / "metaembed"
    folder.mkdir(parents=True)
    M.save(tiny_model(), folder)


def test_retrieval_manifest_is_redacted(tmp_path, home, monkeypatch):
    _tiny_metaembed(home)
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    monkeypatch.setenv("TOOLPATH_RETRIEVE_CORPUS", str(_secret_corpus(tmp_path)))
    r = get_tool("retrieve").call({"query": "deploy token", "k": 5})
    assert r.data and SECRET not in r.content + json.dumps(r.data)
    cached = _everything_under(home / "search")
    assert SECRET.encode() not in cached and b"hunter2hunter2" not in cached


def test_a_retrieval_index_is_rebuilt_for_a_secret_known_later_only_when_it_holds_it(tmp_path, home, monkeypatch):
    from toolpath.tools.retrieval import index as retrieval_index

    _tiny_metaembed(home)
    monkeypatch.delenv("DEPLOY_TOKEN", raising=False)
    monkeypatch.setenv("TOOLPATH_RETRIEVE_CORPUS", str(_secret_corpus(tmp_path)))
    get_tool("retrieve").call({"query": "deploy token", "k": 5})
    assert SECRET.encode() in _everything_under(home / "search")  # not a secret yet
    builds = retrieval_index.stats["builds"]
    monkeypatch.setenv("OTHER_API_KEY", UNRELATED)
    search_cache.clear_memory_cache()
    get_tool("retrieve").call({"query": "deploy token", "k": 5})
    assert retrieval_index.stats["builds"] == builds  # reused: the manifest does not hold that key
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    search_cache.clear_memory_cache()  # as a new process that knows the token: from disk
    r = get_tool("retrieve").call({"query": "deploy token", "k": 5})
    assert retrieval_index.stats["builds"] == builds + 1
    assert r.data and SECRET not in r.content + json.dumps(r.data)
    assert SECRET.encode() not in _everything_under(home / "search")


# --- half-written indexes ------------------------------------------------------------------------------------------


def test_a_build_that_fails_leaves_no_tmp_and_the_old_index(tmp_path, home, monkeypatch):
    import bm25s

    docs = tmp_path / "docs"
    write(docs / "a.txt", GOOD)
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(docs))
    get_tool("search").call({"query": "glaciers"})
    [old] = (home / "search").iterdir()
    write(docs / "b.txt", "Fjords are glacial valleys drowned by the sea.")
    search_cache.clear_memory_cache()

    def out_of_memory(*args, **kwargs):  # what a corpus too large for memory does mid-build
        raise MemoryError

    monkeypatch.setattr(bm25s.BM25, "index", out_of_memory)
    with pytest.raises(ToolError, match="search: MemoryError"):
        get_tool("search").call({"query": "fjords"})
    assert list((home / "search").iterdir()) == [old]  # no .tmp, and the last good index untouched
    assert json.loads((old / "passages.json").read_text())["passages"][0]["title"] == "a"


KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
from toolpath.tools.search import cache
def build(tmp):
    (tmp / "passages.json").write_text("half")
    os.kill(os.getpid(), signal.SIGKILL)
cache.cached_index(Path(sys.argv[1]) / "search" / "text-0123456789-abcdef", "passages.json", None, build, "test")
"""


def test_a_killed_build_leaves_a_tmp_that_the_next_run_removes(tmp_path, home, monkeypatch):
    killed = subprocess.run([sys.executable, "-c", KILLED_BUILD, str(home)], capture_output=True, text=True,
                            timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [stale] = (home / "search").glob("*.tmp")
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:  # a build in progress in another living process is left alone
        in_progress = home / "search" / f"text-9876543210-fedcba.{live.pid}.x1y2.tmp"
        in_progress.mkdir()
        monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(write(tmp_path / "docs" / "a.txt", GOOD).parent))
        assert get_tool("search").call({"query": "glaciers"}).data
        assert not stale.exists() and in_progress.is_dir()
    finally:
        live.communicate(b"", timeout=30)
    search_cache.clear_memory_cache()
    write(tmp_path / "docs" / "b.txt", "Fjords are glacial valleys drowned by the sea.")
    get_tool("search").call({"query": "fjords"})  # its builder has left now: the next build removes it
    assert not list((home / "search").glob("*.tmp"))
