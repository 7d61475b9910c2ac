"""MindCube and Omni3D-Bench adapters: loaders, answer extraction, MRA, the overall that leaves translation
out, and both benchmarks end to end through `toolpath eval` with a scripted policy and the react agent."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHARED_DATA, toolpath_cli, write

from toolpath.evals.benchmarks import BenchmarkDataError, Record, get_benchmark, pick
from toolpath.evals.benchmarks.mindcube import SAMPLE_FILE, MindCube, extract_answer, setting_of
from toolpath.evals.benchmarks.omni3d_bench import Omni3DBench
from toolpath.evals.runner import EvalResult, SampleResult
from toolpath.evals.scorers import SCORERS, integer, mra, omni3d, score, short_answer

MINDCUBE_DATA = SHARED_DATA / "mindcube"
OMNI3D_DATA = SHARED_DATA / "omni3d_bench"
needs_mindcube = pytest.mark.skipif(not MINDCUBE_DATA.is_dir(), reason=f"no MindCube images at {MINDCUBE_DATA}")
needs_omni3d = pytest.mark.skipif(not OMNI3D_DATA.is_dir(), reason=f"no Omni3D-Bench data at {OMNI3D_DATA}")


def png(path: Path) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (90, 120, 150)).save(path)
    return path


def mc_item(id_, gt="B", images=("scene/front_1.png", "scene/back_2.png"), **extra):
    return {"id": id_, "category": ["among", "x"], "type": "view", "meta_info": [{"k": 1}],
            "question": "Which image is the back view? A. Image 1 B. Image 2 C. Neither", "gt_answer": gt,
            "images": list(images), **extra}


def mc_file(tmp_path, items, extra_lines=()):
    root = tmp_path / "mc"
    for item in items:
        for rel in item.get("images", []) if isinstance(item, dict) else []:
            png(root / rel)
    lines = [json.dumps(i) if not isinstance(i, str) else i for i in items] + list(extra_lines)
    return write(tmp_path / "q.jsonl", "\n".join(lines) + "\n"), root


# ---- MindCube: loader ---------------------------------------------------------------------------------

def test_mindcube_loader_keeps_every_field_and_tables_by_setting(tmp_path):
    items = [mc_item("among_g1_q1"), mc_item("around_g2_q1", gt="a"), mc_item("rotation_g3_q1", gt="C"),
             mc_item("translation_g4_q1")]
    path, root = mc_file(tmp_path, items)
    recs = list(MindCube(question_file=path, data_dir=root).records())
    assert [(r.id, r.category) for r in recs] == [("among_g1_q1", "among"), ("around_g2_q1", "around"),
                                                 ("rotation_g3_q1", "rotation"), ("translation_g4_q1", "translation")]
    d = recs[0].data
    assert d["question"] == items[0]["question"] and d["images"] == items[0]["images"]
    assert (d["category"], d["type"], d["meta_info"]) == (["among", "x"], "view", [{"k": 1}])
    assert d["image_paths"] == [str((root / p).resolve()) for p in items[0]["images"]]
    assert recs[1].data["gt_answer"] == "A"  # a lower-case letter in the file is read as the option


def test_mindcube_optional_fields_default(tmp_path):
    item = {k: v for k, v in mc_item("among_1").items() if k not in ("category", "type", "meta_info")}
    path, root = mc_file(tmp_path, [item])
    (rec,) = MindCube(question_file=path, data_dir=root).records()
    assert (rec.data["category"], rec.data["type"], rec.data["meta_info"]) == ([], "", [])


@pytest.mark.parametrize("bad, message", [
    ("{not json", r"q\.jsonl:3: not valid JSON"),
    (json.dumps([1, 2]), r"q\.jsonl:3: expected a JSON object, got list"),
    (json.dumps({"id": "among_x", "question": "q"}), r"q\.jsonl:3: missing field\(s\) gt_answer, images"),
    (json.dumps(mc_item("among_x", gt="F")), r"q\.jsonl:3: gt_answer: expected one letter A-E, got 'F'"),
    (json.dumps(mc_item("among_x", images=[])), r"q\.jsonl:3: images: expected a non-empty list"),
    (json.dumps(mc_item("among_1")), r"q\.jsonl:3: id 'among_1' repeats line 1"),
    (json.dumps(mc_item("among_x", images=["scene/nowhere.png"])),
     r"q\.jsonl:3: image not found: .*scene/nowhere\.png .*set TOOLPATH_MINDCUBE_DIR"),
])
def test_mindcube_bad_line_stops_the_load_naming_file_and_line(tmp_path, bad, message):
    # Line 2 is blank (skipped, but still counted), so the bad line is line 3.
    path, root = mc_file(tmp_path, [mc_item("among_1"), ""], extra_lines=[bad])
    with pytest.raises(BenchmarkDataError, match=message):
        list(MindCube(question_file=path, data_dir=root).records())


def test_mindcube_missing_file_or_folder_names_path_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_MINDCUBE_FILE", str(tmp_path / "none.jsonl"))
    with pytest.raises(BenchmarkDataError,
                       match=r"question file not found: .*none\.jsonl \(set TOOLPATH_MINDCUBE_FILE"):
        list(MindCube().records())
    path, _ = mc_file(tmp_path, [mc_item("among_1")])
    with pytest.raises(BenchmarkDataError, match=r"data folder not found: .*gone \(set TOOLPATH_MINDCUBE_DIR"):
        list(MindCube(question_file=path, data_dir=tmp_path / "gone").records())
    write(tmp_path / "empty.jsonl", "\n\n")
    with pytest.raises(BenchmarkDataError, match=r"empty\.jsonl: no questions"):
        list(MindCube(question_file=tmp_path / "empty.jsonl", data_dir=tmp_path).records())


def test_data_locations_follow_the_variables_and_default_to_nothing_outside_the_package(tmp_path, monkeypatch):
    for var in ("TOOLPATH_MINDCUBE_FILE", "TOOLPATH_MINDCUBE_DIR", "TOOLPATH_OMNI3D_FILE", "TOOLPATH_OMNI3D_DIR"):
        monkeypatch.delenv(var, raising=False)
    mc, om = MindCube(), Omni3DBench()
    assert mc.data_dir is None and mc.question_file == SAMPLE_FILE  # the question sample ships in the package
    assert om.data_dir is None and om.annotations is None
    with pytest.raises(BenchmarkDataError,
                       match=r"MindCube data folder: none given \(set TOOLPATH_MINDCUBE_DIR.*--data"):
        list(mc.records())
    with pytest.raises(BenchmarkDataError, match=r"Omni3D-Bench data folder: none given \(set TOOLPATH_OMNI3D_DIR"):
        list(om.records())
    assert MindCube(data=tmp_path / "c").data_dir == tmp_path / "c"  # toolpath eval mindcube --data PATH
    monkeypatch.setenv("TOOLPATH_MINDCUBE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("TOOLPATH_MINDCUBE_FILE", str(tmp_path / "q.jsonl"))
    monkeypatch.setenv("TOOLPATH_OMNI3D_DIR", str(tmp_path / "b"))
    mc, om = MindCube(), Omni3DBench()
    assert (mc.data_dir, mc.question_file) == (tmp_path / "a", tmp_path / "q.jsonl")
    assert (om.data_dir, om.annotations) == (tmp_path / "b", tmp_path / "b" / "annotations_sample.json")


@pytest.mark.parametrize("id_, setting", [
    ("among_group693_q1_5_2", "among"), ("around_new_12_q3", "around"), ("rotation_0122_01", "rotation"),
    ("translation_7", "translation"), ("Around_X", "around"),
    ("mc_rotation_3", "rotation"),        # not a prefix: MindCube's substring rule
    ("x_among_around_1", "around"),       # MindCube checks around before among
    ("scene_42", "other"),
])
def test_setting_from_id(id_, setting):
    assert setting_of(id_) == setting


# ---- MindCube: answer extraction and scoring ----------------------------------------------------------

@pytest.mark.parametrize("reply, letter", [
    ("B. Left of the chair", "B"),
    ("(C) the back view", "C"),
    ("**D.** because it faces away", "D"),
    ("C. is my pick <Answer>B</Answer>", "C"),                              # 1. "X." opening beats everything
    ("Image 2 looks like A, but <Answer>C</Answer>", "C"),                  # 2. the <Answer> section ...
    ("Answer: A. Then again... <answer>My answer is D</answer>", "D"),       # ... beats "Answer: X"
    ("<Answer>B. Image 3</Answer>", "B"),
    ("I would rule out C here. The answer is B, not E", "B"),             # 3. "answer is X" beats lone letters
    ("Final answer: (D)", "D"),
    ("Answer: A and later answer: C", "C"),                               # the last labelled one
    ("Between A and C I pick C", "C"),                                    # 4. the last lone capital A-E
    ("E.g. image 2 faces it, so A", "A"),                                 # "E.g." is not an option
    ("B", "B"),
    ("I'd say A", "A"),
    ("the answer is a chair", None),                                      # lower-case letters are words
    ("b", None), ("I cannot tell.", None), ("", None), (None, None), (7, None), (["A"], None),
])
def test_mindcube_answer_extraction_priority(reply, letter):
    assert extract_answer(reply) == letter


def test_mindcube_score_is_the_task_evaluator_score(tmp_path):
    path, root = mc_file(tmp_path, [mc_item("among_1", gt="B")])
    bench = MindCube(question_file=path, data_dir=root)
    (rec,) = bench.records()
    spec = bench.to_task(rec)
    for reply in ("B. Image 2", "<Answer>A</Answer>", "no idea", None, "The answer is B"):
        assert bench.score(rec, reply) == score(spec.evaluator, reply)  # `toolpath run` scores it the same
    assert [bench.score(rec, r) for r in ("B. Image 2", "<Answer>A</Answer>", "no idea", None)] == [1.0, 0.0, 0.0, 0.0]


def test_mindcube_task_spec(tmp_path, monkeypatch):
    monkeypatch.delenv("TOOLPATH_MINDCUBE_AGENT", raising=False)
    path, root = mc_file(tmp_path, [mc_item("among g/1:odd")])  # an id no task spec may carry as it is
    (rec,) = MindCube(question_file=path, data_dir=root).records()
    spec = MindCube(question_file=path, data_dir=root).to_task(rec, model="scripted:/x.yaml")
    assert spec.id == "among-g-1-odd" and spec.metadata["record_id"] == "among g/1:odd"
    assert spec.agent.name == "visual_program" and spec.sandbox.kind == "process"
    assert spec.model.name == "scripted:/x.yaml"
    assert rec.data["question"] in spec.instruction and "A. Image 1 B. Image 2" in spec.instruction
    assert "letter" in spec.instruction and "image 1, image 2" in spec.instruction
    assert [str(p) for p in spec.inputs.images] == rec.data["image_paths"]
    assert all(p.is_absolute() for p in spec.inputs.images)
    assert (spec.evaluator.name, spec.evaluator.expected) == ("mindcube_choice", "B")
    assert spec.metadata["benchmark"] == "mindcube" and spec.metadata["category"] == "among"
    assert MindCube(agent="react").to_task(rec).agent.name == "react"
    monkeypatch.setenv("TOOLPATH_MINDCUBE_AGENT", "react")
    assert MindCube().to_task(rec).agent.name == "react"


# ---- the overall score: MindCube leaves translation out -----------------------------------------------

def _result(scores, excludes=()):
    samples = [SampleResult(f"s{i}", cat, f"r{i}", "finished", sc, 10, 0.1) for i, (cat, sc) in enumerate(scores)]
    return EvalResult("e1", "b", "m", samples=samples, overall_excludes=excludes)


def test_overall_leaves_translation_out_but_tables_it():
    scores = [("among", 1.0), ("among", 0.0), ("around", 1.0), ("rotation", 0.0),
              ("translation", 1.0), ("translation", 1.0), ("translation", 1.0)]
    s = _result(scores, excludes=MindCube.overall_excludes).summary()
    assert s["score"] == 2 / 4  # among 1+0, around 1, rotation 0: translation's three 1s do not count
    assert (s["n"], s["n_overall"], s["overall_excludes"]) == (7, 4, ["translation"])
    assert {k: (v["n"], v["score"]) for k, v in s["by_category"].items()} == {
        "among": (2, 0.5), "around": (1, 1.0), "rotation": (1, 0.0), "translation": (3, 1.0)}
    plain = _result(scores).summary()  # a benchmark without the attribute: every sample, and no extra keys
    assert plain["score"] == 5 / 7 and "overall_excludes" not in plain and "n_overall" not in plain
    only_translation = _result([("translation", 1.0)], excludes=("translation",)).summary()
    assert (only_translation["score"], only_translation["n_overall"]) == (0.0, 0)


def test_pick_spreads_a_limit_over_categories():
    recs = [Record(f"r{i}", cat) for i, cat in enumerate("aaaabbc")]
    assert [r.id for r in pick(recs, 3, 0)] == ["r0", "r4", "r6"]
    assert [r.id for r in pick(recs, 5, 0)] == ["r0", "r4", "r6", "r1", "r5"]
    assert [r.id for r in pick(recs, None, 0)] == [r.id for r in recs] == [r.id for r in pick(recs, 99, 0)]
    assert [r.id for r in pick(recs, 3, 7)] == [r.id for r in pick(recs, 3, 7)]  # a seed is reproducible
    assert sorted(r.id for r in pick(recs, None, 7)) == sorted(r.id for r in recs)


# ---- MRA and the Omni3D-Bench scorers -----------------------------------------------------------------

@pytest.mark.parametrize("reply, gt, value", [
    ("10", 10, 1.0),
    ("12", 10, 0.6),      # |12-10|/10 = 0.2 < 0.50 … 0.25 (6 of 10); not < 0.20 (strict)
    ("8", 10, 0.6),
    ("10.4", 10, 1.0),    # 0.04 < 0.05: every threshold
    ("10.6", 10, 0.9),    # 0.06: all but 0.05
    ("14", 10, 0.2),      # 0.4: only 0.50 and 0.45
    ("15", 10, 0.0),      # 0.5 is not < 0.5
    ("2.5", 2, 0.5),      # 0.25: 0.50, 0.45, 0.40, 0.35, 0.30
    ("-10", 10, 0.0),
    ("about 11 m, since 2 of them stack to 22, so 11", 10, 0.8),  # the last number: 0.1 < 0.50 … 0.15
    ("<ans>9</ans> (I measured 3 tiles)", 10, 0.8),                 # the tag wins over later numbers
    ("two", 2, 1.0), ("0", 0, 1.0), ("1", 0, 0.0),
    ("no idea", 1.5, 0.0), ("", 1.5, 0.0), (None, 1.5, 0.0), ("inf", 1.5, 0.0), ("1e999", 1.5, 0.0),
    ("3", "not a number", 0.0),
])
def test_mra_hand_computed(reply, gt, value):
    assert mra(reply, gt, {}) == pytest.approx(value)


@pytest.mark.parametrize("reply, gt, value", [
    ("9", 9, 1.0), ("There are 9 handles.", 9, 1.0), ("nine", 9, 1.0), ("9.0", 9, 1.0), ("<ans>3</ans>", 3, 1.0),
    ("9.5", 9, 0.0), ("10", 9, 0.0), ("many", 9, 0.0), (None, 9, 0.0),
])
def test_integer_exact(reply, gt, value):
    assert integer(reply, gt, {}) == value


@pytest.mark.parametrize("reply, gt, value", [
    ("yes", "yes", 1.0), ("Yes.", "yes", 1.0), ("Yes, it would still be visible", "yes", 1.0), ("True", "yes", 1.0),
    ("No", "yes", 0.0), ("yesterday", "yes", 0.0), ("not sure, yes", "yes", 0.0),
    ("The sofa.", "sofa", 1.0), ("Answer: washing machine", "washing machine", 1.0), ("<ans>S</ans>", "S", 1.0),
    ("TV stand", "tv stand", 1.0), ("03:15", "03:15", 1.0), ("tv", "tv stand", 0.0), ("coffee table", "sofa", 0.0),
    ("", "sofa", 0.0), (None, "no", 0.0),
])
def test_short_answer_exact_after_normalising(reply, gt, value):
    assert short_answer(reply, gt, {}) == value


def test_omni3d_scorer_dispatches_on_answer_type():
    assert omni3d("12", 10, {"answer_type": "float"}) == pytest.approx(0.6)
    assert omni3d("12", 10, {"answer_type": "int"}) == 0.0
    assert omni3d("Yes.", "yes", {"answer_type": "str"}) == 1.0
    with pytest.raises(ValueError, match="answer_type must be one of int, float, str"):
        omni3d("1", 1, {})  # a spec's mistake, not the model's: said, not scored 0
    assert {"mindcube_choice", "mra", "omni3d", "integer", "short_answer"} <= set(SCORERS)


# ---- Omni3D-Bench: loader -----------------------------------------------------------------------------

@needs_omni3d
def test_omni3d_loader_on_the_real_annotations():
    recs = list(Omni3DBench(data_dir=OMNI3D_DATA).records())
    assert len(recs) == 156 and len({r.id for r in recs}) == 156
    assert Counter(r.category for r in recs) == {"float": 74, "str": 46, "int": 36}
    assert all(Path(r.data["image_path"]).is_file() for r in recs)
    kinds = {"int": int, "float": (int, float), "str": str}
    assert all(isinstance(r.data["answer"], kinds[r.category]) for r in recs)
    first = recs[0].data
    assert (first["answer"], first["answer_type"]) == (0.948, "float")
    assert first["image_filename"] == "ARKitScenes/Training/43828442/91339.246_00000463.jpg"


@needs_omni3d
def test_omni3d_task_spec_and_score_agree():
    bench = Omni3DBench(agent="react", data_dir=OMNI3D_DATA)
    by_type = {}
    for r in bench.records():
        by_type.setdefault(r.category, r)
    for kind, rec in by_type.items():
        spec = bench.to_task(rec)
        assert spec.agent.name == "react" and spec.sandbox.kind == "process"
        assert [str(p) for p in spec.inputs.images] == [rec.data["image_path"]]
        assert spec.instruction.startswith(rec.data["question"])
        assert {"int": "whole number", "float": "single number", "str": "short phrase"}[kind] in spec.instruction
        assert (spec.evaluator.name, spec.evaluator.options) == ("omni3d", {"answer_type": kind, "scoring": "toolpath",
                                                                        "official": "vadar"})
        assert spec.metadata["category"] == kind and spec.metadata["benchmark"] == "omni3d_bench"
        for reply in ("yes", "3", str(rec.data["answer"]), "1.2", None, "nothing"):
            assert bench.score(rec, reply) == score(spec.evaluator, reply)
        assert bench.score(rec, str(rec.data["answer"])) == 1.0


def omni3d_root(tmp_path, questions):
    root = tmp_path / "o3"
    png(root / "images" / "s" / "a.jpg")
    write(root / "ann.json", json.dumps({"questions": questions}))
    return root


GOOD_Q = {"image_filename": "s/a.jpg", "question": "How many?", "answer": 2, "answer_type": "int"}


@pytest.mark.parametrize("bad, message", [
    ({"question": "q", "answer": 1, "answer_type": "int"}, r"questions\[1\]: missing field\(s\) image_filename"),
    ({**GOOD_Q, "answer_type": "bool"}, r"questions\[1\]: answer_type: expected one of int, float, str, got 'bool'"),
    ({**GOOD_Q, "answer": 2.5}, r"questions\[1\]: answer 2.5 is not a valid int"),
    ({**GOOD_Q, "answer": True}, r"questions\[1\]: answer True is not a valid int"),
    ({**GOOD_Q, "answer_type": "float", "answer": "x"}, r"questions\[1\]: answer 'x' is not a valid float"),
    ({**GOOD_Q, "answer_type": "str", "answer": ""}, r"questions\[1\]: answer '' is not a valid str"),
    ({**GOOD_Q, "image_filename": "s/b.jpg"},
     r"questions\[1\]: image not found: .*images/s/b\.jpg .*TOOLPATH_OMNI3D_DIR"),
])
def test_omni3d_bad_entry_names_file_and_entry(tmp_path, bad, message):
    root = omni3d_root(tmp_path, [GOOD_Q, bad])
    with pytest.raises(BenchmarkDataError, match=r"ann\.json: " + message):
        list(Omni3DBench(data_dir=root, annotations=root / "ann.json").records())


def test_omni3d_unreadable_annotations(tmp_path):
    root = omni3d_root(tmp_path, [GOOD_Q])
    write(root / "bad.json", "{")
    with pytest.raises(BenchmarkDataError, match=r"bad\.json: not valid JSON"):
        list(Omni3DBench(data_dir=root, annotations=root / "bad.json").records())
    write(root / "list.json", "[]")
    with pytest.raises(BenchmarkDataError, match=r"list\.json: expected an object with a non-empty list"):
        list(Omni3DBench(data_dir=root, annotations=root / "list.json").records())
    (rec,) = Omni3DBench(data_dir=root, annotations=root / "ann.json").records()
    assert (rec.id, rec.category, rec.data["answer"]) == ("omni3d-000", "int", 2)


# ---- the shipped MindCube sample ----------------------------------------------------------------------

def _view(path: str) -> str:
    return Path(path).name.split("_")[0]


def _options(question: str) -> dict[str, str]:
    return dict(re.findall(r"([A-E])\. (.+?)(?= [A-E]\. |$)", question))


@needs_mindcube
def test_shipped_sample_answers_follow_from_the_view_names():
    """Each answer is re-derived from the view names in the image file names (front, left, back, right)."""
    recs = list(MindCube(question_file=SAMPLE_FILE, data_dir=MINDCUBE_DATA).records())
    assert 20 <= len(recs) <= 40 and {r.category for r in recs} == {"among"}
    opposite = {"front": "back", "back": "front", "left": "right", "right": "left"}
    for r in recs:
        views = [_view(p) for p in r.data["images"]]
        assert r.data["meta_info"]["views"] == views
        chosen = _options(r.data["question"])[r.data["gt_answer"]]
        kind = r.data["type"]
        if kind == "opposite_view":
            assert views[0] == "front" and views[int(chosen.split()[-1]) - 1] == "back"
        elif kind == "view_angle":
            assert views[0] == "front" and chosen == ("About 180°" if views[1] == "back" else "About 90°")
        else:
            assert kind == "opposite_pair"
            pairs = {k: [int(x) for x in re.findall(r"\d", v)] for k, v in _options(r.data["question"]).items()}
            good = [k for k, (a, b) in pairs.items() if opposite[views[a - 1]] == views[b - 1]]
            assert good == [r.data["gt_answer"]]  # exactly one option is an opposite pair, and it is the answer


# ---- end to end through the CLI -----------------------------------------------------------------------

ANSWER = """
- '<tool_call>{"name": "final_answer", "arguments": {"answer": "%s"}}</tool_call>'
"""


def table(stdout: str) -> dict[str, tuple[int, float]]:
    return {m[0]: (int(m[1]), float(m[2])) for m in re.findall(r"^(\w+)\s+(\d+)\s+([\d.]+)", stdout, re.M)}


@needs_omni3d
def test_eval_omni3d_bench_end_to_end(tmp_path, home):
    script = write(tmp_path / "r.yaml", ANSWER % "yes")
    r = toolpath_cli("eval", "omni3d_bench", "--limit", "3", "--model", f"scripted:{script}", home=home,
                     env={"TOOLPATH_OMNI3D_AGENT": "react", "TOOLPATH_OMNI3D_DIR": str(OMNI3D_DATA),
                          "TOOLPATH_PROGRESS_SECONDS": "0"})  # a progress line per sample, not one every 10 s
    assert r.returncode == 0, r.stderr
    # --limit 3 takes one question of each answer type; "yes" is right only for the str one (its answer is yes)
    assert table(r.stdout) == {"float": (1, 0.0), "int": (1, 0.0), "str": (1, 1.0), "all": (3, 0.333)}
    assert [f"{n}/3 samples" in r.stderr for n in (1, 2, 3)] == [True] * 3 and "3 samples in" in r.stderr
    from toolpath.runs import Store

    s = Store(home)
    eval_id = re.search(r"eval (\S+)", r.stdout).group(1)
    runs = s.list_runs(eval_id=eval_id)
    assert len(runs) == 3 and sorted(x["score"] for x in runs) == [0.0, 0.0, 1.0]


@needs_mindcube
def test_eval_mindcube_sample_end_to_end(tmp_path, home):
    script = write(tmp_path / "r.yaml", ANSWER % "B")
    r = toolpath_cli("eval", "mindcube", "--limit", "3", "--model", f"scripted:{script}", home=home,
                     env={"TOOLPATH_MINDCUBE_AGENT": "react", "TOOLPATH_MINDCUBE_DIR": str(MINDCUBE_DATA),
                          "TOOLPATH_MINDCUBE_FILE": str(SAMPLE_FILE)})
    assert r.returncode == 0, r.stderr
    first3 = [json.loads(line)["gt_answer"] for line in SAMPLE_FILE.read_text().splitlines()[:3]]
    want = round(first3.count("B") / 3, 3)
    rows = table(r.stdout)
    assert rows["among"] == (3, want) and rows["all"] == (3, want)
    assert "(all leaves out translation, as mindcube reports it)" in r.stdout


def test_eval_mindcube_every_setting_overall_without_translation(tmp_path, home):
    items = [mc_item("among_1", gt="B"), mc_item("around_1", gt="B"), mc_item("rotation_1", gt="A"),
             mc_item("translation_1", gt="B")]
    path, root = mc_file(tmp_path, items)
    script = write(tmp_path / "r.yaml", ANSWER % "B. Image 2")
    env = {"TOOLPATH_MINDCUBE_AGENT": "react", "TOOLPATH_MINDCUBE_DIR": str(root), "TOOLPATH_MINDCUBE_FILE": str(path)}
    r = toolpath_cli("eval", "mindcube", "--model", f"scripted:{script}", home=home, env=env)
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert {k: rows[k] for k in ("among", "around", "rotation", "translation")} == {
        "among": (1, 1.0), "around": (1, 1.0), "rotation": (1, 0.0), "translation": (1, 1.0)}
    assert rows["all"] == (3, 0.667)  # 2 of 3 without translation; with it, it would be 3 of 4
    j = toolpath_cli("eval", "mindcube", "--model", f"scripted:{script}", "--json", home=home, env=env)
    out = json.loads(j.stdout)
    assert (out["n"], out["n_overall"], out["overall_excludes"]) == (4, 3, ["translation"])
    assert out["score"] == pytest.approx(2 / 3)


def test_eval_with_bad_data_says_which_file_and_variable(tmp_path, home):
    path, root = mc_file(tmp_path, [mc_item("among_1")], extra_lines=["{oops"])
    r = toolpath_cli("eval", "mindcube", home=home,
                     env={"TOOLPATH_MINDCUBE_FILE": str(path), "TOOLPATH_MINDCUBE_DIR": str(root)})
    assert r.returncode == 2 and f"{path}:2: not valid JSON" in r.stderr and "Traceback" not in r.stderr
    r = toolpath_cli("eval", "omni3d_bench", home=home, env={"TOOLPATH_OMNI3D_DIR": str(tmp_path / "none")})
    assert r.returncode == 2 and "TOOLPATH_OMNI3D_DIR" in r.stderr and str(tmp_path / "none") in r.stderr


def test_both_are_registered():
    assert isinstance(get_benchmark("mindcube"), MindCube) and isinstance(get_benchmark("omni3d_bench"), Omni3DBench)


@pytest.mark.parametrize("reply, gt, value", [
    ("The answer is yes.", "yes", 1.0), ("I think yes", "yes", 1.0), ("It would be: No.", "no", 1.0),
    ("The answer is true", "yes", 1.0), ("No, yes", "yes", 0.0), ("The answer is yes or no", "yes", 0.0),
    ("Maybe yes", "yes", 0.0), ("I can't tell, yes", "yes", 0.0), ("The answer is yes.", "no", 0.0),
    ("It is visible", "yes", 0.0),
])
def test_a_yes_or_no_is_read_wherever_the_reply_says_it_once(reply, gt, value):
    assert short_answer(reply, gt, {}) == value


# ---- scoring modes: the published scorers, bugs included, beside ours --------------------------------------

@pytest.mark.parametrize("answer, expected, kind, official, vlmevalkit, ours", [
    ("3", 3, "int", 1.0, 1.0, 1.0),
    ("3.0", 3, "int", 0.0, 0.0, 1.0),           # int("3.0") raises in both published scorers
    ("<ans>3</ans>", 3, "int", 0.0, 1.0, 1.0),  # VADAR reads no tags
    ("Yes.", "yes", "str", 0.0, 1.0, 1.0),       # VADAR: exact; VLMEvalKit: substring
    ("not sure", "no", "str", 0.0, 1.0, 0.0),    # VLMEvalKit's substring: "no" is in "not"
    ("ne", "NE", "str", 0.0, 0.0, 1.0),          # the ground truth is never lowercased: "NE" cannot be matched
    ("approximately 0.623 meters", 0.623, "float", 0.0, 0.0, 1.0),
    ("40", -2.0, "float", 1.0, 1.0, 0.0),        # a negative ground truth passes every threshold
    ("0", 0.0, "float", 0.0, 0.0, 1.0),          # the published code divides by zero here
])
def test_omni3d_official_scorers_beside_ours(answer, expected, kind, official, vlmevalkit, ours):
    from toolpath.evals.benchmarks.omni3d_bench import score_case

    case = {"answer": answer, "expected": expected, "answer_type": kind}
    assert score_case({**case, "official": "vadar"}, "official") == official
    assert score_case({**case, "official": "vlmevalkit"}, "official") == vlmevalkit
    assert score_case(case, "toolpath") == ours


def test_omni3d_names_an_unknown_published_scorer(monkeypatch):
    monkeypatch.setenv("TOOLPATH_OMNI3D_OFFICIAL", "lmms-eval")
    with pytest.raises(BenchmarkDataError, match="TOOLPATH_OMNI3D_OFFICIAL='lmms-eval'.*vadar, vlmevalkit"):
        Omni3DBench()


@pytest.mark.parametrize("reply, official, ours", [
    ("B", 1.0, 1.0),
    ("Not C. The answer is B", 0.0, 1.0),   # MindCube takes the last "X." anywhere first: C
    ("<Answer>B</Answer>", 1.0, 1.0),
    ("Between C and B, B", 0.0, 1.0),       # its last resort is the first lone capital of the last line
    ("b", 0.0, 0.0),
])
def test_mindcube_official_extractor_beside_ours(reply, official, ours):
    from toolpath.evals.benchmarks.mindcube import score_case

    assert score_case({"answer": reply, "gt_answer": "B"}, "official") == official
    assert score_case({"answer": reply, "gt_answer": "B"}, "toolpath") == ours


def test_a_spec_names_a_bad_scoring_mode():
    from pydantic import ValidationError

    from toolpath.spec import TaskSpec

    with pytest.raises(ValidationError, match="options.scoring must be one of toolpath, official, got 'strict'"):
        TaskSpec.model_validate({"id": "x", "instruction": "q",
                                 "evaluator": {"name": "omni3d", "options": {"scoring": "strict"}}})
