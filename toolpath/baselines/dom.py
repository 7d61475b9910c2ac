"""A rule-based web policy that acts on the page's elements: MiniWoB++-style tasks, without a model.

It reads the ScreenObservation the computer-use agent hands it each step (it observes "dom"): the task, the
history of operations, and the page's elements (boxes already in the run's coordinates, so a click on a box's
centre needs no conversion). Called without one, it reads the same from the last user message as the agent
lays it out (`read_message`). It answers in
ScaleCUA's grammar (`<operation>…</operation>\n<action>…</action>`), several calls in one action block when the
whole sequence is known from the current page (click a field, write, click Submit, terminate).

The instruction: when the task says to follow the instruction at the top of the page (MiniWoB++'s #query,
whose id attribute the element list does not carry), it is the text of the first text-bearing, non-control
element in document order, joined with the text of elements drawn inside its box (a query whose bold words
are elements of their own). Otherwise the task text is the instruction.

Each step decides from the current elements alone plus what the history shows (which tabs or sections were
already opened: operations name them in quotes), so a resumed run decides the same. Rules, tried in order:
log in with a username and password; enter a password into every password field; autocomplete (type the
prefix, then pick the suggestion with the right ending); copy a textarea into a field; type a derived text (the
n-th word of a paragraph, a table's value for a key); type a quoted text (or a date, a time, a number) into
the field and submit; choose an option of a select; check the named checkboxes or radio buttons and submit;
focus the n-th text field; click a widget of a kind; click the elements a quoted (or named) target matches,
opening tabs and collapsed sections one by one until it shows. A page no rule understands ends the episode
with terminate(status="failure") and the reason, never an exception.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ..observations import ScreenObservation
from ..policies.base import Response, word_count
from .dom_page import (
    SETTLE,
    TEXT_INPUTS,
    Page,
    Plan,
    Unclear,
    Writer,
    centre,
    e_type,
    enabled,
    field_for,
    fields_of,
    holds,
    is_clickable,
    is_field,
    kind_is,
    match_text,
    norm,
    opened,
    ordinal,
    page_of,
    quoted,
    read_message,
    submit_button,
    visible_text,
)

# ---- rules -----------------------------------------------------------------------------------------------

def rule_login(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r'username\s*"([^"]*)".*password\s*"([^"]*)"', ins, re.I)
    q = quoted(ins)
    if m:
        user, pw = m.groups()
    elif re.search(r"\busername\b", ins, re.I) and re.search(r"\bpassword\b", ins, re.I) and len(q) == 2:
        user, pw = q  # the words were reported apart from the text: the quoted values come in that order
    else:
        return None
    u = field_for(els, "user", "login", "email")
    p = next((f for f in fields_of(els) if e_type(f) == "password"), None) or field_for(els, "password")
    popup = _interrupting_popup(els, ins)
    if popup is not None:
        return Plan(f'Dismiss the popup with "{visible_text(popup)}"', [w.click(popup)])
    if u is None or p is None:
        raise Unclear("a login form was asked for, but no username and password fields are on the page")
    calls = []
    if not holds(u, user):
        calls += w.fill(u, user)
    if not holds(p, pw):
        calls += w.fill(p, pw)
    button = submit_button(els, _named_button(ins))
    if calls:  # fill first; submit on the next step, once the page shows both values (a popup may intervene)
        return Plan(f'Enter the username "{user}" and the password', calls)
    if button is None:
        raise Unclear("the login fields are filled but no button submits them")
    return Plan(f'Press "{visible_text(button)}" to log in', [w.click(button), w.done()])


def _named_button(ins: str) -> str:
    m = re.search(r'(?:press|click|hit)\s+(?:on\s+)?(?:the\s+)?"?([A-Za-z][\w ]{0,20}?)"?(?:\s+button)?\s*[.,]?$',
                  ins.strip(), re.I)
    return m.group(1) if m else ""


def _interrupting_popup(els: list[dict], ins: str) -> dict | None:
    """A Cancel button that the instruction never mentions, shown while the form's fields are disabled."""
    if "cancel" in ins.lower():
        return None
    fields = [e for e in els if is_field(e)]
    if fields and all(e.get("disabled") for e in fields):
        found = [b for b in match_text(els, "Cancel") if kind_is(b, "button")]
        return found[0] if found else None
    return None


def rule_passwords(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r'password\s*"([^"]*)"\s*into (?:both|all|each)', ins, re.I)
    if not m:
        return None
    pw = m.group(1)
    fields = [f for f in fields_of(els) if e_type(f) == "password"] or fields_of(els)
    button = submit_button(els, _named_button(ins))
    if not fields or button is None:
        raise Unclear("password fields or their submit button are missing")
    calls = [c for f in fields for c in w.fill(f, pw)]
    return Plan(f'Enter the password "{pw}" into {len(fields)} fields and submit', calls + [w.click(button), w.done()])


