"""The subtask chain of an edit instruction: a DAG of labelled subtasks, from a fixed grammar or from a policy.

`parse_instruction` reads instructions in a fixed grammar with rules, so the default agent needs no model:

    recolor      make|turn|paint|color|colour|recolor|recolour the <target> <color>
                 change the colo(u)r of the <target> to <color>
    remove       remove|erase|delete the <target>
    replace      replace the <target> with a <color> <shape>
    text_remove  remove the text ['X']
    text_replace replace the text 'A' with 'B' / change the text 'A' to 'B'
    text_add     add the text 'X' at the <position> / write 'X' at the <position>
    background   remove the background (→ white) / make the background <color> / change the background to <color>
    upscale      upscale the image [by] <k>x | ×<k> | by <k>   (no factor: 2)

Clauses are separated by ",", ";", ".", " and ", " then " outside quotes; words are case-insensitive, articles
optional, text in quotes ('…' or "…") is kept as written. <target> is an optional colour word and a noun phrase
("red circle", "trash can"); colours, shapes and positions are edit_base's lists ("grey" is gray).

Parents (the chain is a DAG): a subtask depends on the earlier subtasks that edited the same object (the same
name, or the colour/shape an earlier recolor or replace produced: "make the red circle blue, then remove the
blue circle"), on the same text, and on every earlier global edit (background, upscale); a global edit depends
on everything before it. Over-approximating is safe (it only orders), missing a dependency is not.

`subtasks_from_policy` reads a model's JSON chain, which is untrusted: every kind, parameter and parent id is
validated, and a problem is a ChainError naming the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..tools.image.edit_base import COLORS, KINDS, POSITIONS, SHAPES, Subtask, Target

GLOBAL_KINDS = ("background", "upscale")  # edits of the whole image
OBJECT_KINDS = ("recolor", "remove", "replace")
TEXT_KINDS = ("text_remove", "text_replace", "text_add")
MAX_SUBTASKS = 32  # a model's chain longer than this is garbage, not a plan
MAX_FACTOR = 8.0

# Nouns that name the image or its parts, not an object: "make the text red" is not a recolor of an object.
_NOT_OBJECTS = {"image", "picture", "photo", "text", "background", "words", "writing"}
_COLOR_ALIASES = {"grey": "gray"}
_POSITION_ALIASES = {"centre": "center", "middle": "center", "the center": "center"}

FORMS = (
    "make|turn|paint|color|recolor the <target> <color>",
    "change the color of the <target> to <color>",
    "remove|erase|delete the <target>",
    "replace the <target> with a <color> <shape>",
    "remove the text ['X']",
    "replace the text 'A' with 'B'",
    "change the text 'A' to 'B'",
    "add the text 'X' at the <position>",
    "write 'X' at the <position>",
    "remove the background",
    "make the background <color>",
    "change the background to <color>",
    "upscale the image 2x | ×2 | by 2",
)


class InstructionError(ValueError):
    """An instruction the grammar cannot read; the message names the clause, where it is, and what is accepted."""


class ChainError(ValueError):
    """A policy's subtask chain that cannot be used; the message names the entry and what is wrong."""


class _ClauseProblem(Exception):
    """Raised inside one clause's reader; parse_instruction adds the clause and its position."""


# ---- splitting --------------------------------------------------------------------------------------------

_QUOTE_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_WORD_SEP = re.compile(r"\s+(?:and|then)\s+", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:and|then|also|next|finally|afterwards|after that|please|now|lastly)\b[\s,]*)+",
                   re.IGNORECASE)


