"""FSD's grammar (policies.formats.fsd): the questions and how they are recognised, the tolerant parser that reports
a bad block and keeps the others, and the writers the offline policies answer with."""

from __future__ import annotations

import pytest

from toolpath.policies.formats.fsd import (
    QUESTIONS,
    FSDAnswer,
    format_box,
    format_object,
    format_points,
    format_relation,
    identify_point,
    identify_question,
    parse_fsd,
    question_kind,
)

TRACE = [[100, 200], [150, 180], [200, 160], [250, 150], [300, 150], [350, 160], [400, 180], [450, 200]]


# ---- questions ------------------------------------------------------------------------------------------

def test_every_question_says_the_grid_and_the_answer_shape():
    assert set(QUESTIONS) == {"relations", "trace", "affordance", "free_space"}
    for kind, q in QUESTIONS.items():
        assert "0-1000 grid" in q, kind
    assert "<ref>" in QUESTIONS["relations"] and "<pred>" in QUESTIONS["relations"]
    assert "eight" in QUESTIONS["trace"] and "[x8, y8]" in QUESTIONS["trace"]
    assert "<answer><box>" in QUESTIONS["affordance"]
    assert "<answer><point>" in QUESTIONS["free_space"]
    q = identify_question(512, 300)
    assert "<point>[[512, 300]]</point>" in q and "0-1000 grid" in q and "<ref>nothing</ref>" in q


def test_question_kind_recognises_each_question_inside_the_agent_message():
    for kind, q in QUESTIONS.items():
        msg = f"Task: put the red cube on the blue plate\nImage: 640x480 pixels; …\nQuestion: {q}"
        assert question_kind(msg) == kind
        # line breaks and case do not matter
        assert question_kind(msg.upper().replace(" ", "\n")) == kind
    assert question_kind("Question: " + identify_question(10, 990.5)) == "identify"
    assert question_kind("What is the capital of France?") is None
    assert question_kind(None) is None
    # several questions in one text: the last one asked is the one to answer
    assert question_kind(QUESTIONS["trace"] + "\n\n" + identify_question(1, 2)) == "identify"
    assert question_kind(identify_question(1, 2) + "\n\n" + QUESTIONS["affordance"]) == "affordance"


def test_identify_question_checks_its_point_and_reads_back():
    assert identify_point(identify_question(12, 999.5)) == (12.0, 999.5)
    assert identify_point("no question here") is None
    for bad in (-1, 1001, float("nan"), "5"):
        with pytest.raises(ValueError, match="0-1000 grid"):
            identify_question(bad, 10)


# ---- parsing --------------------------------------------------------------------------------------------

def test_a_trace_answer_with_reasoning():
    text = f"<think>The cube is left of the plate.</think>\n<answer>{format_points(TRACE)}</answer>"
    a = parse_fsd(text)
    assert a.think == "The cube is left of the plate."
    assert a.points == [[[float(x), float(y)] for x, y in TRACE]]
    assert a.issues == [] and a.boxes == [] and a.has_coordinates


def test_case_whitespace_number_and_bracket_styles():
    text = ("<ANSWER>\n  < Point >\n [ [ 10 , 20.5 ],\n (30,40) , [50 ,60] ]\n</point>\n<Box>[1, 2, 3, 4]</BOX>"
            "\n</Answer>")
    a = parse_fsd(text)
    assert a.points == [[[10.0, 20.5], [30.0, 40.0], [50.0, 60.0]]]
    assert a.boxes == [[1.0, 2.0, 3.0, 4.0]]
    assert a.issues == []
    # a bare pair, and an unclosed block at the end (generation stopped there)
    assert parse_fsd("<point>512, 300</point>").points == [[[512.0, 300.0]]]
    assert parse_fsd("<answer><point>[[1, 2], [3, 4]]").points == [[[1.0, 2.0], [3.0, 4.0]]]


def test_no_answer_tag_means_the_whole_text_without_the_reasoning():
    a = parse_fsd("<think>I see <point>[[1, 1]]</point> there</think> the grasp: <box>[[10, 10, 20, 20]]</box>")
    assert a.answer == "the grasp: <box>[[10, 10, 20, 20]]</box>"
    assert a.boxes == [[10.0, 10.0, 20.0, 20.0]]
    assert a.points == []  # points inside the reasoning are not the answer
    b = parse_fsd("<think>I see <point>[[1, 1]]</point></think><answer><point>[[2, 2]]</point></answer>")
    assert b.points == [[[2.0, 2.0]]]


def test_a_bad_block_is_an_issue_the_others_are_kept():
    text = ("<answer><point>[[10, 20], [30]]</point> <point>[[1, 2]]</point> <box>[[5, 6, 7]]</box> "
            "<box>[[50, 50, 40, 60]]</box> <point>[[1, 2], [3, abc]]</point> <point>[[1001, 5]]</point>"
            "<point>[[-3, 5]]</point> <point>[[1, 2]] roughly</point> <point></point></answer>")
    a = parse_fsd(text)
    assert a.points == [[[1.0, 2.0]]]
    assert a.boxes == []
    assert len(a.issues) == 8
    first, box3, reversed_box, word, over, negative, stray, empty = a.issues
    assert first.startswith("<point> block 1") and "item 2" in first and "1 number(s), expected 2" in first
    assert box3.startswith("<box> block 1") and "expected 4" in box3
    assert reversed_box.startswith("<box> block 2") and "x1 <= x2" in reversed_box
    assert word.startswith("<point> block 3") and "not 2 numbers" in word
    assert over.startswith("<point> block 4") and "1001 is outside the 0-1000 grid" in over  # not clamped
    assert negative.startswith("<point> block 5") and "-3 is outside" in negative
    assert stray.startswith("<point> block 6") and "roughly" in stray
    assert empty.startswith("<point> block 7") and "empty" in empty