def rule_autocomplete(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r'starts with\s*"([^"]+)"(?:\s*and ends with\s*"([^"]+)")?', ins, re.I)
    if not m:
        return None
    start, end = m.group(1), m.group(2) or ""
    fields = fields_of(els)
    if not fields:
        raise Unclear("an item should be entered but there is no text field")
    f = fields[0]
    value = str(f.get("value") or "")
    button = submit_button(els)
    ok = value.lower().startswith(start.lower()) and value.lower().endswith(end.lower())
    if value and ok and len(value) > len(start):
        if button is None:
            raise Unclear("the item is entered but no button submits it")
        return Plan(f'Submit "{value}"', [w.click(button), w.done()])
    suggestions = [e for e in els if e is not f and not is_field(e) and e["text"].strip()
                   and e["text"].strip().lower().startswith(start.lower())
                   and e["text"].strip().lower().endswith(end.lower()) and e["box"][1] >= f["box"][3] - 2]
    if suggestions and value:
        return Plan(f'Pick the suggestion "{suggestions[0]["text"]}"', [w.click(suggestions[0])])
    if value.lower() == start.lower():
        if not end and button is not None:
            return Plan(f'Submit "{value}"', [w.click(button), w.done()])
        raise Unclear(f'no suggestion starting with "{start}" and ending with "{end}" is shown')
    # the suggestions open after the widget's delay: wait a moment so the next observation shows them
    return Plan(f'Type "{start}" to see the suggestions', w.fill(f, start) + [SETTLE])


