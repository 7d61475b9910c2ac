"""POPE and CHAIR: their metrics on hand-computed cases, the yes/no reader, the generated sets, the real-format
data, an eval through the CLI, and `--decoding` on run and eval (stored, kept by resume)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, toolpath_cli, write
from PIL import Image

from toolpath.evals.benchmarks import BenchmarkDataError, Record
from toolpath.evals.benchmarks.chair import CHAIR, caption_counts
from toolpath.evals.benchmarks.chair_coco import coco_mentions
from toolpath.evals.benchmarks.chair_metrics import chair_counts, chair_figures, plurals, shape_mentions
from toolpath.evals.benchmarks.pope import POPE
from toolpath.evals.benchmarks.pope_data import generated_records, read_pope_file, statistics
from toolpath.evals.benchmarks.pope_scoring import official_reading, pope_figures, sample_counts, toolpath_reading
from toolpath.evals.benchmarks.pope_sources import KnownImage, easyvqa_images, known_images, vocabulary
from toolpath.policies.base import Response

ENV = {"PYTHONPATH": str(ROOT / "tests") + ":" + str(ROOT)}


class ObjectPolicy:
    """Stands in for a VLM: says yes to every circle and no to anything else; captions every image the same."""

    def __init__(self, spec=None):
        self.name = "python:objects"

    def respond(self, messages, tools, **gen):
        q = next(m.content for m in messages if m.role == "user")
        m = re.search(r"Is there an? (.+?) in the image\?", q)
        if m is None:
            return Response(text="A red circle and two blue squares.", tokens_in=5, tokens_out=7)
        return Response(text="Yes." if "circle" in m.group(1) else "No, there is not.", tokens_in=5, tokens_out=2)


# ---- POPE: reading replies, metrics --------------------------------------------------------------------

@pytest.mark.parametrize("reply, official, toolpath", [
    ("Yes", "yes", "yes"), ("No", "no", "no"), ("no.", "no", "no"),
    ("No!", "yes", "no"),  # evaluate.py splits on spaces only: "No!" is not "No"
    ("NO", "yes", "no"),
    ("Yes, there is a red circle.", "yes", "yes"),
    ("There is no circle in the image.", "no", "no"),
    ("There is a red circle in the image.", "yes", "yes"),
    ("I don't see one.", "yes", "no"),  # evaluate.py knows no n't
    ("Not really.", "yes", "no"),  # nor a capital Not
    ("Yes. But not the blue one.", "yes", "yes"),  # only the first sentence counts
    ("Maybe, I am not sure.", "no", None),  # a hedge: unread in toolpath scoring
    ("", "yes", None), (None, "yes", None),
    ("The answer is no.", "no", "no"), ("True", "yes", "yes"),
])
def test_pope_reads_yes_and_no_as_its_evaluate_py_and_as_a_careful_grader(reply, official, toolpath):
    assert official_reading(reply) == official
    assert toolpath_reading(reply) == toolpath


def test_pope_figures_against_hand_computed_counts():
    # labels / readings: TP 3 (yes,yes ×3), FP 1 (no read yes), TN 2, FN 2 (one read no, one unread)
    pairs = [("yes", "yes")] * 3 + [("no", "yes")] + [("no", "no")] * 2 + [("yes", "no"), ("yes", None)]
    figures = pope_figures([sample_counts(label, said) for label, said in pairs])
    p, r = 3 / 4, 3 / 5
    assert figures == pytest.approx({"precision": p, "recall": r, "f1": 2 * p * r / (p + r), "yes_ratio": 4 / 8})
    assert pope_figures([sample_counts("no", "no")]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                                         "yes_ratio": 0.0}  # evaluate.py would divide by 0
    bench = POPE()
    rec = Record("r", "random", {"label": "no"})
    assert bench.score(rec, "No, there is none.") == 1.0
    assert bench.scored_as("official").score(rec, "No!") == 0.0 and bench.score(rec, "No!") == 1.0


# ---- POPE: the generated set ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    import os

    old = os.environ.get("TOOLPATH_HOME")
    os.environ["TOOLPATH_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        yield generated_records(seed=3, per_source=25)
    finally:
        if old is None:
            os.environ.pop("TOOLPATH_HOME")
        else:
            os.environ["TOOLPATH_HOME"] = old


def _images(source: str, seed: int = 3, n: int = 25) -> dict[str, KnownImage]:
    return {im.id: im for im in known_images(source, n, seed)}


def test_generated_pope_negatives_are_absent_and_positives_present(generated):
    images = {**_images("easy-vqa"), **_images("scenes")}
    assert {r.category for r in generated} == {"random", "popular", "adversarial"}
    for r in generated:
        im = images[r.data["image_id"]]
        assert r.data["object"] in vocabulary(im.source)
        if r.data["label"] == "yes":
            assert r.data["object"] in im.objects()
        else:  # never a name true of the image: no "rectangle" asked of a square, no "ellipse" of a circle
            assert r.data["object"] not in im.true_names()
        assert r.data["question"] == f"Is there {'an' if r.data['object'][0] in 'aeiou' else 'a'} " \
                                     f"{r.data['object']} in the image?"
    square = next(im for im in images.values() if any(s == "square" for _, s in im.shapes))
    assert "rectangle" in square.true_names()
    # each image's questions: positive, negative, ... and no name asked twice
    by_image: dict[tuple, list] = {}
    for r in generated:
        by_image.setdefault((r.category, r.data["image_id"]), []).append(r)
    for rows in by_image.values():
        assert [r.data["label"] for r in rows] == ["yes", "no"] * (len(rows) // 2)
        assert len({r.data["object"] for r in rows}) == len(rows)


def assert_negatives_follow(split, rows, images, by_freq, co):
    """Each negative of a popular/adversarial split is the first name in the split's order (frequency, or
    co-occurrence with the positive before it) not true of the image nor asked yet; else POPE's random fallback."""
    for im_id in {r.data["image_id"] for r in rows}:
        qs = [r for r in rows if r.data["image_id"] == im_id]
        asked = set(images[im_id].true_names())
        for pos, neg in zip(qs[::2], qs[1::2]):
            ranking = by_freq if split == "popular" else co.get(pos.data["object"], [])
            eligible = [n for n in ranking if n not in asked]
            if eligible:
                assert neg.data["object"] == eligible[0], (split, im_id)
            asked.add(neg.data["object"])


