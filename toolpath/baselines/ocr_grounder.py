"""An offline GUI grounder: OCR the screenshot, find the text the instruction names, point at its element.

Policy kind `ocr-grounder`. It reads the ScreenObservation the computer-use agent hands it (the task, the
history of operations, the screenshot; without one, the same from the last user message), reads the
screen's text with RapidOCR (rapidocr-onnxruntime, whose ONNX models ship in the wheel; tools/image/text.py
loads the engine) or, where that is not installed, Debian's tesseract, and answers in ScaleCUA's grammar.

Matching: the instruction's quoted strings first ('Export', "File"), else its content words (the
instruction without verbs, articles and the element kind); each OCR line and each run of whole words in
it is compared with the query, case and punctuation ignored: exact words score 1, a misread is scored by
difflib's ratio; below MATCH_MIN nothing matches and the policy declines.
Where it points, by the kind the instruction names:
  field    a text field named by its label is the frame next to the label (to its right, or below it);
           a text inside a frame (a placeholder such as "Search") is in the field already;
  icon     the text is the icon's tooltip: the icon is the nearest shape above it (or to its left);
  other    the centre of the matched words (a button's or menu's caption, a link's text).
Answers: grounding mode `click(x, y)` in the run's coordinates (`format.space(w, h).from_screen`; screen
pixels when the format has no space), or `terminate(status="failure", info=why)` when nothing matches or
the image cannot be read. Action modes click the match (and `write` the text of "type 'x' into …"), and on
the next turn, seeing its own step in the history, answer `terminate(status="success")`.
OCR results are cached per image file (path, size, mtime) for the process.
"""

from __future__ import annotations

import difflib
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..observations import ScreenObservation
from ..policies.base import Response
from ..state import Message, ToolCall

MATCH_MIN = 0.8
KIND_WORDS = {"button": "button", "btn": "button", "menu": "menu", "field": "field", "input": "field",
              "box": "field", "textbox": "field", "bar": "field", "link": "link", "icon": "icon", "tool": "icon",
              "tooltip": "icon"}
STOP = set("""click double right left tap press open select choose hit go to the a an on in into of for with
          at please item option element menubar entry text type enter write labelled labeled named called
          that which is this its and or button btn menu field input box textbox bar link icon tool tooltip
          find locate where show me""".split())
MIN_STOP = set("the a an click open press select tap button menu field input box link icon tooltip with".split())
QUOTED = re.compile(r"(?<![\w])['\"‘“]([^'\"‘’“”]+?)['\"’”](?![\w])")
TYPE_INTO = re.compile(r"\b(?:type|enter|write)\s+['\"‘“](.+?)['\"’”]\s+(?:in|into)\b", re.I)
SECTION = re.compile(r"^(URLs:|Previous operations:|Some of your action lines|Your reply had no|Elements \(|Step \d+:)")

_OCR_CACHE: dict[tuple[str, int, int], tuple[list, str]] = {}


class Unreadable(Exception):
    """The screenshot cannot be read; the message says why (the policy declines with it)."""


# ---- reading the agent's message ------------------------------------------------------------------------

def read_observation(obs: ScreenObservation) -> tuple[str, list[str], str | None]:
    """(instruction, history operations, screenshot path) from the agent's observation."""
    instruction = " ".join(line.strip() for line in obs.task.splitlines() if line.strip())
    return instruction, list(obs.history), obs.screenshot


def read_prompt(messages: list[Message]) -> tuple[str, list[str], str | None]:
    """(instruction, history operations, screenshot path) from the last user message, laid out as the
    computer-use agent writes its prompt: for a call that comes with no observation (a recorded transcript,
    a script or test that writes the message by hand)."""
    user = next((m for m in reversed(messages) if m.role == "user"), None)
    if user is None:
        return "", [], None
    task, history, in_task, in_history = [], [], False, False
    for line in user.content.splitlines():
        if line.startswith("Task:"):
            in_task, in_history = True, False
            task.append(line[5:].strip())
        elif line.startswith("Previous operations:"):
            in_task, in_history = False, True
        elif SECTION.match(line):
            in_task = False
            if in_history and re.match(r"^Step \d+: ", line) and "current screenshot" not in line:
                history.append(line.split(": ", 1)[1])
            else:
                in_history = False
        elif in_task:
            task.append(line.strip())
    instruction = " ".join(t for t in task if t) or user.content.strip()
    path = user.images[-1].path if user.images else None
    return instruction, history, path


