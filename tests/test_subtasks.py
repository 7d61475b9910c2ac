"""The subtask chain: the rule-based instruction grammar (every form, parents, errors), a policy's JSON chain
(validated as untrusted), topological order and the trace text."""

import json

import pytest

from toolpath.planners.subtasks import (
    ChainError,
    InstructionError,
    describe_chain,
    parse_instruction,
    split_clauses,
    subtasks_from_policy,
    topological_order,
)
from toolpath.tools.image.edit_base import COLORS, Subtask, Target


def one(text):
    chain = parse_instruction(text)
    assert len(chain) == 1, chain
    s = chain[0]
    return s.kind, s.target, s.params


@pytest.mark.parametrize("text, target, color", [
    ("make the red circle blue", Target("red circle", "red", "circle"), "blue"),
    ("Turn the square green", Target("square", None, "square"), "green"),
    ("paint the trash can yellow", Target("trash can", None, None), "yellow"),
    ("color the star pink", Target("star", None, "star"), "pink"),
    ("colour the grey ellipse black", Target("gray ellipse", "gray", "ellipse"), "black"),
    ("recolor the triangle grey", Target("triangle", None, "triangle"), "gray"),
    ("recolour a rectangle to orange", Target("rectangle", None, "rectangle"), "orange"),
    ("change the color of the blue star to white", Target("blue star", "blue", "star"), "white"),
    ("Change the colour of the bench to purple", Target("bench", None, None), "purple"),
    ("MAKE THE CYAN SQUARE BROWN", Target("cyan square", "cyan", "square"), "brown"),
])
def test_recolor_forms(text, target, color):
    assert one(text) == ("recolor", target, {"color": color})


@pytest.mark.parametrize("verb", ["remove", "erase", "delete", "Remove"])
def test_remove_forms(verb):
    assert one(f"{verb} the green triangle") == ("remove", Target("green triangle", "green", "triangle"), {})
    assert one(f"{verb} cat") == ("remove", Target("cat", None, None), {})


def test_replace_form():
    assert one("replace the red circle with a blue star") == (
        "replace", Target("red circle", "red", "circle"), {"color": "blue", "shape": "star"})
    assert one("Replace the box with an orange ellipse")[2] == {"color": "orange", "shape": "ellipse"}


def test_text_forms_keep_the_quoted_text_as_written():
    assert one("remove the text") == ("text_remove", None, {})
    assert one("erase the text 'Sale Now'") == ("text_remove", None, {"text": "Sale Now"})
    assert one("delete the text \"OPEN\"") == ("text_remove", None, {"text": "OPEN"})
    assert one("replace the text 'Hello, World' with 'Bye and then'") == (
        "text_replace", None, {"old": "Hello, World", "text": "Bye and then"})
    assert one("change the text \"A.B\" to 'c; d'") == ("text_replace", None, {"old": "A.B", "text": "c; d"})
    assert one("add the text 'Hi' at the top left") == ("text_add", None, {"text": "Hi", "position": "top left"})
    assert one("write \"EXIT\" at the bottom-right corner") == (
        "text_add", None, {"text": "EXIT", "position": "bottom right"})
    assert one("Write 'x' in the centre")[2] == {"text": "x", "position": "center"}
    assert one("replace the text \u2018old\u2019 with \u201cnew\u201d")[2] == {"old": "old", "text": "new"}


def test_background_forms():
    assert one("remove the background") == ("background", None, {"color": "white"})
    assert one("make the background pink") == ("background", None, {"color": "pink"})
    assert one("change the background to grey") == ("background", None, {"color": "gray"})
    assert one("change the background colour to cyan")[2] == {"color": "cyan"}


@pytest.mark.parametrize("text, factor", [("upscale the image 2x", 2), ("upscale the image by 2x", 2),
                                          ("upscale the image ×3", 3), ("upscale the image by 4", 4),
                                          ("Upscale the image by 1.5X", 1.5), ("upscale the image", 2)])
def test_upscale_forms(text, factor):
    assert one(text) == ("upscale", None, {"factor": factor})


def test_clauses_split_on_every_separator_but_not_inside_quotes_or_numbers():
    text = "make the red circle blue, remove the star; write 'a, b and c. d' at the top and " \
           "upscale the image by 1.5 then remove the background. erase the text"
    clauses = [c for c, _ in split_clauses(text)]
    assert clauses == ["make the red circle blue", "remove the star", "write 'a, b and c. d' at the top",
                       "upscale the image by 1.5", "remove the background", "erase the text"]
    assert [s.kind for s in parse_instruction(text)] == ["recolor", "remove", "text_add", "upscale", "background",
                                                         "text_remove"]
    # ", then" and "and then" leave no connector word in the clause
    assert [c for c, _ in split_clauses("remove the star, then make the square red and then remove the text")] == [
        "remove the star", "make the square red", "remove the text"]


