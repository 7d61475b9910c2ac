"""FSD's response grammar ("From Seeing to Doing", Yuan et al. 2025, arXiv 2505.08548) and the questions the
embodied agent asks in it.

FSD answers in ASMv2's tags (it is trained from All-Seeing v2), every coordinate on a 0–1000 grid:

    objects     <ref>red cube</ref><box>[[x1, y1, x2, y2]]</box>       (one box or several: [[…], […]])
    relations   <pred>red cube, left of, blue plate</pred>               (ours: subject, relation, object)
                <pred>left of</pred><box>[[…]]</box><box>[[…]]</box>     (ASMv2's: the predicate, then the
                                                                         subject's and the object's boxes)
    points      <point>[[x1, y1], [x2, y2], …]</point>                   (a visual trace: 8 ordered points)
    reasoning   <think>…</think> <answer>…</answer>                      (FSD writes <Answer>; any case here)

FSD's own prompts, which the questions below follow: the trace one asks for "the manipulated
object-centric waypoints … an ordered sequence of eight 2D points. The format is <point>[[x1, y1], [x2, y2],
...]</point>"; the free-space one for "<box>[[x1, y1, x2, y2]]</box> … the target region, and
<point>[[x1, y1], [x2, y2], ...]</point> … the points of the free space" (Embodied-FSD's
llava/eval/model_vqa_parquet.py). FSD's released code maps its grid onto the image padded to a square
(pad to max(w, h), centred); ours is `CoordinateSpace("grid1000", w, h)`, x and y scaled separately, and
every question says so. A model trained on FSD's padded grid would need that convention added there.

`parse_fsd` reads a reply as data (nothing in it is evaluated): coordinate blocks from the answer, objects,
refs and relations from the whole reply (FSD states them in its reasoning chain). A block it cannot read
becomes an issue naming the block, its position and what was wrong, and is left out whole (a trace with a
waypoint missing is a different trace); the other blocks are still read. Values off the 0–1000 grid are an
issue, never clamped. It reads in linear time and a bounded amount: at most MAX_BLOCKS coordinate and name
blocks, each at most MAX_BLOCK_CHARS long with at most MAX_ITEMS points or boxes; what lies beyond a limit is an
issue too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .common import cap_issues, read_reply, snippet

GRID = 1000
MAX_BLOCKS = 500         # <point>, <box>, <ref> and <pred> blocks read from one reply
MAX_BLOCK_CHARS = 10_000  # characters of one of those blocks (100 points take about 1,500)
MAX_ITEMS = 100          # points or boxes in one block (a trace has 8)
_GRID_NOTE = ("Coordinates are on a 0-1000 grid over the image: x from 0 (left) to 1000 (right), "
              "y from 0 (top) to 1000 (bottom).")

# One question per kind. Each one's first sentence is its signature: question_kind() looks for it.
QUESTIONS: dict[str, str] = {
    "relations": ("Find the objects this task involves and how they are placed relative to each other. "
                  "Give each object as <ref>name</ref><box>[[x1, y1, x2, y2]]</box> and each spatial relation "
                  "between them as <pred>subject, relation, object</pred>, for example "
                  "<pred>red cube, left of, blue plate</pred>. " + _GRID_NOTE + " "
                  "You may reason first inside <think>...</think>; put the objects and relations inside "
                  "<answer>...</answer>."),
    "trace": ("Use 2D points to mark the object-centric waypoints that guide the robot through the task: an "
              "ordered sequence of eight points, the first on the object to pick up (where to grasp it) and the "
              "last where it goes. " + _GRID_NOTE + " "
              "Answer as <answer><point>[[x1, y1], [x2, y2], [x3, y3], [x4, y4], [x5, y5], [x6, y6], [x7, y7], "
              "[x8, y8]]</point></answer>."),
    "affordance": ("Mark where the robot should grasp the object it has to pick up: a bounding box around the "
                   "part of that object to grasp. " + _GRID_NOTE + " "
                   "Answer as <answer><box>[[x1, y1, x2, y2]]</box></answer>."),
    "free_space": ("Use 2D points to mark the free space where the picked object can be put down: three to five "
                   "points on the target, clear of anything already there. " + _GRID_NOTE + " "
                   "Answer as <answer><point>[[x1, y1], [x2, y2], ...]</point></answer>."),
}
_IDENTIFY_HEAD = "Which object is at the point"
_IDENTIFY = re.compile(re.escape(_IDENTIFY_HEAD) + r"\s*<point>", re.I)
NOTHING = "nothing"


def identify_question(x: float, y: float) -> str:
    """The self-consistency question: which object lies at grid point (x, y)."""
    for name, v in (("x", x), ("y", y)):
        if not _finite(v) or not 0 <= v <= GRID:
            raise ValueError(f"identify_question: {name}={v!r} is not a number on the 0-{GRID} grid")
    return (f"{_IDENTIFY_HEAD} <point>[[{_num(x)}, {_num(y)}]]</point>? " + _GRID_NOTE + " "
            f"Answer as <answer><ref>object name</ref></answer>, or <answer><ref>{NOTHING}</ref></answer> if no "
            "object is there.")


def _signature(question: str) -> str:
    return _squash(question.split(". ", 1)[0])


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


_SIGNATURES = {kind: _signature(q) for kind, q in QUESTIONS.items()}


def question_kind(text: str | None) -> str | None:
    """Which of QUESTIONS (or "identify") a message asks; None if none. When a message holds several, the
    last one asked wins (it is the one to answer)."""
    if not isinstance(text, str):
        return None
    flat = _squash(text)
    found = [(flat.rfind(sig), kind) for kind, sig in _SIGNATURES.items() if sig in flat]
    found += [(m.start(), "identify") for m in _IDENTIFY.finditer(flat)]
    return max(found)[1] if found else None


def identify_point(text: str | None) -> tuple[float, float] | None:
    """The grid point an identify question asks about, or None (the offline policies read it back)."""
    if not isinstance(text, str):
        return None
    hits = list(re.finditer(re.escape(_IDENTIFY_HEAD) + r"\s*<point>([^<]*)</point>", text, re.I))
    if not hits:
        return None
    groups, problem = _groups(hits[-1].group(1), 2)
    return (groups[0][0], groups[0][1]) if groups and not problem and len(groups) == 1 else None


# ---- parsing --------------------------------------------------------------------------------------------

@dataclass
class FSDAnswer:
    think: str | None = None
    answer: str = ""
    points: list[list[list[float]]] = field(default_factory=list)   # one list of [x, y] per <point> block
    boxes: list[list[float]] = field(default_factory=list)          # every box of the answer's <box> blocks
    objects: list[tuple[str, list[float]]] = field(default_factory=list)  # (name, box) from <ref>…</ref><box>
    refs: list[str] = field(default_factory=list)                   # every <ref> name, in order
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)

    @property
    def has_coordinates(self) -> bool:
        return bool(self.points or self.boxes or self.objects)


_TAGS = ("think", "answer", "point", "box", "ref", "pred")
_OUTER = ("think", "answer")
# Possessive `\s*+`: with two plain `\s*` around an optional `/`, a long run of spaces after a '<' was split
# every possible way before the match failed.
_TAG = re.compile(r"<\s*+(/?)\s*+(" + "|".join(_TAGS) + r")\s*+>", re.I)
_INNER = re.compile(r"[\[(]([^\[\]()]*)[\])]")  # an innermost bracket group: [x, y] or (x, y)
# One way to match each number: `\d+\.?\d*` could split a run of digits anywhere, and on a long run that is
# not a number (9999…9x) the regex tried every split.
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass
class _Block:
    tag: str
    body: str
    start: int   # where the opening tag starts
    end: int     # just past the closing tag (or the body, when unclosed)
    closed: bool


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _tags(text: str) -> list[tuple[int, int, str, bool]]:
    """Every FSD tag of the reply as (start, end, lower-case name, closing), in order (one regex scan)."""
    return [(m.start(), m.end(), m.group(2).lower(), m.group(1) == "/") for m in _TAG.finditer(text)]


def _outer_block(text: str, tags: list[tuple[int, int, str, bool]], name: str) -> _Block | None:
    """The first think or answer block: closed by its own closing tag wherever it comes (it may contain the
    small tags), else it runs to the next opening think/answer tag or the end."""
    first = next((i for i, (_, _, tag, closing) in enumerate(tags) if tag == name and not closing), None)
    if first is None:
        return None
    start, end = tags[first][0], tags[first][1]
    for close_start, close_end, tag, closing in tags[first + 1:]:
        if closing and tag == name:
            return _Block(name, text[end:close_start], start, close_end, True)
    stop = next((t[0] for t in tags[first + 1:] if t[2] in _OUTER and not t[3]), len(text))
    return _Block(name, text[end:stop], start, stop, False)


def _small_blocks(text: str, tags: list[tuple[int, int, str, bool]], limit: int) -> list[_Block]:
    """The first `limit` point/box/ref/pred blocks, in order. These may not contain other tags: one is closed
    only when its own closing tag is the very next tag; otherwise it runs to the next tag or the end (a reply
    cut at a stop string ends that way)."""
    out: list[_Block] = []
    for i, (start, end, tag, closing) in enumerate(tags):
        if closing or tag in _OUTER:
            continue
        if len(out) >= limit:
            break
        nxt = tags[i + 1] if i + 1 < len(tags) else None
        if nxt is not None and nxt[3] and nxt[2] == tag:
            out.append(_Block(tag, text[end:nxt[0]], start, nxt[1], True))
        else:
            stop = nxt[0] if nxt is not None else len(text)
            out.append(_Block(tag, text[end:stop], start, stop, False))
    return out


def _groups(body: str, size: int) -> tuple[list[list[float]], str | None]:
    """The coordinate groups of a block body (each `size` numbers), or the first problem found."""
    if len(body) > MAX_BLOCK_CHARS:
        return [], f"it is {len(body):,} characters long (at most {MAX_BLOCK_CHARS:,} are read)"
    groups = _INNER.findall(body)
    if len(groups) > MAX_ITEMS:
        return [], f"it has {len(groups):,} items (at most {MAX_ITEMS} are read)"
    rest = _INNER.sub(" ", body)
    if not groups:
        if not body.strip():
            return [], "it is empty"
        groups, rest = [body], ""  # a bare "512, 300"
    stray = re.sub(r"[\s,;\[\]()]", "", rest)
    if stray:
        return [], f"unexpected text {snippet(stray, 30)!r} between the coordinates"
    out = []
    for i, g in enumerate(groups, 1):
        parts = [p.strip() for p in g.split(",")]
        if not all(_NUMBER.fullmatch(p) for p in parts):
            return [], f"item {i} `{snippet(g, 30)}` is not {size} numbers"
        vals = [float(p) for p in parts]
        if len(vals) != size:
            return [], f"item {i} `{snippet(g, 30)}` has {len(vals)} number(s), expected {size}"
        if not all(math.isfinite(v) for v in vals):
            return [], f"item {i} `{snippet(g, 30)}` is not finite"
        off = [v for v in vals if not 0 <= v <= GRID]
        if off:
            return [], f"item {i} `{snippet(g, 30)}`: {off[0]:g} is outside the 0-{GRID} grid"
        out.append(vals)
    return out, None


def _read_boxes(body: str) -> tuple[list[list[float]], str | None]:
    groups, problem = _groups(body, 4)
    if problem is None:
        for i, (x1, y1, x2, y2) in enumerate(groups, 1):
            if x1 > x2 or y1 > y2:
                box = [_num(v) for v in (x1, y1, x2, y2)]
                return [], f"box {i} {box} is not [x1, y1, x2, y2] with x1 <= x2 and y1 <= y2"
    return groups, problem


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def parse_fsd(text: str | None) -> FSDAnswer:
    """Read an FSD-grammar reply (see the module docstring). Never raises on model output."""
    text, unread = read_reply(text)
    out = FSDAnswer()
    tags = _tags(text)
    think, answer = _outer_block(text, tags, "think"), _outer_block(text, tags, "answer")
    out.think = think.body.strip() if think else None
    if answer:
        out.answer = answer.body.strip()
    else:
        out.answer = (text[:think.start] + text[think.end:]).strip() if think else text.strip()

    def in_answer(b: _Block) -> bool:
        """Coordinates count from the <answer> block, or, without one, from anywhere but the <think> block."""
        if answer:
            return answer.start <= b.start < answer.end
        return not (think and think.start <= b.start < think.end)

    blocks = _small_blocks(text, tags, MAX_BLOCKS)
    if len(blocks) == MAX_BLOCKS:
        total = sum(1 for _, _, tag, closing in tags if not closing and tag not in _OUTER)
        if total > MAX_BLOCKS:
            unread.append(f"the reply has {total:,} <point>, <box>, <ref> and <pred> blocks; only the first "
                          f"{MAX_BLOCKS} were read")
    labels, counts = [], {}
    for b in blocks:
        counts[b.tag] = counts.get(b.tag, 0) + 1
        labels.append(f"<{b.tag}> block {counts[b.tag]}")
    issues: list[tuple[int, str]] = []  # (where the block starts, what is wrong): reported in reply order

    def issue(i: int, problem: str) -> None:
        issues.append((blocks[i].start, f"{labels[i]} `{snippet(blocks[i].body, 60)}`: {problem}"))

    def following(i: int, tag: str) -> int | None:
        """The index of the block right after block i, when only whitespace separates them and it has `tag`."""
        j = i + 1
        if j < len(blocks) and blocks[j].tag == tag and not text[blocks[i].end:blocks[j].start].strip():
            return j
        return None

    too_long = {i for i, b in enumerate(blocks) if len(b.body) > MAX_BLOCK_CHARS}
    for i in too_long:
        issue(i, f"it is {len(blocks[i].body):,} characters long (at most {MAX_BLOCK_CHARS:,} are read)")
    # A block too long to read is left out whole: it keeps its place (for `following`) under a tag nothing reads.
    blocks = [b if i not in too_long else _Block("unread", "", b.start, b.end, b.closed) for i, b in enumerate(blocks)]
    boxes: dict[int, list[list[float]]] = {}  # block index → its boxes, for the blocks read whole
    for i, b in enumerate(blocks):
        if b.tag == "box":
            got, problem = _read_boxes(b.body)
            if problem:
                issue(i, problem)
            else:
                boxes[i] = got
    for i, b in enumerate(blocks):
        if b.tag == "point" and in_answer(b):
            groups, problem = _groups(b.body, 2)
            if problem:
                issue(i, problem)
            else:
                out.points.append(groups)
        elif b.tag == "box" and in_answer(b) and i in boxes:
            out.boxes.extend(boxes[i])
        elif b.tag == "ref":
            name = " ".join(b.body.split())
            if not name:
                issue(i, "the name is empty")
                continue
            out.refs.append(name)
            j = following(i, "box")
            if j is not None and j in boxes:
                out.objects.extend((name, box) for box in boxes[j])
    for i, b in enumerate(blocks):  # after every object is known: ASMv2 relations name them by box
        if b.tag == "pred":
            rel, problem = _relation(b.body, i, following, boxes, out.objects)
            if problem:
                issue(i, problem)
            else:
                out.relations.append(rel)
    out.issues = cap_issues(unread + [msg for _, msg in sorted(issues, key=lambda t: t[0])])
    return out


def _relation(body: str, i: int, following, boxes: dict, objects: list) -> tuple[tuple | None, str | None]:
    parts = [" ".join(p.split()) for p in body.split(",")]
    if len(parts) == 3 and all(parts):
        return (parts[0], parts[1], parts[2]), None
    shape = "expected <pred>subject, relation, object</pred>"
    if len(parts) == 1 and parts[0]:
        # ASMv2: <pred>relation</pred><box>[[subject]]</box><box>[[object]]</box>; names from the ref boxes.
        first = following(i, "box")
        second = following(first, "box") if first is not None else None
        if second is None:
            return None, f"{shape}, or the relation followed by the subject's and the object's <box>"
        names = [next((n for n, box in objects if j in boxes and box == boxes[j][0]), None) for j in (first, second)]
        if None in names:
            return None, "the boxes after it match no <ref> object's box (so the subject and object are unknown)"
        return (names[0], parts[0], names[1]), None
    return None, f"{shape} (three non-empty parts separated by commas), got {len(parts)} part(s)"


# ---- writing --------------------------------------------------------------------------------------------

def _grid_value(v, what: str) -> int:
    if not _finite(v):
        raise ValueError(f"{what}: {v!r} is not a number")
    if not 0 <= v <= GRID:
        raise ValueError(f"{what}: {v:g} is outside the 0-{GRID} grid")
    return int(round(v))


def format_points(points) -> str:
    """<point>[[x1, y1], …]</point> from grid points (rounded to whole grid units, as FSD writes them)."""
    pts = list(points)
    if not pts:
        raise ValueError("format_points: no points")
    items = []
    for i, p in enumerate(pts, 1):
        if len(p) != 2:
            raise ValueError(f"format_points: point {i} {p!r} is not [x, y]")
        items.append(f"[{_grid_value(p[0], f'point {i} x')}, {_grid_value(p[1], f'point {i} y')}]")
    return f"<point>[{', '.join(items)}]</point>"


def format_box(box) -> str:
    """<box>[[x1, y1, x2, y2]]</box> from a grid box (x1 <= x2, y1 <= y2)."""
    b = list(box)
    if len(b) != 4:
        raise ValueError(f"format_box: {box!r} is not [x1, y1, x2, y2]")
    x1, y1, x2, y2 = (_grid_value(v, f"box {n}") for v, n in zip(b, ("x1", "y1", "x2", "y2")))
    if x1 > x2 or y1 > y2:
        raise ValueError(f"format_box: {box!r} needs x1 <= x2 and y1 <= y2")
    return f"<box>[[{x1}, {y1}, {x2}, {y2}]]</box>"


def format_object(name: str, box) -> str:
    """<ref>name</ref><box>[[…]]</box>."""
    if not isinstance(name, str) or not name.strip() or re.search(r"[<>]", name):
        raise ValueError(f"format_object: {name!r} is not an object name")
    return f"<ref>{name.strip()}</ref>{format_box(box)}"


def format_relation(subject: str, relation: str, obj: str) -> str:
    """<pred>subject, relation, object</pred>."""
    for what, v in (("subject", subject), ("relation", relation), ("object", obj)):
        if not isinstance(v, str) or not v.strip() or re.search(r"[<>,]", v):
            raise ValueError(f"format_relation: {what} {v!r} must be non-empty text without commas or tags")
    return f"<pred>{subject.strip()}, {relation.strip()}, {obj.strip()}</pred>"