def query_of(instruction: str) -> tuple[list[str], str | None]:
    """(the strings to find, the element kind named) from an instruction."""
    text = TYPE_INTO.sub(" ", instruction)
    kinds = [KIND_WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in KIND_WORDS]
    kind = ("field" if "search" in text.lower() and ("bar" in kinds or "field" in kinds)
            else (kinds[-1] if kinds else None))
    quoted = [q.strip() for q in QUOTED.findall(text) if q.strip()]
    if quoted:
        return quoted, kind
    words = re.findall(r"[A-Za-z0-9][\w\-]*", QUOTED.sub(" ", text))
    content = [w for w in words if w.lower() not in STOP]
    if not content:
        content = [w for w in words if w.lower() not in MIN_STOP]
    return ([" ".join(content)] if content else []), kind


def normal(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


# ---- OCR ------------------------------------------------------------------------------------------------

def load_image(path: str | None) -> np.ndarray:
    from .images import read_rgb

    return read_rgb(path, "screenshot", Unreadable)


def ocr_lines(path: str, image: np.ndarray) -> tuple[list[tuple[tuple[int, int, int, int], str]], str]:
    """(lines as (box, text), engine name) for an image file; cached per file version in this process."""
    p = Path(path)
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key and key in _OCR_CACHE:
        return _OCR_CACHE[key]
    from ..tools.image import text as T  # the repository's OCR engines (one RapidOCR per process)

    h, w = image.shape[:2]
    if T.rapid_reason() is None:
        try:
            # BGR, as the engine expects; no angle classifier: screenshots are upright
            result, _ = T._rapid_engine()(np.ascontiguousarray(image[..., ::-1]), use_cls=False)
        except Exception as err:  # an engine failure on a strange image: decline, never crash the episode
            raise Unreadable(f"the OCR engine failed on the screenshot: {err}") from None
        lines, engine = T.parse_rapid(result)[0], "rapidocr"
    elif T.tesseract_reason() is None:
        try:
            lines, engine = T._tesseract(image, "11"), "tesseract"
        except Exception as err:
            raise Unreadable(f"tesseract failed on the screenshot: {err}") from None
    else:
        raise Unreadable(f"no OCR engine: {T.rapid_reason()}; or {T.tesseract_reason()}")
    lines = [((max(0, x0), max(0, y0), min(w, x1), min(h, y1)), t) for (x0, y0, x1, y1), t in lines
             if t.strip() and x1 > x0 and y1 > y0]
    out = (lines, engine)
    if key:
        _OCR_CACHE[key] = out
    return out


def spans(box: tuple[int, int, int, int], text: str, max_words: int):
    """(box, text) of each run of up to max_words whole words in an OCR line; x estimated from the share of
    characters before and in the run (OCR boxes are per line)."""
    x0, y0, x1, y1 = box
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    n = max(len(text), 1)
    for i in range(len(words)):
        for j in range(i, min(len(words), i + max_words)):
            a, b = words[i][0], words[j][1]
            yield (int(x0 + (x1 - x0) * a / n), y0, int(x0 + (x1 - x0) * b / n), y1), text[a:b], j - i + 1 == len(words)


def glued(box: tuple[int, int, int, int], text: str, query: str):
    """(score, box, text) of the query inside a line whose words the OCR glued together ("WindowHelpSelection"):
    the best window of the query's length over the line's letters and digits, a little below a whole-word
    match of the same letters."""
    q = normal(query).replace(" ", "")
    idx = [i for i, ch in enumerate(text) if ch.isalnum()]
    letters = "".join(text[i].lower() for i in idx)
    if len(q) < 2 or len(letters) <= len(q):
        return 0.0, None, ""
    def starts(i: int) -> bool:  # a word may start here: line start, after a non-letter, a capital after a
        # lower-case letter or a digit (a misread last letter of the previous word: "DebugBuild" read "6Build")
        return i == 0 or not text[i - 1].isalnum() or (text[i].isupper() and not text[i - 1].isupper())

    def ends(i: int) -> bool:  # a word may end before i
        return i >= len(text) or not text[i].isalnum() or (text[i].isupper() and text[i - 1].islower())

    best = (0.0, 0)
    for k in range(len(letters) - len(q) + 1):
        if not (starts(idx[k]) and ends(idx[k + len(q) - 1] + 1)):
            continue
        r = 1.0 if letters[k:k + len(q)] == q else difflib.SequenceMatcher(None, letters[k:k + len(q)], q).ratio()
        if r > best[0]:
            best = (r, k)
    r, k = best
    a, b = idx[k], idx[k + len(q) - 1] + 1
    x0, y0, x1, y1 = box
    n = max(len(text), 1)
    return 0.97 * r, (int(x0 + (x1 - x0) * a / n), y0, int(x0 + (x1 - x0) * b / n), y1), text[a:b]


def best_match(lines, queries: list[str]):
    """(score, box, text) of the best-matching run of words over all queries; (0, None, '') when none. A text
    containing the query gets no credit for that: a short OCR fragment inside the query ("In" of "Window")
    must not count as a match, or a target that is not on the screen is clicked instead of declined."""
    from ..tools.image.text import text_similarity

    best = (0.0, None, "")
    for q in queries:
        nq = len(normal(q).split()) or 1
        for box, text in lines:
            for sbox, stext, whole in spans(box, text, nq + 1):
                sc = text_similarity(stext, q, contained=None)
                sc -= 0.001 * abs(len(normal(stext).split()) - nq)  # fewer extra words first
                sc += 0.0005 * whole  # then a line that is just the label
                if sc > best[0]:
                    best = (sc, sbox, stext)
        if best[0] < 0.99:
            for box, text in lines:
                found = glued(box, text, q)
                if found[0] > best[0]:
                    best = found
    return best


# ---- where the element is, around its text ---------------------------------------------------------------

def _components(image: np.ndarray, win: tuple[int, int, int, int]):
    """Boxes (screen pixels) of the shapes in a window: pixels unlike the window's commonest colour."""
    import cv2

    x0, y0, x1, y1 = win
    crop = image[y0:y1, x0:x1].astype(np.int16)
    if crop.size == 0:
        return []
    flat = (crop // 8).reshape(-1, 3)
    vals, counts = np.unique(flat, axis=0, return_counts=True)
    bg = vals[counts.argmax()] * 8 + 4
    mask = (np.abs(crop - bg).sum(axis=2) > 40).astype(np.uint8)
    mask = cv2.dilate(mask, np.ones((3, 3), np.uint8))
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    return [(x0 + s[0], y0 + s[1], x0 + s[0] + s[2], y0 + s[1] + s[3]) for s in stats[1:n] if s[4] >= 6]


def icon_near(image: np.ndarray, box) -> tuple[int, int] | None:
    """The centre of the nearest shape above a tooltip's text (else to its left): the icon it belongs to."""
    H, W = image.shape[:2]
    x0, y0, x1, y1 = box
    h = max(y1 - y0, 8)
    cx = (x0 + x1) / 2
    # The window takes in the text itself, so the tooltip's frame and letters are whole shapes that overlap
    # the text's box and can be left out; an icon cut by the window's edge is still seen.
    def apart(c):
        return c[2] <= x0 or c[0] >= x1 or c[3] <= y0 or c[1] >= y1

    win = (max(0, int(x0 - 3 * h)), max(0, int(y0 - 5 * h)), min(W, int(x1 + 3 * h)), min(H, y1 + 1))
    found = [c for c in _components(image, win) if apart(c) and c[3] <= y0 + 2 and c[2] - c[0] >= 6
             and c[3] - c[1] >= 6]
    if not found:
        win = (max(0, int(x0 - 6 * h)), max(0, y0 - h), min(W, x1 + 1), min(H, y1 + h))
        found = [c for c in _components(image, win) if apart(c) and c[2] <= x0 + 2 and c[2] - c[0] >= 6]
    if not found:
        return None
    c = min(found, key=lambda c: ((c[0] + c[2]) / 2 - cx) ** 2 + (y0 - c[3]) ** 2)
    return int((c[0] + c[2]) / 2), int((c[1] + c[3]) / 2)


def enclosed(image: np.ndarray, box) -> bool:
    """Whether a text sits inside a frame (a placeholder in its field): a border close on its left, above and
    below (a label beside or above a field has the field on one side only)."""
    H, W = image.shape[:2]
    x0, y0, x1, y1 = box
    h = max(y1 - y0, 8)
    cy, cx = (y0 + y1) // 2, (x0 + x1) // 2
    ref = image[cy, max(0, x0 - 2)].astype(np.int16)
    near_x, near_y = max(12, h), max(10, int(0.8 * h))
    left = image[cy, max(0, x0 - near_x):max(0, x0 - 2)].astype(np.int16)
    up = image[max(0, y0 - near_y):max(0, y0 - 1), cx].astype(np.int16)
    down = image[min(H, y1 + 1):min(H, y1 + near_y), cx].astype(np.int16)
    hit = lambda seg: seg.size > 0 and bool((np.abs(seg - ref).sum(axis=-1) > 60).any())  # noqa: E731
    return hit(left) and hit(up) and hit(down)


def field_near(image: np.ndarray, box) -> tuple[int, int] | None:
    """The centre of the text field a label names: the frame to the label's right, or just below it."""
    H, W = image.shape[:2]
    x0, y0, x1, y1 = box
    h = max(y1 - y0, 8)
    cy = (y0 + y1) / 2
    options = []
    win = (min(W - 1, x1 + 1), max(0, int(y0 - 1.5 * h)), min(W, int(x1 + 40 * h)), min(H, int(y1 + 1.5 * h)))
    for c in _components(image, win):
        if c[1] <= cy <= c[3] and c[2] - c[0] >= 3 * h and c[3] - c[1] >= h:
            options.append((c[0] - x1, c))
    win = (max(0, int(x0 - h)), min(H - 1, y1 + 1), min(W, int(x0 + 40 * h)), min(H, int(y1 + 4 * h)))
    for c in _components(image, win):
        if c[0] <= x0 + h and c[2] - c[0] >= 3 * h and c[3] - c[1] >= h and c[1] - y1 <= 2 * h:
            options.append((c[1] - y1, c))
    if not options:
        return None
    c = min(options, key=lambda o: o[0])[1]
    return int((c[0] + c[2]) / 2), int((c[1] + c[3]) / 2)


def locate(image: np.ndarray, lines, instruction: str) -> tuple[tuple[int, int] | None, str]:
    """(screen point, what was found) for an instruction, or (None, why not)."""
    queries, kind = query_of(instruction)
    if not queries:
        return None, f"the instruction names nothing to look for: {instruction!r}"
    if not lines:
        return None, "no text on the screen"
    score, box, text = best_match(lines, queries)
    if box is None or score < MATCH_MIN:
        near = f" (closest: {text!r}, {score:.2f})" if text else ""
        return None, f"no text on the screen matches {' / '.join(repr(q) for q in queries)}{near}"
    centre = ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)
    if kind == "field" and not enclosed(image, box):
        point = field_near(image, box)
        return (point, f"the field next to {text!r}") if point else (centre, f"{text!r} (no field frame found)")
    if kind == "icon":
        point = icon_near(image, box)
        return (point, f"the icon of the tooltip {text!r}") if point else (centre, f"{text!r} (no icon found)")
    return centre, repr(text)


# ---- the policy -----------------------------------------------------------------------------------------

def _num(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


class OCRGrounder:
    observes = ("screenshot",)

    def __init__(self, spec: Any = None, name: str = "ocr-grounder"):
        self.spec, self.name = spec, name

    def _answer(self, messages: list[Message], fmt: Any, obs: Any = None) -> str:
        mode = getattr(fmt, "mode", "grounding")
        if isinstance(obs, ScreenObservation):
            instruction, history, path = read_observation(obs)
        else:
            instruction, history, path = read_prompt(messages)
        if mode != "grounding" and history:
            return ("<operation>The task is done</operation>\n"
                    "<action>terminate(status='success')</action>")
        try:
            image = load_image(path)
            lines, _ = ocr_lines(path, image)
            point, what = locate(image, lines, instruction)
        except Unreadable as err:
            point, what = None, str(err)
        except Exception as err:  # noqa: BLE001 - a strange image must end in a decline that says why, not a crash
            point, what = None, f"could not ground on this screenshot ({type(err).__name__}: {err})"
        if point is None:
            return (f"<operation>Give up: {what}</operation>\n"
                    f"<action>terminate(status='failure', info={what!r})</action>")
        h, w = image.shape[:2]
        space = fmt.space(w, h) if callable(getattr(fmt, "space", None)) else None
        x, y = space.from_screen(*point) if space else point
        calls = [f"click(x={_num(x)}, y={_num(y)})"]
        typed = TYPE_INTO.search(instruction)
        if typed and mode != "grounding":
            calls.append(f"write(message={typed.group(1)!r})")
        return f"<operation>Click {what}</operation>\n<action>{chr(10).join(calls)}</action>"

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        started = time.perf_counter()
        fmt = generation.get("format")
        raw = self._answer(messages, fmt, generation.get("observation"))
        if callable(getattr(fmt, "parse", None)) and getattr(fmt, "name", "") == "scalecua":
            parsed = fmt.parse(raw, id_prefix=f"ocr{sum(m.role == 'assistant' for m in messages) + 1}")
            text, calls, issues = parsed.content, parsed.calls, parsed.issues
        else:  # called outside the computer-use agent: read our own grammar directly
            from ..policies.formats.scalecua import ScaleCUAFormat

            parsed = ScaleCUAFormat(mode=getattr(fmt, "mode", "grounding")).parse(raw, id_prefix="ocr")
            text, calls, issues = parsed.content, parsed.calls, parsed.issues
        return Response(text=text, tool_calls=[ToolCall(**c.model_dump()) for c in calls], issues=issues, raw=raw,
                        tokens_in=0, tokens_out=0, latency_s=time.perf_counter() - started)
