"""What the DOM policy knows about a page: the observation it reads (task, history, elements), helpers that
ask questions of the elements (which are fields, which is the Submit button, which match a text), and the
writer of actions in the run's coordinate convention. The rules that use them are in dom.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..observations import ScreenObservation

ELEMENTS_HEADER = re.compile(r"^Elements \(boxes as \[x1, y1, x2, y2\]")
STEP_LINE = re.compile(r"^Step (\d+): (.*)$")
PAGE_INSTRUCTION = re.compile(r"instruction (?:at the top of|on) the page", re.I)
CONTROL_TAGS = {"a", "button", "input", "textarea", "select", "option", "label"}
TEXT_INPUTS = {"text", "password", "email", "search", "tel", "url", "number", "date", "time", "input", ""}
SUBMIT_WORDS = ("submit", "ok", "login", "log in", "sign in", "search", "go", "next", "done", "agree")
ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
            "fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "seventh": 7, "7th": 7, "eighth": 8, "8th": 8,
            "ninth": 9, "9th": 9, "tenth": 10, "10th": 10, "last": -1}
SETTLE = "wait(seconds=1)"  # after opening a tab or section: its animation moves what the next step clicks
ALIASES = {"x": ("x", "×", "✕", "close"), "close": ("close", "x", "×", "✕")}


def ordinal(word: str) -> int | None:
    """1 for "first"/"1st", 12 for "12th", -1 for "last"; None for anything else."""
    word = word.lower()
    if word in ORDINALS:
        return ORDINALS[word]
    m = re.fullmatch(r"(\d+)(?:st|nd|rd|th)", word)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


class Unclear(Exception):
    """The page or the instruction is not one the rules understand; the message says why."""


# ---- reading the message ---------------------------------------------------------------------------------

@dataclass
class Page:
    task: str
    history: list[str]
    elements: list[dict]
    skipped: int = 0  # element lines that were not usable JSON objects

    @property
    def from_page(self) -> bool:
        return bool(PAGE_INSTRUCTION.search(self.task))

    @property
    def instruction(self) -> str:
        return page_instruction(self.elements) if self.from_page else self.task

    @property
    def content(self) -> list[dict]:
        """The elements to act on: all of them, less the instruction's own (its bold words are no targets)."""
        if not self.from_page:
            return self.elements
        _, box = instruction_block(self.elements)
        # controls never belong to it, even when the first text element is a container drawn around them
        return [e for e in self.elements if box is None or not _inside(e["box"], box) or is_field(e)
                or is_clickable(e) or e["tag"] in CONTROL_TAGS]


def _valid_box(box: Any) -> bool:
    return (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                            for v in box) and box[2] >= box[0] and box[3] >= box[1])


def _element(e: Any) -> dict | None:
    """An element the rules can use (a dict with a valid box; text a string, tag lower-case), else None."""
    if not isinstance(e, dict) or not _valid_box(e.get("box")):
        return None
    e["text"] = e["text"] if isinstance(e.get("text"), str) else ""
    e["tag"] = e["tag"].lower() if isinstance(e.get("tag"), str) else ""
    return e


def page_of(obs: ScreenObservation) -> Page:
    """The Page of the agent's observation (its elements' boxes already in the run's coordinates)."""
    elements = [e for e in (_element(dict(e)) for e in obs.elements) if e is not None]
    task = " ".join(line.strip() for line in obs.task.splitlines()).strip()
    return Page(task=task, history=list(obs.history), elements=elements, skipped=len(obs.elements) - len(elements))


def read_message(text: str) -> Page:
    """Task, history and elements from a user message laid out as the computer-use agent writes its prompt;
    unusable element lines are skipped. For a call that comes with no observation (a recorded transcript,
    a test that writes the message by hand): the agent hands the policy a ScreenObservation instead."""
    task_lines: list[str] = []
    history: list[str] = []
    elements: list[dict] = []
    skipped = 0
    section = "task"
    for line in text.splitlines():
        if ELEMENTS_HEADER.match(line):
            section = "elements"
            continue
        if section == "elements":
            if not line.startswith("{"):
                if STEP_LINE.match(line):
                    section = "end"
                elif line.strip():
                    skipped += 1
                continue
            try:
                e = _element(json.loads(line))
            except json.JSONDecodeError:
                e = None
            if e is None:
                skipped += 1
                continue
            elements.append(e)
            continue
        if section == "end":
            continue
        if line.startswith("Task: "):
            task_lines = [line[len("Task: "):]]
            section = "task"
        elif line.startswith("Previous operations:"):
            section = "history"
        elif section == "history" and STEP_LINE.match(line):
            history.append(STEP_LINE.match(line).group(2))
        elif section == "task" and task_lines and not STEP_LINE.match(line) and not line.startswith("URLs: "):
            task_lines.append(line)
    return Page(task=" ".join(t.strip() for t in task_lines).strip(), history=history, elements=elements,
                skipped=skipped)