def test_objects_refs_and_relations_in_our_form_and_in_asmv2s():
    ours = ("<answer><ref>red cube</ref><box>[[100, 500, 160, 580]]</box> "
            "<ref>blue plate</ref> <box>[[600, 450, 800, 650]]</box>"
            "<pred>red cube, left of, blue plate</pred></answer>")
    a = parse_fsd(ours)
    assert a.objects == [("red cube", [100.0, 500.0, 160.0, 580.0]), ("blue plate", [600.0, 450.0, 800.0, 650.0])]
    assert a.refs == ["red cube", "blue plate"]
    assert a.relations == [("red cube", "left of", "blue plate")]
    assert a.issues == []
    # ASMv2 (FSD's base): the predicate, then the subject's and the object's boxes; stated in the reasoning
    asm = ("<think>A <ref>red cube</ref><box>[[100, 500, 160, 580]]</box> is <pred>left of</pred>"
           "<box>[[100, 500, 160, 580]]</box><box>[[600, 450, 800, 650]]</box> the <ref>blue plate</ref>"
           "<box>[[600, 450, 800, 650]]</box>.</think><answer><point>[[130, 540]]</point></answer>")
    b = parse_fsd(asm)
    assert b.relations == [("red cube", "left of", "blue plate")]
    assert [n for n, _ in b.objects] == ["red cube", "blue plate"]
    assert b.points == [[[130.0, 540.0]]]
    assert b.boxes == []  # the reasoning's boxes are objects, not the answer's boxes
    # several boxes under one name (ASMv2 "cars")
    c = parse_fsd("<ref>cubes</ref><box>[[1, 1, 2, 2], [3, 3, 4, 4]]</box>")
    assert c.objects == [("cubes", [1.0, 1.0, 2.0, 2.0]), ("cubes", [3.0, 3.0, 4.0, 4.0])]


def test_bad_relations_are_issues():
    a = parse_fsd("<pred>red cube, left of</pred><pred>on</pred><pred>near</pred><box>[[1, 1, 2, 2]]</box>"
                  "<box>[[3, 3, 4, 4]]</box><pred>a, b, c</pred>")
    assert a.relations == [("a", "b", "c")]
    assert len(a.issues) == 3
    assert "got 2 part(s)" in a.issues[0]
    assert "followed by the subject's and the object's <box>" in a.issues[1]
    assert "match no <ref> object's box" in a.issues[2]


def test_identify_answers():
    assert parse_fsd("<answer><ref>red cube</ref></answer>").refs == ["red cube"]
    a = parse_fsd("<answer><REF> nothing </REF></answer>")
    assert a.refs == ["nothing"] and not a.has_coordinates
    assert parse_fsd("<answer><ref> </ref></answer>").issues[0].startswith("<ref> block 1")


@pytest.mark.parametrize("text", [None, "", "plain words", "<point>", "<answer>", "</point>[[1,2]]",
                                  "<box>[[1e999, 0, 1, 1]]</box>",
                                  "<point>[[1,2]</point>", "<<point>>[[1,2]]<</point>>", "<pred>,,,</pred>",
                                  "<ref>x</ref><box>" * 50, "<point>" + "[1, 2], " * 2000 + "</point>"])
def test_garbage_never_raises(text):
    a = parse_fsd(text)
    assert isinstance(a, FSDAnswer)
    assert all(isinstance(i, str) for i in a.issues)


# ---- writing --------------------------------------------------------------------------------------------

def test_writers_round_trip_through_the_parser():
    text = ("<answer>" + format_object("red cube", [100, 500.4, 160, 580]) + format_relation("red cube", "on",
            "blue plate") + format_points(TRACE) + format_box([10, 20, 30, 40]) + "</answer>")
    a = parse_fsd(text)
    assert a.issues == []
    assert a.objects == [("red cube", [100.0, 500.0, 160.0, 580.0])]  # whole grid units, as FSD writes them
    assert a.relations == [("red cube", "on", "blue plate")]
    assert a.points == [[[float(x), float(y)] for x, y in TRACE]]
    assert format_points([[1, 2]]) == "<point>[[1, 2]]</point>"
    assert format_box([1, 2, 3, 4]) == "<box>[[1, 2, 3, 4]]</box>"


@pytest.mark.parametrize("call, match", [
    (lambda: format_points([]), "no points"),
    (lambda: format_points([[1, 2, 3]]), r"point 1 .* not \[x, y\]"),
    (lambda: format_points([[1, 2], [1001, 5]]), "point 2 x: 1001 is outside"),
    (lambda: format_points([[float("inf"), 5]]), "not a number"),
    (lambda: format_box([1, 2, 3]), "not \\[x1, y1, x2, y2\\]"),
    (lambda: format_box([5, 2, 3, 4]), "x1 <= x2"),
    (lambda: format_object("", [1, 2, 3, 4]), "not an object name"),
    (lambda: format_relation("a, b", "on", "c"), "without commas"),
])
def test_writers_reject_bad_input_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_tags_with_spaces_and_numbers_in_odd_spellings():
    a = parse_fsd("< answer >< point >[[1, 2], [+3, .5], [4., 1e2]]< / point ></ answer >")
    assert a.points == [[[1, 2], [3, 0.5], [4, 100]]] and a.issues == []
    bad = parse_fsd("<answer><point>[[" + "9" * 3000 + "x, 1]]</point></answer>")
    assert bad.points == [] and "is not 2 numbers" in bad.issues[0]