def split_clauses(text: str) -> list[tuple[str, int]]:
    """(clause, character offset) pairs; separators inside quotes do not split, nor a "." inside a number."""
    text = text.translate(_QUOTE_FOLD)
    out, start, i, quote = [], 0, 0, None

    def cut(end: int, nxt: int):
        nonlocal start
        out.append((text[start:end], start))
        start = nxt

    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "'\"":
            quote = ch
        elif ch in ",;":
            cut(i, i + 1)
        elif ch == "." and not (0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()):
            cut(i, i + 1)
        else:
            m = _WORD_SEP.match(text, i) if ch.isspace() else None
            if m:
                cut(i, m.end())
                i = m.end()
                continue
        i += 1
    if quote:
        raise InstructionError(f"unclosed {quote} quote starting in {text[start:]!r} (at character {start})")
    cut(len(text), len(text))
    clauses = []
    for clause, offset in out:
        stripped = clause.lstrip()
        offset += len(clause) - len(stripped)
        lead = _LEAD.match(stripped)
        if lead:
            stripped, offset = stripped[lead.end():], offset + lead.end()
        body = re.sub(r"\s+", " ", stripped).strip(" !")
        if body:
            clauses.append((body, offset))
    return clauses


# ---- reading one clause ------------------------------------------------------------------------------------

def _quoted(clause: str) -> tuple[str, list[str]]:
    """The clause with each quoted text replaced by «n», and the texts (case kept)."""
    texts: list[str] = []

    def keep(m: re.Match) -> str:
        texts.append(m.group(2))
        return f"«{len(texts) - 1}»"

    return re.sub(r"(['\"])(.*?)\1", keep, clause), texts


def color_word(word: str) -> str:
    """A colour name from COLORS for `word` ("grey" → gray), or a _ClauseProblem naming it and the known ones."""
    w = word.lower()
    w = _COLOR_ALIASES.get(w, w)
    if w not in COLORS:
        raise _ClauseProblem(f"unknown colour {word!r}; known colours: {', '.join(COLORS)} (grey = gray)")
    return w


def _shape_word(word: str) -> str:
    if word.lower() not in SHAPES:
        raise _ClauseProblem(f"unknown shape {word!r}; known shapes: {', '.join(SHAPES)}")
    return word.lower()


def _position(words: str) -> str:
    p = re.sub(r"[\s\-]+", " ", words.lower()).strip()
    p = re.sub(r"^(?:upper|lower)\b", lambda m: "top" if m.group(0) == "upper" else "bottom", p)
    p = re.sub(r" (?:corner|side|edge|of the image|of the picture)$", "", p)
    p = _POSITION_ALIASES.get(p, p)
    if p not in POSITIONS:
        raise _ClauseProblem(f"unknown position {words!r}; known positions: {', '.join(POSITIONS)}")
    return p


def target_from_words(words: str) -> Target:
    """Target("red circle", "red", "circle") from "red circle"; "grey" is written gray in the name."""
    parts = [_COLOR_ALIASES.get(w, w) for w in words.lower().split()]
    if not parts:
        raise _ClauseProblem("the clause names no object")
    if parts[-1] in _NOT_OBJECTS:
        raise _ClauseProblem(f"{words!r} is not an object; the text and the background have their own forms "
                             "(remove the text 'X', make the background <color>)")
    color = parts[0] if parts[0] in COLORS and len(parts) > 1 else None
    shape = parts[-1] if parts[-1] in SHAPES else None
    return Target(" ".join(parts), color, shape)


def _text(texts: list[str], ref: str | None, what: str) -> str | None:
    if ref is None:
        return None
    value = texts[int(ref)]
    if not value.strip():
        raise _ClauseProblem(f"the {what} in quotes is empty")
    return value


def _factor(m: re.Match) -> float:
    raw = m.group("f1") or m.group("f2") or m.group("f3")
    f = float(raw) if raw else 2.0
    if not 1.0 < f <= MAX_FACTOR:
        raise _ClauseProblem(f"upscale factor {raw} is out of range; expected more than 1 and at most {MAX_FACTOR:g}")
    return int(f) if f.is_integer() else f


_ART = r"(?:(?:the|a|an)\s+)?"
_TARGET = r"(?P<target>[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*)*?)"
_Q = r"«(?P<{}>\d+)»"
_COLOR = r"(?P<color>[a-z]+)"
_RECOLOR_VERB = r"(?:make|turn|paint|colou?r|recolou?r)"