def rule_copy(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    if not re.search(r"\bcopy\b.*\bpaste\b", ins, re.I):
        return None
    areas = [e for e in els if e["tag"] == "textarea"]
    target = next((f for f in fields_of(els) if f["tag"] != "textarea"), None)
    button = submit_button(els)
    if len(areas) != 1 or target is None or button is None:
        raise Unclear("expected one textarea to copy from, a field to paste into and a submit button")
    text = str(areas[0].get("value") or areas[0]["text"])
    return Plan("Paste the textarea's text into the field and submit",
                w.fill(target, text) + [w.click(button), w.done()])


def _nth_word(ins: str, els: list[dict]) -> str | None:
    if not re.search(r"\bfind the\b.*\bin the (?:paragraph|text)", ins, re.I):
        return None
    m = re.search(r"\b(\w+) word\b", ins, re.I)
    if not m:
        return None
    n = ordinal(m.group(1))
    if n is None:
        raise Unclear(f"cannot count to the {m.group(1)!r} word")
    paragraphs = [e for e in els if e["tag"] in ("p", "div", "span") and len(e["text"].split()) > 3
                  and e["text"].strip() not in ins]
    if not paragraphs:
        raise Unclear("no paragraph to count words in")
    words = [re.sub(r"^[^\w]+|[^\w]+$", "", x) for x in paragraphs[0]["text"].split()]
    words = [x for x in words if x]
    if not words or abs(n) > len(words):
        raise Unclear(f"the paragraph has no {m.group(1)} word")
    return words[n - 1] if n > 0 else words[-1]


def _table_value(ins: str, els: list[dict]) -> str | None:
    m = re.search(r"value of ([\w ]+?) into", ins, re.I)
    if not m:
        m = re.search(r"value of into .*?([\w ]+)$", ins, re.I)  # the key was reported apart: it is appended
        if not m:
            return None
    key = norm(m.group(1))
    cells = [e for e in els if e["tag"] in ("td", "th", "span", "div") and e["text"].strip()]
    for c in cells:
        if norm(c["text"]) != key:
            continue
        cy = centre(c)[1]
        row = [d for d in cells if d is not c and abs(centre(d)[1] - cy) < max(4.0, (c["box"][3] - c["box"][1]) / 2)
               and d["box"][0] >= c["box"][2] - 1]
        if row:
            return min(row, key=lambda d: d["box"][0])["text"].strip()
    raise Unclear(f'no table row labelled "{m.group(1)}"')


def _date_time(ins: str) -> str | None:
    m = re.search(r"(\d{1,2})/(\d{1,2})/(\d{4})", ins) if re.search(r"as the date", ins, re.I) else None
    if m:
        return f"{int(m.group(1)):02d}{int(m.group(2)):02d}{m.group(3)}"
    m = re.search(r"enter\s+(\d{1,2}):(\d{2})\s*([AP]M)? as the time", ins, re.I)
    if m:
        return f"{int(m.group(1)):02d}{m.group(2)}{(m.group(3) or '')[:1].upper()}"
    return None


def rule_enter(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    """Type a text into the field and submit: quoted, transformed (upper/lower case), derived, a date or time."""
    text = _date_time(ins)
    if text is None:
        text = _nth_word(ins, els)
    if text is None:
        text = _table_value(ins, els)
    if text is None:
        m = re.search(r'(?:enter|type|input|write)\s+"([^"]*)"', ins, re.I)
        if not m:
            return None
        text = m.group(1)
        if re.search(r"lower ?case", ins, re.I):
            text = text.lower()
        elif re.search(r"upper ?case|capital letters", ins, re.I):
            text = text.upper()
    fields = fields_of(els)
    fields = [f for f in fields if f["tag"] != "textarea"] or fields
    if not fields:
        raise Unclear("a text should be entered but the page has no text field")
    empty = [f for f in fields if not f.get("value")]
    f = (empty or fields)[0]
    button = submit_button(els, _named_button(ins))
    calls = w.fill(f, text)
    if button is None:  # nothing to press: enter submits a lone field
        return Plan(f'Type "{text}" and press enter', calls + [w.press("enter"), w.done()])
    return Plan(f'Type "{text}" and press "{visible_text(button)}"', calls + [w.click(button), w.done()])


def rule_select_list(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r"(?:select|choose)\s+(.+?)\s+from the (?:scroll )?(?:list|dropdown|drop-down|menu)", ins, re.I)
    if not m:
        return None
    wanted = [x.strip().strip('"') for x in re.split(r",\s*|\s+and\s+", m.group(1)) if x.strip()]
    selects = [e for e in els if e["tag"] == "select" and enabled(e)]
    sel = next((s for s in selects if all(any(norm(o) == norm(x) for o in s.get("options") or []) for x in wanted)),
               None)
    if sel is None:
        raise Unclear(f"no list on the page offers {', '.join(wanted)}")
    button = submit_button(els, _named_button(ins))
    options = [norm(o) for o in sel["options"]]
    if len(wanted) > 1:
        # A multiple-choice list box: type the first (typing selects it alone), then walk to each other one
        # with ctrl+arrow (moves the focus, keeps the selection) and add it with ctrl+space.
        calls, at = [w.click(sel), w.write(wanted[0])], options.index(norm(wanted[0]))
        for x in wanted[1:]:
            to = options.index(norm(x))
            key = "down" if to > at else "up"
            calls += [f"hotkey('ctrl', '{key}')"] * abs(to - at) + ["hotkey('ctrl', 'space')"]
            at = to
        if button is None:
            raise Unclear("the items can be selected but no button submits them")
        return Plan(f"Select {', '.join(wanted)} in the list and submit", calls + [w.click(button), w.done()])
    want = wanted[0]
    if norm(str(sel.get("selected", ""))) != norm(want):
        # Typing on a focused select picks the option that starts with the text; enter closes its popup.
        return Plan(f'Choose "{want}" in the list', [w.click(sel), w.write(want), w.press("enter")])
    if button is None:
        return Plan(f'"{want}" is chosen', [w.done()])
    return Plan(f'"{want}" is chosen: press "{visible_text(button)}"', [w.click(button), w.done()])


def rule_checkboxes(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r"^select (.+?) and (?:click|press|hit) submit", ins.strip(), re.I)
    if not m:
        return None
    boxes = [e for e in els if e["tag"] == "input" and e_type(e) in ("checkbox", "radio") and enabled(e)]
    if not boxes:
        return None
    wanted_text = m.group(1).strip()
    wanted = (set() if norm(wanted_text) == "nothing"
              else {norm(x) for x in re.split(r",\s*|\s+and\s+", wanted_text) if x.strip()})
    labelled = [(b, norm(_label_text(b, els))) for b in boxes]
    known = {lab for _, lab in labelled}
    unknown = wanted - known
    if unknown:
        raise Unclear(f"no checkbox or radio labelled {', '.join(sorted(unknown))}")
    calls = [w.click(b) for b, lab in labelled if bool(b.get("checked")) != (lab in wanted)
             and not (e_type(b) == "radio" and lab not in wanted)]
    button = submit_button(els)
    if button is None:
        raise Unclear("the boxes are set but no Submit button is on the page")
    return Plan(f"Select {wanted_text} and press Submit", calls + [w.click(button), w.done()])


def _label_text(b: dict, els: list[dict]) -> str:
    if b.get("label"):
        return str(b["label"])
    # the nearest text to the right on the same line
    cy = centre(b)[1]
    right = [e for e in els if e is not b and e["text"].strip() and abs(centre(e)[1] - cy) < 8
             and e["box"][0] >= b["box"][2] - 2]
    return min(right, key=lambda e: e["box"][0])["text"] if right else ""


def rule_focus(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r"focus (?:into|on) the (?:(\w+) )?(?:input )?text ?(?:box|field|input)", ins, re.I)
    if not m:
        return None
    fields = fields_of(els)
    n = ordinal(m.group(1) or "first")
    if n is None:
        raise Unclear(f"which text box is the {m.group(1)!r} one?")
    if not fields or abs(n) > len(fields):
        raise Unclear("the text box to focus is not on the page")
    f = fields[n - 1] if n > 0 else fields[-1]
    return Plan(f"Focus the {m.group(1) or 'text'} box", [w.click(f), w.done()])


WIDGET_KINDS = {"button": lambda e: e["tag"] == "button", "textarea": lambda e: e["tag"] == "textarea",
                "checkbox": lambda e: e["tag"] == "input" and e_type(e) == "checkbox",
                "radio": lambda e: e["tag"] == "input" and e_type(e) == "radio",
                "text": lambda e: (e["tag"] == "input" and e_type(e) in TEXT_INPUTS
                                   and e_type(e) not in ("date", "time"))}


def rule_widget(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    m = re.search(r'click on an? "(\w+)" widget', ins, re.I)
    if not m:
        return None
    kind = m.group(1).lower()
    if kind not in WIDGET_KINDS:
        raise Unclear(f"unknown widget kind {kind!r}")
    found = [e for e in els if WIDGET_KINDS[kind](e)]
    if not found:
        raise Unclear(f"no {kind} widget on the page")
    return Plan(f"Click a {kind} widget", [w.click(found[0]), w.done()])


def click_targets(ins: str) -> tuple[list[str], str]:
    """What to click, in order, and the kind named (button, link, tab): quoted strings, else named words."""
    kind = next((k for k in ("button", "link", "tab") if re.search(rf"\b{k}\b", ins, re.I)), "")
    q = quoted(ins)
    if q:
        return q, kind
    names = re.findall(r"click(?: on)?(?: the)? (?:(?:button|link|tab) )?([A-Za-z0-9#]+(?: #\d+)?)", ins, re.I)
    names = [n for n in names if n.lower() not in ("the", "a", "an", "on", "button", "link", "tab")]
    m = re.search(r"click on (tab #\d+)", ins, re.I)
    if m:
        names = [m.group(1)]
    return names, kind


def rule_click(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    if not re.search(r"\bclick|\bpress\b|\bselect\b", ins, re.I):
        return None
    targets, kind = click_targets(ins)
    if not targets:
        # "Click the button." with one button on the page
        if kind == "button":
            buttons = [e for e in els if kind_is(e, "button") and enabled(e)]
            if len(buttons) == 1:
                return Plan(f'Click the button "{visible_text(buttons[0])}"', [w.click(buttons[0]), w.done()])
        return None
    seen = opened(page.history)
    if re.match(r"expand\b", ins.strip(), re.I) and not seen:
        header = _unopened_header(els, seen)
        if header is not None:
            return Plan(f'Open the section "{visible_text(header).strip()}" to look for "{targets[0]}"',
                        [w.click(header), SETTLE])
    calls, names = [], []
    for t in targets:
        found = match_text(els, t, kind)
        if not found:
            break
        calls.append(w.click(found[0]))
        names.append(t)
    if len(calls) == len(targets):
        return Plan("Click " + ", then ".join(f'"{n}"' for n in names), calls + [w.done()])
    missing = targets[len(calls)]
    # Not on the page yet: open a tab or a collapsed section that no earlier step opened, one per step.
    header = _unopened_header(els, seen)
    if header is not None:
        what = "tab" if header["tag"] in ("li", "a") else "section"
        return Plan(f'Open the {what} "{visible_text(header).strip()}" to look for "{missing}"',
                    [w.click(header), SETTLE])
    raise Unclear(f'"{missing}" is not on the page and there is no unopened tab or section to look in')


def rule_spinner(ins: str, els: list[dict], w: Writer, page: Page) -> Plan | None:
    """Set a number with a spinner's up and down buttons (its field may refuse typed keys)."""
    m = re.search(r"(?:select|set|choose)\s+(-?\d+)\s+with the spinner", ins, re.I)
    if not m:
        return None
    want = int(m.group(1))
    spin = next((e for e in els if e.get("role") == "spinbutton" or e_type(e) == "number"), None)
    if spin is None:
        raise Unclear("a spinner was asked for, but there is none on the page")
    try:
        value = int(float(str(spin.get("value") or "0")))
    except ValueError:
        raise Unclear(f"the spinner holds {spin.get('value')!r}, not a number") from None
    button = submit_button(els, _named_button(ins))
    if value == want:
        if button is None:
            raise Unclear("the spinner is set but no button submits it")
        return Plan(f'The spinner shows {want}: press "{visible_text(button)}"', [w.click(button), w.done()])
    x1, y1, x2, y2 = spin["box"]
    arrows = sorted((e for e in els if e is not spin and is_clickable(e) and not visible_text(e).strip()
                     and e["box"][0] >= x1 + (x2 - x1) / 2 and e["box"][1] <= y2 + 4 and e["box"][3] >= y1 - 4),
                    key=lambda e: e["box"][1])
    if len(arrows) < 2:
        raise Unclear("the spinner's up and down buttons are not on the page")
    arrow = arrows[0] if want > value else arrows[-1]
    n = min(abs(want - value), 50)
    return Plan(f"Click the spinner's {'up' if want > value else 'down'} button {n} times",
                [w.click(arrow)] * n)


def _unopened_header(els: list[dict], seen: set[str]) -> dict | None:
    """The first tab or section header (role tab, or a heading "Section …") that no earlier step opened."""
    for e in els:
        text = visible_text(e).strip()
        if not text or text in seen or len(text) > 40 or is_field(e) or e["tag"] == "button":
            continue
        if e.get("role") == "tab" or (e["tag"] in ("h1", "h2", "h3", "h4", "h5", "h6")
                                      and re.match(r"section\b", text, re.I)):
            return e
    return None


RULES = (rule_login, rule_passwords, rule_autocomplete, rule_copy, rule_select_list, rule_checkboxes, rule_spinner,
         rule_enter, rule_focus, rule_widget, rule_click)


def decide(page: Page, convention: str = "absolute") -> Plan:
    """The next step for this page: the first rule that understands the instruction, else a failure."""
    w = Writer(convention)
    ins = page.instruction
    if not ins:
        return Plan("Give up: there is no instruction to follow",
                    ['terminate(status="failure", info="no instruction")'])
    if not page.elements:
        return Plan("Give up: the page shows no elements",
                    ['terminate(status="failure", info="no elements on the page")'])
    try:
        for rule in RULES:
            plan = rule(ins, page.content, w, page)
            if plan is not None:
                return plan
        why = f"no rule understands the instruction {ins[:120]!r}"
    except Unclear as err:
        why = str(err)
    except Exception as err:  # noqa: BLE001 — a page the rules trip over ends the episode, named, not the run
        why = f"the rules failed on this page ({type(err).__name__}: {err})"
    return Plan(f"Give up: {why}", [f"terminate(status=\"failure\", info={json.dumps(why[:300], ensure_ascii=False)})"])


def render(plan: Plan) -> str:
    op = plan.operation.replace("<", "(").replace(">", ")")
    return f"<operation>{op}</operation>\n<action>\n" + "\n".join(plan.calls) + "\n</action>"


class DOMPolicy:
    """Policy kind `dom`: rule-based actions on a web page's elements (computer_use agent, browser sandbox)."""

    name = "dom"
    observes = ("screenshot", "dom")

    def __init__(self, spec: Any = None):
        self.spec = spec

    def respond(self, messages: list, tools: list[dict], **generation: Any) -> Response:
        started = time.perf_counter()
        fmt = generation.get("format")
        if fmt is None or not callable(getattr(fmt, "parse", None)) or not hasattr(fmt, "convention"):
            from ..policies.formats.scalecua import ScaleCUAFormat

            fmt = ScaleCUAFormat()
        obs = generation.get("observation")
        if isinstance(obs, ScreenObservation):
            page = page_of(obs)
        else:
            user = next((m for m in reversed(messages) if getattr(m, "role", "") == "user"), None)
            page = read_message(getattr(user, "content", "") or "")
        raw = render(decide(page, fmt.convention))
        # the agent sends one fresh prompt per step, its history as "Step i" lines: they number this step
        parsed = fmt.parse(raw, id_prefix=f"dom{len(page.history) + 1}")
        prompt_words = sum(word_count(getattr(m, "content", "") or "") for m in messages)
        return Response(text=parsed.content, tool_calls=parsed.calls, issues=parsed.issues, raw=raw,
                        tokens_in=prompt_words, tokens_out=word_count(raw), latency_s=time.perf_counter() - started)
