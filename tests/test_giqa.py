"""Grounding-IQA: the assess_quality tool finds planted distortions where they are, the giqa benchmark's
generation is deterministic and its scorer rewards the truth, and an edit step that adds an artifact is caught."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolpath.evals.benchmarks.giqa_plant import plant
from toolpath.evals.benchmarks.giqa_scoring import description_of, iou, match, read_regions
from toolpath.tools.image.edit_artifacts import artifact_free
from toolpath.tools.image.grounded_quality import assess, find_regions
from toolpath.tools.registry import ToolContext, ToolError, load_tools

BOX = [96, 64, 224, 176]


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    """A textured 320x256 picture: smooth shading, small blobs with edges, fine texture."""
    import cv2

    rng = np.random.default_rng(3)
    h, w = 256, 320
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([90 + 0.3 * x, 110 + 0.25 * y, 140 - 0.1 * x], -1)
    texture = cv2.GaussianBlur(rng.normal(0, 40, (h, w)).astype(np.float32), (0, 0), 1.2)[..., None]
    img = base + texture
    for _ in range(25):
        cx, cy, r = rng.integers(0, w), rng.integers(0, h), rng.integers(4, 9)
        img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.integers(30, 220, 3)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_clean_picture_has_no_regions(clean):
    a = assess(clean)
    assert a.regions == []
    assert 0.0 <= a.score <= 1.0
    assert "No localized distortion" in a.as_dict()["description"]


# Known misses on this picture (its only detail is fine texture, which a strong blur flattens into what reads
# as a flat tile; its cast is a tint of a picture that is already colourful, too little beside its coloured
# blobs): kept as expected failures so that a better measure shows up as XPASS. docs/results/giqa.md has the
# figures.
WEAK = pytest.mark.xfail(reason="the tile measure misses this distortion on a finely textured picture", strict=False)


@pytest.mark.parametrize("kind", [pytest.param("blur", marks=WEAK), "noise", "jpeg",
                                  "overexposure", "underexposure", pytest.param("color_cast", marks=WEAK)])
def test_each_planted_distortion_is_found_with_its_type(clean, kind):
    out = plant(clean, kind, 0.8, BOX, seed=1)
    regions = find_regions(out)
    best = max(regions, key=lambda r: iou(r.box, BOX))
    assert iou(best.box, BOX) > 0.5 and best.type == kind, [(r.type, r.box) for r in regions]
    assert 0.0 < best.severity <= 1.0


def test_description_names_boxes_inline_and_reads_back(clean):
    data = assess(plant(clean, "noise", 0.8, BOX, seed=1)).as_dict()
    said = read_regions(data["description"])
    assert [r["type"] for r in data["regions"]] == [t for t, _ in said]
    # the types not found are named too, so "is there blur?" is answered by the text either way
    assert "No blur, JPEG blocking" in data["description"]
    assert match(said, [{"type": "noise", "box": BOX}])["miou"] > 0.5


def test_box_restricts_the_assessment(clean):
    out = plant(clean, "noise", 0.8, BOX, seed=1)
    inside = assess(out, box=[120, 80, 200, 160])
    assert [r.type for r in inside.regions] == ["noise"]
    assert inside.regions[0].box == [120, 80, 200, 160]
    # what was found in the asked box comes first, every type named with its yes or no
    data = inside.as_dict()
    assert next(iter(data)) == "finding"
    assert data["finding"].startswith("Found noise (strong) in this box. Not found there: blur")
    outside = assess(out, box=[240, 180, 320, 256])
    assert outside.regions == [] and outside.as_dict()["finding"].startswith("Found no distortion in this box")
    outside.distortion = "noise"  # asked about one type, the finding opens with its yes or no
    assert outside.as_dict()["finding"] == "No: there is no noise in this box."
    inside.distortion = "noise"
    assert inside.as_dict()["finding"] == "Yes: noise is in this box (strong)."
    assert "finding" not in assess(out).as_dict()  # the whole picture: the description leads


def _ctx(tmp_path, clean) -> ToolContext:
    from PIL import Image

    path = tmp_path / "pic.png"
    Image.fromarray(clean).save(path)
    return ToolContext(images={"image_1": path}, inputs=[path])


def test_tool_returns_json_and_bad_arguments_are_clear(tmp_path, clean):
    t = load_tools()["assess_quality"]
    ctx = _ctx(tmp_path, clean)
    data = json.loads(t.call({"image": "image_1"}, ctx).content)
    assert set(data) >= {"regions", "score", "description"}
    with pytest.raises(ToolError, match="unknown image 'image_9'"):
        t.call({"image": "image_9"}, ctx)
    with pytest.raises(ToolError, match=r"box \[10, 10, 5, 40\] is not inside the 320x256 image"):
        t.call({"image": "image_1", "box": [10, 10, 5, 40]}, ctx)
    with pytest.raises(ToolError, match="box must be"):
        t.call({"image": "image_1", "box": [1, 2, 3]}, ctx)
    with pytest.raises(ToolError, match="distortion 'haze' is not one this tool measures; choose from blur, noise"):
        t.call({"image": "image_1", "distortion": "haze"}, ctx)
    asked = json.loads(t.call({"image": "image_1", "distortion": "Colour-cast"}, ctx).content)
    assert asked["finding"] == "No: there is no colour cast in the image."


def test_scorer_gives_truth_one_and_a_wrong_box_less():
    truth = [{"type": "blur", "box": [0, 0, 100, 100]}, {"type": "noise", "box": [150, 150, 250, 220]}]
    right = read_regions(description_of(truth))
    assert match(right, truth) == {"miou": 1.0, "type_acc": 1.0, "said": 2, "true": 2}
    moved = read_regions(description_of([{"type": "blur", "box": [50, 50, 150, 150]}, truth[1]]))
    assert match(moved, truth)["miou"] < 1.0
    swapped = read_regions(description_of([{**truth[0], "type": "jpeg"}, truth[1]]))
    assert match(swapped, truth)["type_acc"] == 0.5
    assert match([], truth)["miou"] == 0.0


def test_benchmark_generation_is_deterministic_and_scores_truth(monkeypatch, tmp_path):
    from toolpath.evals.benchmarks import BenchmarkDataError, giqa_data
    from toolpath.evals.benchmarks.giqa import GIQA

    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    monkeypatch.delenv(giqa_data.PHOTOS_ENV, raising=False)
    monkeypatch.setattr(giqa_data, "N_SCENES", 2)
    a = giqa_data.generated_records(5)
    b = giqa_data.generated_records(5)
    assert [(r.id, r.data) for r in a] == [(r.id, r.data) for r in b]
    assert [r.data for r in giqa_data.generated_records(6)] != [r.data for r in a]
    bench = GIQA()
    for r in a:
        truth = description_of(r.data["regions"]) if r.category == "des" else r.data["answer"]
        assert bench.score(r, truth) == 1.0, r.id
        spec = bench.to_task(r, model="scripted:x.yaml")
        assert "assess_quality" in spec.tools and spec.agent.params == {"first_call": "assess_quality"}
        assert "Call assess_quality on image_1" in spec.instruction
    yes_no = next(r for r in a if r.category == "yes_no")
    assert bench.to_task(yes_no).instruction.endswith("Reply with one word: yes or no.")
    alone = GIQA(tools=False).to_task(yes_no)
    assert alone.tools == [] and alone.agent.params == {} and "assess_quality" not in alone.instruction
    assert {r.category for r in GIQA(categories=["yes_no"]).records(seed=5)} == {"yes_no"}
    with pytest.raises(BenchmarkDataError, match="giqa has no category haze"):
        GIQA(categories=["haze"])
    des = next(r for r in a if r.category == "des")
    wrong = [{**t, "box": [t["box"][0] + 40, t["box"][1] + 40, t["box"][2] + 40, t["box"][3] + 40]}
             for t in des.data["regions"]]
    assert bench.score(des, description_of(wrong)) < 1.0


def test_giqa_bench_file_errors_name_the_line(tmp_path):
    from toolpath.evals.benchmarks import BenchmarkDataError
    from toolpath.evals.benchmarks.giqa_data import read_file

    (tmp_path / "a.png").write_bytes(b"")
    f = tmp_path / "bench.jsonl"
    good = {"id": "1", "image": "a.png", "task": "des", "regions": [{"type": "blur", "box": [0, 0, 4, 4]}]}
    bad = {"id": "2", "image": "a.png", "task": "des", "regions": [{"type": "haze"}]}
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(BenchmarkDataError, match=r"bench.jsonl:2: each region needs a type"):
        read_file(f)


def test_edit_check_flags_an_added_artifact_and_not_a_clean_edit(clean):
    mask = np.zeros(clean.shape[:2], bool)
    mask[20:60, 20:60] = True
    recolored = clean.copy()
    recolored[mask] = (200, 40, 40)
    assert artifact_free(clean, recolored, "recolor", [mask], []) == 1.0
    noised = plant(recolored, "noise", 0.8, BOX, seed=2)
    assert artifact_free(clean, noised, "recolor", [mask], []) < 0.8
    # noise inside the step's own area is the step's doing, not an artifact
    assert artifact_free(clean, noised, "recolor", [np.ones(mask.shape, bool)], []) == 1.0


def test_edit_check_flags_a_blur_outside_the_edited_area(clean):
    mask = np.zeros(clean.shape[:2], bool)
    mask[20:60, 20:60] = True
    recolored = clean.copy()
    recolored[mask] = (200, 40, 40)
    smeared = plant(recolored, "blur", 0.8, BOX, seed=2)
    assert artifact_free(clean, smeared, "recolor", [mask], []) < 0.8


def test_benchmark_figure_is_a_mean_with_its_interval():
    from toolpath.evals.intervals import mean_figure

    f = mean_figure([1.0, 0.0, 1.0, 1.0])
    assert f["value"] == 0.75 and f["n"] == 4 and 0.0 <= f["ci"][0] <= 0.75 <= f["ci"][1] <= 1.0
    assert mean_figure([]) == {"value": None, "ci": None, "n": 0}


def test_a_region_the_step_left_untouched_is_not_its_artifact(clean, monkeypatch):
    # Regions are judged against the picture's own baseline, so text written in one corner can tip an untouched
    # place over a bar; the edit check only blames the step for places whose pixels it changed.
    import toolpath.tools.image.edit_artifacts as edit_artifacts
    from toolpath.tools.image.grounded_quality import Region

    written = clean.copy()
    written[4:20, -60:-4] = 255  # the step's text, top right
    untouched = Region("noise", [0, 22, 60, 100], 0.5)
    monkeypatch.setattr(edit_artifacts, "find_regions", lambda image: [] if image is clean else [untouched])
    text_box = [clean.shape[1] - 60, 4, clean.shape[1] - 4, 20]
    assert edit_artifacts.artifact_free(clean, written, "text_add", [], [text_box]) == 1.0
    noised = written.copy()
    noised[22:100, 0:60] = np.clip(noised[22:100, 0:60].astype(int) + 40, 0, 255).astype(np.uint8)
    assert edit_artifacts.artifact_free(clean, noised, "text_add", [], []) == 0.5  # there it did change pixels