# (kind, pattern, builder(match, texts) → (target, params)); tried in order, the first full match wins, so the
# text and background forms come before the object forms that would also match them.
_RULES: list[tuple[str, str, Any]] = [
    ("text_replace", r"(?:replace|swap)\s+(?:the\s+)?text\s+" + _Q.format("a") + r"\s+(?:with|by|for)\s+"
     + _Q.format("b"),
     lambda m, t: (None, {"old": _text(t, m["a"], "old text"), "text": _text(t, m["b"], "new text")})),
    ("text_replace", r"change\s+(?:the\s+)?text\s+" + _Q.format("a") + r"\s+(?:to|into)\s+" + _Q.format("b"),
     lambda m, t: (None, {"old": _text(t, m["a"], "old text"), "text": _text(t, m["b"], "new text")})),
    ("text_remove", r"(?:remove|erase|delete)\s+(?:the\s+|all\s+(?:the\s+)?)?text(?:\s+" + _Q.format("a") + r")?",
     lambda m, t: (None, {"text": _text(t, m["a"], "text")} if m["a"] is not None else {})),
    ("text_remove", r"(?:remove|erase|delete)\s+" + _Q.format("a"),
     lambda m, t: (None, {"text": _text(t, m["a"], "text")})),
    ("text_add", r"(?:add|write|put|place)\s+(?:the\s+)?(?:text\s+)?" + _Q.format("a")
     + r"\s+(?:at|in|on|to)\s+(?:the\s+)?(?P<pos>[a-z][a-z\s\-]*)",
     lambda m, t: (None, {"text": _text(t, m["a"], "text"), "position": _position(m["pos"])})),
    ("background", r"(?:remove|erase|delete)\s+(?:the\s+)?background", lambda m, t: (None, {"color": "white"})),
    ("background", r"(?:make|turn|paint|colou?r|recolou?r|set)\s+(?:the\s+)?background(?:\s+colou?r)?"
     r"\s+(?:to\s+|into\s+)?" + _COLOR,
     lambda m, t: (None, {"color": color_word(m["color"])})),
    ("background", r"(?:change|replace)\s+(?:the\s+)?(?:colou?r\s+of\s+(?:the\s+)?)?background(?:\s+colou?r)?"
     r"\s+(?:to|into|with)\s+" + _ART + _COLOR + r"(?:\s+(?:one|background))?",
     lambda m, t: (None, {"color": color_word(m["color"])})),
    ("upscale", r"(?:upscale|upsample|enlarge|super-?resolve)(?:\s+(?:the\s+)?(?:image|picture|photo))?(?:\s+by)?"
     r"(?:\s+a\s+factor\s+of)?(?:\s+(?:(?P<f1>\d+(?:\.\d+)?)\s*[x×]|[x×]\s*(?P<f2>\d+(?:\.\d+)?)|(?P<f3>\d+(?:\.\d+)?))"
     r"(?:\s+times)?)?",
     lambda m, t: (None, {"factor": _factor(m)})),
    ("recolor", r"change\s+(?:the\s+)?colou?r\s+of\s+" + _ART + _TARGET + r"\s+(?:to|into)\s+" + _COLOR,
     lambda m, t: (target_from_words(m["target"]), {"color": color_word(m["color"])})),
    ("recolor", _RECOLOR_VERB + r"\s+" + _ART + _TARGET + r"\s+(?:to\s+|into\s+)?" + _COLOR,
     lambda m, t: (target_from_words(m["target"]), {"color": color_word(m["color"])})),
    ("replace", r"replace\s+" + _ART + _TARGET + r"\s+(?:with|by)\s+" + _ART
     + r"(?P<color>[a-z]+)(?:\s+(?P<shape>[a-z]+))?",
     lambda m, t: _replace(m)),
    ("remove", r"(?:remove|erase|delete)\s+" + _ART + _TARGET, lambda m, t: (target_from_words(m["target"]), {})),
]
_COMPILED = [(kind, re.compile(p, re.IGNORECASE), build) for kind, p, build in _RULES]


def _replace(m: re.Match) -> tuple[Target, dict]:
    if m["shape"] is None:
        raise _ClauseProblem("a replacement needs a colour and a shape: replace the <target> with a <color> <shape>")
    return target_from_words(m["target"]), {"color": color_word(m["color"]), "shape": _shape_word(m["shape"])}