def test_parents_follow_the_object_through_recolors_and_replacements():
    chain = parse_instruction("Make the red circle blue, then remove the blue circle, recolor the square green, "
                              "replace the green square with a red star and make the red star white")
    parents = {s.id: s.parents for s in chain}
    assert parents == {"s1": (), "s2": ("s1",), "s3": (), "s4": ("s3",), "s5": ("s3", "s4")}
    # the same words name the same object; a colourless name matches any colour of that noun
    chain = parse_instruction("paint the trash can yellow and erase the trash can, remove the circle")
    assert [s.parents for s in chain] == [(), ("s1",), ()]
    # "the circle" could be any circle, so what follows a colourless name depends on it (safe: it only orders)
    chain = parse_instruction("make the red circle blue, remove the circle, remove the green circle")
    assert [s.parents for s in chain] == [(), ("s1",), ("s1", "s2")]
    chain = parse_instruction("make the red circle blue, remove the green circle")
    assert [s.parents for s in chain] == [(), ()]


def test_global_edits_depend_on_everything_before_and_everything_after_depends_on_them():
    chain = parse_instruction("remove the star, recolor the square red, make the background pink, "
                              "remove the circle, upscale the image 2x")
    assert [s.parents for s in chain] == [(), (), ("s1", "s2"), ("s3",), ("s1", "s2", "s3", "s4")]


def test_text_parents_follow_the_text():
    chain = parse_instruction("change the text 'A' to 'B', write 'C' at the top, remove the text 'B', "
                              "remove the text 'C', remove the text 'Z', remove the text")
    assert [s.parents for s in chain] == [(), (), ("s1",), ("s2",), (), ("s1", "s2", "s3", "s4", "s5")]


def test_unknown_colour_names_it_and_the_known_ones():
    with pytest.raises(InstructionError) as err:
        parse_instruction("remove the star, make the circle magenta")
    msg = str(err.value)
    assert "'magenta'" in msg and "clause 2" in msg and "make the circle magenta" in msg
    assert all(c in msg for c in COLORS)
    with pytest.raises(InstructionError, match="unknown colour 'teal'"):
        parse_instruction("replace the circle with a teal star")
    with pytest.raises(InstructionError, match="unknown colour 'mauve'"):
        parse_instruction("make the background mauve")


def test_a_clause_outside_the_grammar_is_named_with_its_position_and_the_accepted_forms():
    text = "remove the star and dance a little jig"
    with pytest.raises(InstructionError) as err:
        parse_instruction(text)
    msg = str(err.value)
    assert "clause 2" in msg and "'dance a little jig'" in msg
    assert f"at character {text.index('dance')}" in msg
    assert "replace the <target> with a <color> <shape>" in msg and "upscale the image" in msg


@pytest.mark.parametrize("text, needle", [
    ("", "empty"), ("  ,  ; ", "no edit"),
    ("replace the circle with a star", "needs a colour and a shape"),
    ("replace the circle with a red blob", "unknown shape 'blob'"),
    ("write 'x' at the side", "unknown position 'side'"),
    ("upscale the image 20x", "out of range"),
    ("make the text red", "'text' is not an object"),
    ("write '' at the top", "empty"),
    ("remove the text 'unclosed", "unclosed"),
])
def test_bad_clauses_say_what_is_wrong(text, needle):
    with pytest.raises(InstructionError, match=needle):
        parse_instruction(text)


def test_instruction_error_is_a_value_error_for_callers_that_fall_back():
    assert issubclass(InstructionError, ValueError) and issubclass(ChainError, ValueError)


# ---- a policy's chain --------------------------------------------------------------------------------------

def test_policy_chain_in_prose_and_a_code_fence_is_read_and_validated():
    reply = """Here is the plan:
```json
[{"id": "a", "kind": "recolor", "target": {"name": "red circle", "color": "red", "shape": "circle"},
  "params": {"color": "Blue"}},
 {"id": "b", "kind": "remove", "target": "blue circle", "parents": ["a"]},
 {"id": "c", "kind": "upscale", "params": {"factor": 2}, "parents": ["a", "b"]}]
```"""
    chain = subtasks_from_policy(reply)
    assert [(s.id, s.kind, s.parents) for s in chain] == [("a", "recolor", ()), ("b", "remove", ("a",)),
                                                         ("c", "upscale", ("a", "b"))]
    assert chain[0].params == {"color": "blue"} and chain[1].target == Target("blue circle", "blue", "circle")


