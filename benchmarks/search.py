"""Search tools: image_search on crops of real images against a whole-image descriptor, and search latency
against a plain scan of the same passages, both measured in the same run.

    python benchmarks/search.py [--crops 100] [--seed 0]

Images: every .jpg/.png under ../shared/data (MindCube and Omni3D-Bench). Each query is a random crop of
40–60 % of an image's sides, half of them also resized; a hit is the original as the top result. The baseline
describes each image once, whole, with the same descriptor: what a single global embedding would do.
Text: a corpus of --docs documents made of shuffled sentences of examples/corpus; the baseline scores every
passage by how many query words it holds, in plain Python.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def image_rows(crops: int, seed: int, tmp: Path) -> None:
    import numpy as np
    from PIL import Image

    from toolpath.tools.registry import ToolContext, get_tool
    from toolpath.tools.search.images import _describe, _load_small

    files = sorted(p for p in (ROOT.parent / "shared" / "data").rglob("*") if p.suffix.lower() in (".jpg", ".png"))
    if len(files) < 20:
        print(f"image_search: only {len(files)} images under shared/data; not measured")
        return
    folder = tmp / "images"
    folder.mkdir()
    for i, f in enumerate(files):
        os.symlink(f, folder / f"{i:04d}{f.suffix.lower()}")
    os.environ["TOOLPATH_IMAGE_CORPUS"] = str(folder)
    tool = get_tool("image_search")
    rng = random.Random(seed)
    queries = []
    for n in range(crops):
        i = rng.randrange(len(files))
        with Image.open(files[i]) as im:
            im = im.convert("RGB")
            w, h = im.size
            cw, ch = int(w * rng.uniform(0.4, 0.6)), int(h * rng.uniform(0.4, 0.6))
            x, y = rng.randrange(w - cw + 1), rng.randrange(h - ch + 1)
            crop = im.crop((x, y, x + cw, y + ch))
            if n % 2:
                crop = crop.resize((max(8, int(cw * 0.6)), max(8, int(ch * 0.6))))
        path = tmp / f"crop_{n}.png"
        crop.save(path)
        queries.append((i, path))
    t = time.perf_counter()
    tool.call({"image": "q", "k": 1}, ToolContext(images={"q": queries[0][1]}))  # builds the index
    build = time.perf_counter() - t
    hits, times = 0, []
    for i, path in queries:
        t = time.perf_counter()
        r = tool.call({"image": "q", "k": 1}, ToolContext(images={"q": path}))
        times.append(time.perf_counter() - t)
        hits += Path(r.data[0]["url"].removeprefix("file://")).resolve() == files[i].resolve()
    # Baseline: one descriptor per whole image, cosine against the whole query.
    whole = []
    for f in files:
        im = _load_small(f)
        whole.append(_describe(im, [(0, 0, im.width, im.height)])[0])
    whole = np.asarray(whole, dtype=np.float32)
    base_hits = 0
    for i, path in queries:
        q = _load_small(path)
        v = np.asarray(_describe(q, [(0, 0, q.width, q.height)])[0], dtype=np.float32)
        base_hits += int(np.argmax(whole @ v)) == i
    acc, base = hits / len(queries), base_hits / len(queries)
    print(f"image_search over {len(files)} images: index {build:.1f} s, query {statistics.median(times) * 1000:.0f} ms")
    print(f"top-1 on {len(queries)} crops (40-60 %, half resized): windows {acc:.3f}, whole-image baseline {base:.3f}")
    print(f"ratio windows / whole-image top-1: {acc / max(base, 1e-9):.2f}")


def text_rows(tmp: Path, docs: int, seed: int) -> None:
    """Latency on a corpus of `docs` documents made of shuffled sentences of examples/corpus (so queries match)."""
    from toolpath.tools.registry import get_tool
    from toolpath.tools.search.text_index import text_index

    sentences = []
    for f in sorted((ROOT / "examples" / "corpus").iterdir()):
        sentences += [x for x in re.split(r"(?<=[.!?])\s+", re.sub(r"<[^>]+>", " ", f.read_text())) if len(x) > 30]
    rng = random.Random(seed)
    corpus = tmp / "corpus"
    corpus.mkdir()
    for d in range(docs):
        (corpus / f"doc{d:05d}.txt").write_text(" ".join(rng.choice(sentences) for _ in range(rng.randint(8, 40))))
    os.environ["TOOLPATH_SEARCH_CORPUS"] = str(corpus)
    tool = get_tool("search")
    queries = ["first ascent of Mount Everest", "how do honeybees communicate", "volcano eruption magma",
               "who created the Python language", "attention in the transformer architecture"]
    t = time.perf_counter()
    tool.call({"query": queries[0]})
    first = time.perf_counter() - t
    times = []
    for _ in range(5):
        for q in queries:
            t = time.perf_counter()
            tool.call({"query": q, "k": 3})
            times.append(time.perf_counter() - t)
    passages = [p["text"] for p in text_index(corpus).passages]
    scan = []
    for q in queries:
        t = time.perf_counter()
        words = set(re.findall(r"\w+", q.lower()))
        sorted(range(len(passages)), key=lambda j: -len(words & set(re.findall(r"\w+", passages[j].lower()))))[:3]
        scan.append(time.perf_counter() - t)
    s, b = statistics.median(times), statistics.median(scan)
    print(f"search over {docs} documents ({len(passages)} passages): index {first:.1f} s (imports included), "
          f"query {s * 1000:.1f} ms (the whole tool call: file check, BM25, snippets)")
    print(f"word-overlap scan of the same passages: {b * 1000:.1f} ms; ratio search / scan: {s / b:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--crops", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TOOLPATH_HOME"] = str(Path(tmp) / "home")  # a cold index cache, measured from scratch
        text_rows(Path(tmp), args.docs, args.seed)
        image_rows(args.crops, args.seed, Path(tmp))


if __name__ == "__main__":
    main()