def _read_clause(clause: str) -> tuple[str, Target | None, dict]:
    masked, texts = _quoted(clause)
    for kind, pattern, build in _COMPILED:
        m = pattern.fullmatch(masked)
        if m:
            target, params = build(m, texts)
            return kind, target, params
    return "", None, {}


def parse_instruction(text: str) -> list[Subtask]:
    """The subtask chain of an instruction in the grammar above, with parents (see the module docstring).

    Raises InstructionError naming the clause (its number and character offset) that the grammar does not
    read, or the unknown colour, shape or position in it."""
    if not isinstance(text, str) or not text.strip():
        raise InstructionError("the instruction is empty; accepted forms: " + "; ".join(FORMS))
    subtasks = []
    for n, (clause, offset) in enumerate(split_clauses(text), 1):
        where = f"clause {n} ({clause!r}, at character {offset})"
        try:
            kind, target, params = _read_clause(clause)
        except _ClauseProblem as err:
            raise InstructionError(f"{where}: {err}") from None
        if not kind:
            raise InstructionError(f"{where} is not an edit the grammar reads; accepted forms: " + "; ".join(FORMS))
        subtasks.append(Subtask(id=f"s{n}", kind=kind, target=target, params=params))
    if not subtasks:
        raise InstructionError(f"no edit in the instruction {text!r}; accepted forms: " + "; ".join(FORMS))
    return infer_parents(subtasks)


# ---- parents ----------------------------------------------------------------------------------------------

def _object_names(s: Subtask) -> list[tuple[str | None, str]]:
    """(colour, noun) pairs an object subtask's object is known by: before it and after it."""
    t = s.target
    names = [(t.color, t.noun)]
    if s.kind == "recolor" and s.params.get("color"):
        names.append((s.params["color"], t.noun))
    if s.kind == "replace" and s.params.get("shape"):
        names.append((s.params.get("color"), s.params["shape"]))
    return names


def _texts(s: Subtask) -> list[str | None]:
    """The texts a text subtask touches (None: whatever text there is)."""
    p = s.params
    if s.kind == "text_remove":
        return [p.get("text")]
    if s.kind == "text_replace":
        return [p.get("old"), p.get("text")]
    return [p.get("text")]