def test_policy_chain_without_parents_gets_the_grammars_parents_and_defaults():
    chain = subtasks_from_policy(json.dumps({"subtasks": [
        {"kind": "recolor", "target": {"color": "grey", "shape": "square"}, "params": {"color": "red"}},
        {"kind": "remove", "target": {"name": "red square"}},
        {"kind": "background"}, {"kind": "upscale"}]}))
    assert [s.id for s in chain] == ["s1", "s2", "s3", "s4"]
    assert chain[0].target == Target("gray square", "gray", "square")
    assert [s.parents for s in chain] == [(), ("s1",), ("s1", "s2"), ("s1", "s2", "s3")]
    assert chain[2].params == {"color": "white"} and chain[3].params == {"factor": 2}


def test_policy_chain_is_put_in_topological_order():
    chain = subtasks_from_policy(json.dumps([
        {"id": "x", "kind": "remove", "target": "circle", "parents": ["y"]},
        {"id": "y", "kind": "recolor", "target": "square", "params": {"color": "red"}},
        {"id": "z", "kind": "text_remove"}]))
    assert [s.id for s in chain] == ["y", "x", "z"]


@pytest.mark.parametrize("entries, needle", [
    ([{"kind": "recolour", "target": "circle"}], "entry 1 (id 's1'): unknown kind 'recolour'"),
    ([{"kind": "recolor", "target": "circle", "params": {"color": "teal"}}], "unknown colour 'teal'"),
    ([{"kind": "recolor", "target": "circle"}], "color is required"),
    ([{"kind": "remove"}], "needs a target"),
    ([{"kind": "replace", "target": "circle", "params": {"color": "red", "shape": "blob"}}], "unknown shape"),
    ([{"kind": "text_add", "params": {"text": "hi"}}], "position is required"),
    ([{"kind": "text_add", "params": {"text": "hi", "position": "up"}}], "unknown position"),
    ([{"kind": "text_replace", "params": {"text": ""}}], "non-empty"),
    ([{"kind": "upscale", "params": {"factor": 100}}], "factor must be"),
    ([{"kind": "upscale", "params": {"factor": "2"}}], "factor must be"),
    ([{"kind": "remove", "target": "circle", "params": {"force": True}}], "unknown field(s) force"),
    ([{"kind": "remove", "target": "circle", "speed": 1}], "unknown field(s) speed"),
    ([{"kind": "remove", "target": {"name": "circle", "color": "teal"}}], "target.color"),
    ([{"id": "a", "kind": "remove", "target": "circle", "parents": ["q"]}], "unknown parent 'q'"),
    ([{"id": "a", "kind": "remove", "target": "circle", "parents": ["b"]},
      {"id": "b", "kind": "remove", "target": "star", "parents": ["a"]}], "cycle"),
    ([{"id": "a", "kind": "remove", "target": "circle"}, {"id": "a", "kind": "text_remove"}], "used twice"),
    ([{"id": "a", "kind": "remove", "target": "circle", "parents": "a"}], "parents: expected a list"),
    (["remove the circle"], "entry 1: expected an object"),
    ([], "empty list"),
])
def test_policy_chain_problems_name_the_entry(entries, needle):
    with pytest.raises(ChainError) as err:
        subtasks_from_policy(json.dumps(entries))
    assert needle in str(err.value)


@pytest.mark.parametrize("reply", ["", "no json here", "{\"plan\": 3}", "[1, 2", "null"])
def test_policy_replies_without_a_chain_are_errors(reply):
    with pytest.raises(ChainError):
        subtasks_from_policy(reply)


def test_too_long_a_policy_chain_is_refused():
    with pytest.raises(ChainError, match="at most"):
        subtasks_from_policy(json.dumps([{"kind": "text_remove"}] * 100))


# ---- order and trace ----------------------------------------------------------------------------------------

def test_topological_order_keeps_instruction_order_among_independent_subtasks():
    s = [Subtask("s1", "text_remove"), Subtask("s2", "remove", Target("star"), parents=("s4",)),
         Subtask("s3", "text_remove"), Subtask("s4", "remove", Target("circle"))]
    assert [x.id for x in topological_order(s)] == ["s1", "s3", "s4", "s2"]
    with pytest.raises(ChainError, match="cycle"):
        topological_order([Subtask("a", "text_remove", parents=("b",)), Subtask("b", "text_remove", parents=("a",))])
    with pytest.raises(ChainError, match="itself"):
        topological_order([Subtask("a", "text_remove", parents=("a",))])


def test_describe_chain_lists_labels_and_parents():
    text = describe_chain(parse_instruction("make the red circle blue, then remove the blue circle"))
    assert text.splitlines() == ["s1  Object Recoloration (red circle → blue circle)",
                                 "s2  Object Removal (blue circle)  ← s1"]