def test_tiny_vlm_pope_takes_its_negatives_from_the_training_scenes():
    """The tiny VLM's own set: held-out scenes, labels true by construction, popular/adversarial negatives in the
    order of the training scenes' frequencies and co-occurrences (not the evaluated images')."""
    from toolpath.train import vlm_data
    from toolpath.train.vlm_pope import SOURCE, heldout_images, partner_agreement, records, training_statistics

    found = records(0, images=6, training_scenes=60)
    images = {im.id: im for im in heldout_images(0, 6)}
    train = {s.image.tobytes() for s in vlm_data.scenes(60, 0)}
    held = vlm_data.scenes(6, 0, heldout=True)
    assert not {s.image.tobytes() for s in held} & train  # never a training image
    assert [images[f"vlmscene-0-{i:03d}"].shapes for i in range(6)] == [tuple(s.objects) for s in held]
    by_freq, co = training_statistics(0, 60)
    for r in found:
        im = images[r.data["image_id"]]
        assert r.data["source"] == SOURCE and Image.open(r.data["image"]).size == (64, 64)
        assert (r.data["object"] in im.objects()) == (r.data["label"] == "yes")
        assert r.data["object"] not in im.true_names() or r.data["label"] == "yes"
    # a 1.5:1 "square" may be drawn: neither of a square/rectangle or circle/ellipse pair is ever asked as absent
    assert {"square", "rectangle"} <= KnownImage("x", SOURCE, (("red", "square"),)).true_names()
    assert {"circle", "ellipse"} <= KnownImage("x", SOURCE, (("red", "ellipse"),)).true_names()
    for split in ("popular", "adversarial"):
        assert_negatives_follow(split, [r for r in found if r.category == split], images, by_freq, co)
    assert [r.id for r in records(0, images=6, training_scenes=60)] == [r.id for r in found]
    with pytest.raises(ValueError, match="POPE split 'hard'"):
        records(0, splits=("hard",), images=1, training_scenes=5)
    # a fixed companion is found again in the other half; scenes of one object have none to find
    paired = [(("red", "circle"), ("blue", "square")), (("red", "circle"), ("blue", "square"), ("green", "star"))]
    assert partner_agreement(paired * 4) == 1.0
    with pytest.raises(ValueError, match="no object has a companion"):
        partner_agreement([(("red", "circle"),)] * 4)