def _same_text(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a.strip().lower() == b.strip().lower()


def depends_on(later: Subtask, earlier: Subtask) -> bool:
    """Whether `later` edits what `earlier` made (see the module docstring)."""
    if later.kind in GLOBAL_KINDS or earlier.kind in GLOBAL_KINDS:
        return True
    if later.kind in OBJECT_KINDS and earlier.kind in OBJECT_KINDS and later.target and earlier.target:
        color, noun = later.target.color, later.target.noun
        return any(noun == n and (color is None or c is None or color == c) for c, n in _object_names(earlier))
    if later.kind in ("text_remove", "text_replace") and earlier.kind in TEXT_KINDS:
        ref = later.params.get("text") if later.kind == "text_remove" else later.params.get("old")
        return any(_same_text(ref, t) for t in _texts(earlier))
    return False


def infer_parents(subtasks: list[Subtask]) -> list[Subtask]:
    """The same subtasks with parents set: every earlier one that `depends_on` finds, and, for an object or
    a text, every earlier edit of that same object through a chain of names ("replace the star with a red
    square, make the red square blue, remove the blue square": the removal's parents are both)."""
    out: list[Subtask] = []
    same: dict[str, set[str]] = {}  # id → ids of the earlier edits of the same object or text
    for s in subtasks:
        direct = [e for e in out if depends_on(s, e)]
        local = set() if s.kind in GLOBAL_KINDS else {e.id for e in direct if e.kind not in GLOBAL_KINDS}
        for e_id in list(local):
            local |= same[e_id]
        same[s.id] = local
        ids = local | {e.id for e in direct}
        out.append(Subtask(s.id, s.kind, s.target, dict(s.params), tuple(e.id for e in out if e.id in ids)))
    return out


def topological_order(subtasks: Iterable[Subtask]) -> list[Subtask]:
    """The subtasks with every parent before its children, keeping the given order among independent ones.
    An unknown parent id or a cycle is a ChainError naming the subtask."""
    items = list(subtasks)
    index = {s.id: i for i, s in enumerate(items)}
    if len(index) != len(items):
        seen = set()
        dup = next(s.id for s in items if s.id in seen or seen.add(s.id))
        raise ChainError(f"subtask id {dup!r} is used twice")
    for s in items:
        for p in s.parents:
            if p not in index:
                raise ChainError(f"subtask {s.id}: unknown parent {p!r}; ids are {', '.join(index)}")
            if p == s.id:
                raise ChainError(f"subtask {s.id}: lists itself as its parent")
    done: set[str] = set()
    order: list[Subtask] = []
    while len(order) < len(items):
        ready = next((s for s in items if s.id not in done and all(p in done for p in s.parents)), None)
        if ready is None:
            stuck = [s.id for s in items if s.id not in done]
            raise ChainError(f"the parents of subtasks {', '.join(stuck)} form a cycle")
        order.append(ready)
        done.add(ready.id)
    return order


def describe_chain(subtasks: Iterable[Subtask]) -> str:
    """One line per subtask, "s2  Object Removal (blue circle)  ← s1", for traces and the viewer."""
    lines = []
    for s in subtasks:
        after = f"  ← {', '.join(s.parents)}" if s.parents else ""
        lines.append(f"{s.id}  {s.label}{after}")
    return "\n".join(lines)


# ---- a policy's chain -------------------------------------------------------------------------------------

def _json_payload(text: str) -> Any:
    """The first JSON list (or {"subtasks": [...]}) in a reply that may wrap it in prose or a code fence."""
    if not isinstance(text, str) or not text.strip():
        raise ChainError("the reply is empty; expected a JSON list of subtasks")
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            value = value.get("subtasks", value.get("chain"))
        if isinstance(value, list):
            return value
    raise ChainError(f"no JSON list of subtasks in the reply: {text.strip()[:200]!r}")


def _policy_target(raw: Any, where: str) -> Target | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            return target_from_words(raw)
        except _ClauseProblem as err:
            raise ChainError(f"{where}: target: {err}") from None
    if not isinstance(raw, dict):
        raise ChainError(f"{where}: target: expected an object {{name, color?, shape?}} or a string, got {raw!r}")
    unknown = set(raw) - {"name", "color", "shape"}
    if unknown:
        raise ChainError(f"{where}: target: unknown field(s) {', '.join(sorted(unknown))}; expected name, color, shape")
    color, shape, name = raw.get("color"), raw.get("shape"), raw.get("name")
    try:
        color = color_word(color) if color not in (None, "") else None
    except (_ClauseProblem, AttributeError) as err:
        raise ChainError(f"{where}: target.color: {err}") from None
    if shape is not None and not isinstance(shape, str):
        raise ChainError(f"{where}: target.shape: expected a string, got {shape!r}")
    # A shape outside SHAPES ("bench") is not one the shape tools know; it stays in the name only.
    shape = shape.lower() if shape and shape.lower() in SHAPES else None
    if name is None:
        name = " ".join(w for w in (color, shape) if w)
    if not isinstance(name, str) or not name.strip():
        raise ChainError(f"{where}: target.name: expected a non-empty string, got {raw.get('name')!r}")
    try:
        words = target_from_words(name)  # what the name itself says, as the grammar reads it
    except _ClauseProblem as err:
        raise ChainError(f"{where}: target.name: {err}") from None
    return Target(words.name, color or words.color, shape or words.shape)


def _policy_params(kind: str, raw: Any, where: str) -> dict:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ChainError(f"{where}: params: expected an object, got {raw!r}")
    allowed = {"recolor": {"color"}, "remove": set(), "replace": {"color", "shape"}, "text_remove": {"text"},
               "text_replace": {"old", "text"}, "text_add": {"text", "position"}, "background": {"color"},
               "upscale": {"factor"}}[kind]
    unknown = set(raw) - allowed
    if unknown:
        raise ChainError(f"{where}: params: unknown field(s) {', '.join(sorted(unknown))} for {kind}; "
                         f"expected {', '.join(sorted(allowed)) or 'none'}")
    out: dict[str, Any] = {}
    try:
        if kind in ("recolor", "replace") or (kind == "background" and "color" in raw):
            if "color" not in raw:
                raise _ClauseProblem("color is required")
            out["color"] = color_word(str(raw["color"]))
        elif kind == "background":
            out["color"] = "white"
        if kind == "replace":
            if "shape" not in raw:
                raise _ClauseProblem("shape is required")
            out["shape"] = _shape_word(str(raw["shape"]))
        for key in ("text", "old"):
            if key in raw and raw[key] is not None:
                if not isinstance(raw[key], str) or not raw[key].strip():
                    raise _ClauseProblem(f"{key} must be a non-empty string, got {raw[key]!r}")
                out[key] = raw[key]
        if kind in ("text_replace", "text_add") and "text" not in out:
            raise _ClauseProblem("text is required")
        if kind == "text_add":
            if not isinstance(raw.get("position"), str):
                raise _ClauseProblem(f"position is required, one of {', '.join(POSITIONS)}")
            out["position"] = _position(raw["position"])
        if kind == "upscale":
            f = raw.get("factor", 2)
            if isinstance(f, bool) or not isinstance(f, (int, float)) or not 1.0 < float(f) <= MAX_FACTOR:
                raise _ClauseProblem(f"factor must be a number more than 1 and at most {MAX_FACTOR:g}, got {f!r}")
            out["factor"] = int(f) if float(f).is_integer() else float(f)
    except _ClauseProblem as err:
        raise ChainError(f"{where}: params: {err}") from None
    return out


def subtasks_from_policy(text: str) -> list[Subtask]:
    """The chain a model wrote as a JSON list of {id?, kind, target?, params?, parents?}, validated and in
    topological order. When no entry gives parents, they are inferred as for the grammar.

    Raises ChainError naming the entry (its position and id) on an unknown kind, a bad parameter, a missing
    target, an unknown parent or a cycle."""
    entries = _json_payload(text)
    if not entries:
        raise ChainError("the chain is an empty list")
    if len(entries) > MAX_SUBTASKS:
        raise ChainError(f"the chain has {len(entries)} subtasks; at most {MAX_SUBTASKS} are accepted")
    subtasks, given_parents = [], any(isinstance(e, dict) and "parents" in e for e in entries)
    for n, e in enumerate(entries, 1):
        where = f"entry {n}"
        if not isinstance(e, dict):
            raise ChainError(f"{where}: expected an object, got {e!r}")
        unknown = set(e) - {"id", "kind", "target", "params", "parents", "label"}
        if unknown:
            raise ChainError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                             "expected id, kind, target, params, parents")
        sid = e.get("id", f"s{n}")
        if isinstance(sid, bool) or not isinstance(sid, (str, int)) or not str(sid).strip():
            raise ChainError(f"{where}: id: expected a non-empty string, got {sid!r}")
        sid = str(sid).strip()
        where = f"entry {n} (id {sid!r})"
        kind = e.get("kind")
        if kind not in KINDS:
            raise ChainError(f"{where}: unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
        target = _policy_target(e.get("target"), where)
        if kind in OBJECT_KINDS and target is None:
            raise ChainError(f"{where}: a {kind} subtask needs a target {{name, color?, shape?}}")
        params = _policy_params(kind, e.get("params"), where)
        parents = e.get("parents") or []
        if not isinstance(parents, list) or not all(isinstance(p, (str, int)) and not isinstance(p, bool)
                                                     for p in parents):
            raise ChainError(f"{where}: parents: expected a list of ids, got {parents!r}")
        subtasks.append(Subtask(sid, kind, target if kind not in GLOBAL_KINDS else None, params,
                                tuple(str(p) for p in parents)))
    if not given_parents:
        subtasks = infer_parents(subtasks)
    try:
        return topological_order(subtasks)
    except ChainError as err:
        raise ChainError(f"policy chain: {err}") from None