def _inside(inner: list, outer: list, slack: float = 0.5) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


def page_instruction(elements: list[dict]) -> str:
    """The instruction at the top of the page: the first text element that is no control, plus the text of
    the elements inside its box that it does not already hold (bold words reported as their own spans)."""
    return instruction_block(elements)[0]


def instruction_block(elements: list[dict]) -> tuple[str, list | None]:
    """(instruction text, box of the element that holds it) from the page's elements; ("", None) if none.

    An element's text may be its own text nodes only, its inline children (MiniWoB++'s bold words) being
    elements of their own: their texts then fill the empty quotes the own text has left ('Enter "" into …')
    in document order, and any left over are appended, so the rules still find every word."""
    for i, e in enumerate(elements):
        if e["text"].strip() and e["tag"] not in CONTROL_TAGS and e.get("role") not in ("button", "link"):
            text = e["text"].strip()
            extra = []
            for f in elements[i + 1:]:
                t = f["text"].strip()
                if t and _inside(f["box"], e["box"]) and t not in text:
                    extra.append(t)
            for t in extra:
                if '""' in text:
                    text = text.replace('""', f'"{t}"', 1)
                else:
                    text = f"{text} {t}"
            return re.sub(r"\s+", " ", text), e["box"]
    return "", None


# ---- element helpers -------------------------------------------------------------------------------------

def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s or "").strip().lower()


def centre(e: dict) -> tuple[float, float]:
    x1, y1, x2, y2 = e["box"]
    return (x1 + x2) / 2, (y1 + y2) / 2


def is_field(e: dict) -> bool:
    if e["tag"] == "textarea":
        return True
    return e["tag"] == "input" and str(e.get("type", "text")).lower() in TEXT_INPUTS


def is_clickable(e: dict) -> bool:
    return (e["tag"] in ("a", "button") or e.get("role") in ("button", "link", "tab", "menuitem", "option",
                                                                 "treeitem", "checkbox", "radio")
            or (e["tag"] == "input" and str(e.get("type", "")).lower() in ("button", "submit", "reset")))


def label_of(e: dict) -> str:
    return str(e.get("label") or e.get("placeholder") or e.get("name") or e.get("aria_label") or "")


def visible_text(e: dict) -> str:
    t = e["text"]
    if not t and e["tag"] == "input" and str(e.get("type", "")).lower() in ("button", "submit", "reset"):
        t = str(e.get("value") or "")
    return t


def enabled(e: dict) -> bool:
    return not e.get("disabled")


def match_text(elements: list[dict], target: str, prefer: str = "") -> list[dict]:
    """Elements whose text is the target: exact, then ignoring case and spaces, then an alias ("x" → close).

    Among equal matches, clickable elements (and those of the preferred kind) come first; a container whose
    text merely holds the target is no match."""
    t = target.strip()
    alias = ALIASES.get(norm(t), (norm(t),))
    tiers = [lambda e: visible_text(e).strip() == t,
             lambda e: norm(visible_text(e)) == norm(t),
             lambda e: norm(visible_text(e)) in alias or norm(str(e.get("title", ""))) in alias
             or norm(label_of(e)) in alias]
    for ok in tiers:
        found = [e for e in elements if ok(e) and enabled(e)]
        if found:
            return sorted(found, key=lambda e: (not kind_is(e, prefer), not is_clickable(e)))
    return []


def kind_is(e: dict, kind: str) -> bool:
    if kind == "button":
        return e["tag"] == "button" or e.get("role") == "button" or str(e.get("type", "")) in ("button", "submit")
    if kind == "link":
        return e["tag"] == "a" or e.get("role") == "link"
    if kind == "tab":
        return e.get("role") == "tab"
    return False