def test_generated_pope_popular_and_adversarial_follow_their_order(generated):
    for source in ("easy-vqa", "scenes"):
        images = _images(source)
        by_freq, co = statistics(list(images.values()))
        freq_rank = {n: i for i, n in enumerate(by_freq)}
        for split in ("popular", "adversarial"):
            rows = [r for r in generated if r.category == split and r.data["source"] == source]
            assert_negatives_follow(split, rows, images, by_freq, co)
        popular = [r.data["object"] for r in generated if r.category == "popular" and r.data["label"] == "no"
                   and r.data["source"] == source]
        random_ = [r.data["object"] for r in generated if r.category == "random" and r.data["label"] == "no"
                   and r.data["source"] == source]

        def mean_rank(names, freq_rank=freq_rank, by_freq=by_freq):
            return sum(freq_rank.get(n, len(by_freq)) for n in names) / len(names)

        assert mean_rank(popular) < mean_rank(random_)  # popular negatives are the frequent objects


def test_generated_sets_are_deterministic_by_seed(generated, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    again = generated_records(seed=3, per_source=25)
    assert [(r.id, r.data["object"], r.data["label"]) for r in again] == \
           [(r.id, r.data["object"], r.data["label"]) for r in generated]
    other = generated_records(seed=4, per_source=25)
    assert [r.data["object"] for r in other] != [r.data["object"] for r in generated]
    scene = next(r for r in again if r.data["source"] == "scenes")
    with Image.open(scene.data["image"]) as im:
        assert im.size == (384, 288)


def test_easyvqa_objects_come_from_its_own_questions():
    images = easyvqa_images()
    assert len(images) > 800  # the few whose questions do not pin shape and colour down are left out
    import easy_vqa

    texts, answers, ids = easy_vqa.get_test_questions()
    by_id = {im.id: im.shapes[0] for im in images}
    for q, a, i in zip(texts, answers, ids):
        color, shape = by_id.get(f"easyvqa-{i}", (None, None))
        if shape and q in (f"what is the {color} shape?", "what shape is in the image?"):
            assert a == shape
        if color and q in ("what color is the shape?", f"what color is the {shape}?"):
            assert a == color


# ---- POPE: real-format files ---------------------------------------------------------------------------

def _pope_file(folder, lines: list) -> object:
    for name in ("a.jpg", "b.jpg"):
        Image.new("RGB", (8, 8), "white").save(folder / name)
    return write(folder / "coco_pope_popular.json", "\n".join(line if isinstance(line, str) else json.dumps(line)
                                                             for line in lines) + "\n")


def test_pope_reads_real_format_files_with_images_beside_or_elsewhere(tmp_path, monkeypatch):
    rows = [{"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?", "label": "yes"},
            {"question_id": 2, "image": "b.jpg", "text": "Is there a cat in the image?", "label": "no"}]
    path = _pope_file(tmp_path, rows)
    records = list(POPE(data=path).records())
    assert [(r.category, r.data["label"], r.data["question"]) for r in records] == [
        ("popular", "yes", "Is there a dog in the image?"), ("popular", "no", "Is there a cat in the image?")]
    assert records[0].data["image"] == str((tmp_path / "a.jpg").resolve())
    # the images elsewhere: TOOLPATH_POPE_IMAGES
    other = tmp_path / "q"
    other.mkdir()
    (other / "coco_pope_popular.json").write_text(path.read_text())
    monkeypatch.setenv("TOOLPATH_POPE_IMAGES", str(tmp_path))
    assert len(list(POPE(data=other).records())) == 2
    monkeypatch.setenv("TOOLPATH_POPE_SPLIT", "random")
    assert list(POPE(data=other).records()) == []  # only the random split asked for; this file is popular


@pytest.mark.parametrize("line, message", [
    ('{"question_id": 1, "image": "a.jpg", "text": "Is there a dog?", "label": "yes"',
     r"coco_pope_popular.json:2: not valid JSON"),
    ({"question_id": 3, "image": "a.jpg", "text": "Is there a dog?"}, r":2: missing field\(s\) label"),
    ({"question_id": 3, "image": "a.jpg", "text": "Is there a dog?", "label": "maybe"},
     r":2: label: expected yes or no"),
    ({"question_id": 3, "image": "gone.jpg", "text": "Is there a dog?", "label": "no"},
     r":2: image not found: .*gone.jpg"),
    ({"question_id": 1, "image": "a.jpg", "text": "Is there a dog?", "label": "no"},
     r":2: question_id 1 repeats line 1"),
])
def test_pope_bad_lines_are_named_with_file_and_line(tmp_path, line, message):
    first = {"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?", "label": "yes"}
    path = _pope_file(tmp_path, [first, line])
    with pytest.raises(BenchmarkDataError, match=message):
        read_pope_file(path)


def test_pope_split_option_is_checked(monkeypatch):
    monkeypatch.setenv("TOOLPATH_POPE_SPLIT", "hard")
    with pytest.raises(BenchmarkDataError, match="TOOLPATH_POPE_SPLIT='hard': expected one of random, popular"):
        POPE()


# ---- CHAIR ---------------------------------------------------------------------------------------------

def test_chair_figures_against_hand_computed_counts():
    # captions: 3 mentions / 1 hallucinated; 2 mentions / 0; 1 mention / 1; objects 2, 3, 1; covered 2, 2, 0
    rows = [{"mentions": 3, "hallucinated": 1, "objects": 2, "covered": 2},
            {"mentions": 2, "hallucinated": 0, "objects": 3, "covered": 2},
            {"mentions": 1, "hallucinated": 1, "objects": 1, "covered": 0}]
    assert chair_figures(rows) == pytest.approx({"chair_s": 2 / 3, "chair_i": 2 / 6, "recall": 4 / 6,
                                                 "mentions_per_caption": 2.0})
    same = lambda o, m: o == m  # noqa: E731
    assert chair_counts(["dog", "dog", "cat"], ["dog", "car"], same) == {"mentions": 3, "hallucinated": 1,
                                                                          "objects": 2, "covered": 1}


def test_chair_reads_shapes_colours_and_plurals():
    assert shape_mentions("Two green triangles, a grey oval and a large red filled circle.") == [
        ("green", "triangle"), ("gray", "ellipse"), ("red", "circle")]
    assert shape_mentions("a red, blue square and a star") == [("blue", "square"), (None, "star")]
    assert shape_mentions("A teal disk next to some shapes") == [("cyan", "circle")]
    assert {"knives"} <= plurals("knife") and "policemen" in plurals("policeman") and "buses" in plurals("bus")


def test_chair_square_rectangle_and_colour_decisions():
    scene = Record("s", "scenes", {"source": "scenes", "objects": [["red", "square"], ["blue", "ellipse"]]})
    counts, bad = caption_counts(scene, "A red rectangle, a blue oval, a blue circle and a square.")
    # a square is a rectangle: not hallucinated; an ellipse is not a circle; a bare "square" names the red one
    assert bad == ["blue circle"] and counts == {"mentions": 4, "hallucinated": 1, "objects": 2, "covered": 2}
    _, bad = caption_counts(scene, "A red ellipse and a green square.")
    assert bad == ["red ellipse", "green square"]
    easy = Record("e", "easy-vqa", {"source": "easy-vqa", "objects": [["teal", "rectangle"]]})
    assert caption_counts(easy, "A cyan square.")[1] == []  # easy-vqa rectangles include squares; teal is cyan
    assert CHAIR().score(scene, "A red square.") == 1.0 and CHAIR().score(scene, "Red squares and a star.") == 0.0


def test_chair_coco_vocabulary_follows_chair_rules():
    assert coco_mentions("A man riding a motor bike next to two dogs.") == ["person", "motorcycle", "dog"]
    assert coco_mentions("Baby birds near hot dogs and wine glasses.") == ["bird", "hot dog", "wine glass"]
    assert coco_mentions("A toilet with its seat up, a bow tie, knives and mice.") == ["toilet", "tie", "knife",
                                                                                      "mouse"]
    assert coco_mentions("A passenger jet over the train tracks.") == ["airplane"]
    assert coco_mentions("A chair and a seat.") == ["chair", "chair"]


def test_chair_reads_coco_instances_and_names_bad_input(tmp_path, monkeypatch):
    for name in ("COCO_val2014_1.jpg", "COCO_val2014_2.jpg"):
        Image.new("RGB", (8, 8), "white").save(tmp_path / name)
    inst = {"images": [{"id": 1, "file_name": "COCO_val2014_1.jpg"}, {"id": 2, "file_name": "COCO_val2014_2.jpg"}],
            "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}, {"id": 62, "name": "chair"}],
            "annotations": [{"image_id": 1, "category_id": 1}, {"image_id": 1, "category_id": 18},
                            {"image_id": 2, "category_id": 62}]}
    path = write(tmp_path / "instances_val2014.json", json.dumps(inst))
    write(tmp_path / "captions_val2014.json", json.dumps({"annotations": [
        {"image_id": 2, "caption": "A cat sleeps on a chair."}]}))
    bench = CHAIR(data=path)
    records = list(bench.records())
    assert [(r.id, r.data["objects"]) for r in records] == [("coco-1", ["dog", "person"]),
                                                            ("coco-2", ["cat", "chair"])]
    score = bench.score(records[0], "A woman walks two puppies past a bench.")
    assert score == 0.0 and score.metrics == {"mentions": 3, "hallucinated": 1, "objects": 2, "covered": 2}
    assert "bench" in score.explanation
    (tmp_path / "COCO_val2014_2.jpg").unlink()
    with pytest.raises(BenchmarkDataError, match=r"image 2 not found: .*COCO_val2014_2.jpg .*TOOLPATH_CHAIR_IMAGES"):
        list(CHAIR(data=path).records())
    write(tmp_path / "bad.json", json.dumps({"images": []}))
    with pytest.raises(BenchmarkDataError, match="bad.json: expected COCO instance annotations"):
        list(CHAIR(data=tmp_path / "bad.json").records())


# ---- through the CLI: metrics, --decoding --------------------------------------------------------------

def test_pope_eval_through_the_cli_reports_pooled_metrics(home):
    r = toolpath_cli("eval", "pope", "--limit", "12", "--model", "python:test_pope_chair:ObjectPolicy", "--json",
                     home=home, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    records = list(POPE().records(limit=12))
    said = {rec.id: "yes" if "circle" in rec.data["object"] else "no" for rec in records}
    expect = pope_figures([sample_counts(rec.data["label"], said[rec.id]) for rec in records])
    assert out["n"] == 12 and set(out["by_category"]) == {"random", "popular", "adversarial"}
    assert out["score"] == pytest.approx(sum(said[x.id] == x.data["label"] for x in records) / 12)
    assert out["metrics"] == pytest.approx({k: round(v, 4) for k, v in expect.items()})
    assert set(out["by_category"]["random"]["metrics"]) == {"precision", "recall", "f1", "yes_ratio"}


def test_chair_eval_through_the_cli(home):
    r = toolpath_cli("eval", "chair", "--limit", "4", "--model", "python:test_pope_chair:ObjectPolicy", "--json",
                     home=home, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["metrics"]) == {"chair_s", "chair_i", "recall", "mentions_per_caption"}
    assert out["metrics"]["mentions_per_caption"] == 2.0
    assert out["score"] == pytest.approx(1 - out["metrics"]["chair_s"])


def test_decoding_is_stored_in_the_eval_and_kept_by_resume(store):
    from toolpath.evals.runner import run_eval

    class Stop(Exception):
        pass

    def stop_after_one(i, n, sample):
        raise Stop

    with pytest.raises(Stop):
        run_eval("pope", store, model="python:test_pope_chair:ObjectPolicy", limit=2, decoding={"kind": "vcd"},
                 on_sample=stop_after_one)
    eval_id = store.list_evals()[0]["id"]
    assert store.find_eval(eval_id)["params"]["decoding"]["kind"] == "vcd"
    again = run_eval("pope", store, resume=eval_id)  # no decoding given: the interrupted eval's is kept
    assert again.summary()["n"] == 2
    specs = [json.loads(store.get_run(s.run_id)["spec"]) for s in again.samples]
    assert [s["model"]["options"]["decoding"]["kind"] for s in specs] == ["vcd", "vcd"]


def test_decoding_flag_on_run_and_eval(home, tmp_path):
    script = write(tmp_path / "r.yaml", '- "Yes."\n')
    spec = write(tmp_path / "t.yaml", "id: t\ninstruction: Is there a dog?\ntools: []\n"
                                      f"model: scripted:{script}\n")
    r = toolpath_cli("run", spec, "--decoding", "shield", "--json", home=home)
    assert r.returncode == 0, r.stderr
    from toolpath.runs import Store

    run = Store(home).get_run(json.loads(r.stdout)["run_id"])
    assert json.loads(run["spec"])["model"]["options"]["decoding"]["kind"] == "shield"
    r = toolpath_cli("run", spec, "--decoding", '{"kind": "vcd", "alpha": 0.5}', "--json", home=home)
    assert r.returncode == 0, r.stderr
    bad = toolpath_cli("run", spec, "--decoding", '{"kind": vcd}', home=home)
    assert bad.returncode == 2 and "--decoding" in bad.stderr and "not valid JSON" in bad.stderr
    bad = toolpath_cli("eval", "pope", "--decoding", "vcd shield", home=home)
    assert bad.returncode == 2 and "expected a decoding kind" in bad.stderr