def fields_of(elements: list[dict]) -> list[dict]:
    return [e for e in elements if is_field(e) and enabled(e)]


def submit_button(elements: list[dict], named: str = "") -> dict | None:
    """The button that submits: the one the instruction names, else the usual words, else the only button."""
    buttons = [e for e in elements if enabled(e) and (kind_is(e, "button") or e["tag"] == "a") and visible_text(e)]
    if named:
        found = match_text(buttons, named)
        if found:
            return found[0]
    for word in SUBMIT_WORDS:
        found = [b for b in buttons if norm(visible_text(b)) == word]
        if found:
            return found[-1]
    real = [b for b in buttons if kind_is(b, "button")]
    return real[0] if len(real) == 1 else None


def field_for(elements: list[dict], *words: str) -> dict | None:
    """The text field whose label, name, placeholder or nearest label text to its left or above names a word."""
    fields = fields_of(elements)
    for w in words:
        for f in fields:
            if w in norm(label_of(f)) or w in norm(str(e_type(f))):
                return f
    labels = [e for e in elements if e["tag"] in ("label", "span", "td", "th", "div", "p") and e["text"].strip()]
    for w in words:
        for lab in labels:
            if w not in norm(lab["text"]) or len(lab["text"]) > 40:
                continue
            near = sorted(fields, key=lambda f: _distance(lab, f))
            if near and _distance(lab, near[0]) < 10 ** 6:
                return near[0]
    return None


def holds(f: dict, text: str) -> bool:
    """Whether a field already holds `text` (a password field shows one '*' per character)."""
    value = str(f.get("value") or "")
    return value == text or (e_type(f) == "password" and value == "*" * len(text) and bool(text))


def e_type(e: dict) -> str:
    return str(e.get("type", "")).lower()


def _distance(label: dict, f: dict) -> float:
    """How far a field is from a label, for fields right of or below it (others are 'far')."""
    lx, ly = centre(label)
    fx, fy = centre(f)
    if fy < label["box"][1] - 2 or (fx < label["box"][0] and fy < label["box"][3]):
        return 10.0 ** 6
    return abs(fy - ly) * 2 + abs(fx - lx)


# ---- actions ---------------------------------------------------------------------------------------------

@dataclass
class Plan:
    operation: str
    calls: list[str] = field(default_factory=list)


class Writer:
    """Action text in the run's coordinate convention (boxes already are; only the number format differs)."""

    def __init__(self, convention: str):
        self.convention = convention

    def num(self, v: float) -> str:
        if self.convention == "normalized":
            return f"{round(v, 4):g}"
        return str(int(round(v)))

    def click(self, e: dict, where: str = "centre") -> str:
        x, y = centre(e)
        if where == "left":  # date/time inputs: the first segment (month, hour) is at the left edge
            x1, _, x2, _ = e["box"]
            x = x1 + (x2 - x1) * 0.08
        return f"click(x={self.num(x)}, y={self.num(y)})"

    @staticmethod
    def write(text: str) -> str:
        return f"write(message={json.dumps(text, ensure_ascii=False)})"

    @staticmethod
    def press(key: str) -> str:
        return f"press(keys={json.dumps(key)})"

    @staticmethod
    def select_all() -> str:
        return "hotkey('ctrl', 'a')"

    @staticmethod
    def done() -> str:
        return 'terminate(status="success")'

    def fill(self, f: dict, text: str) -> list[str]:
        """Click a field, replace what it holds, type the text."""
        kind = e_type(f)
        if kind in ("date", "time"):
            return [self.click(f, "left"), self.write(text)]
        out = [self.click(f)]
        if f.get("value"):
            out.append(self.select_all())
        return out + [self.write(text)]


def quoted(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r'"([^"]+)"|“([^”]+)”', text)]


def opened(history: list[str]) -> set[str]:
    """Tabs and sections earlier steps opened (their operations name them after 'Open the ...')."""
    out = set()
    for op in history:
        m = re.match(r'Open the (?:tab|section) "(.*)" to look for', op)
        if m:
            out.add(m.group(1))
    return out
