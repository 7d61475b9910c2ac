"""A boxed answer and whether two answers are equal.

    boxed(text)             the content of the last \\boxed{...} (or \\fbox{...}) in `text`, nested braces
                            included, or None
    equal(answer, gold)     whether they are the same mathematical value: math-verify (the `math` extra) where it
                            is installed, else this module's own reading of numbers and simple LaTeX with sympy

Answers come from model output, so neither way evaluates text as code: math-verify parses LaTeX with its ANTLR
grammar, and the fallback below has its own small grammar (numbers, + - * / ^, parentheses, \\frac, \\sqrt, pi).
An answer longer than MAX_ANSWER, or with a huge power, factorial or number, is compared as text only: working
it out would stall sympy.
"""

from __future__ import annotations

import re
import threading

MAX_ANSWER = 300
# What would take sympy seconds or memory to work out: a power or factorial of a number of four digits or more,
# a number of forty digits. Such an answer is compared as text only.
_HUGE = re.compile(r"\^\s*\{?\s*[-+]?\s*\d{4,}|\d{4,}\s*!|\d{40,}")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*")


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """The text inside the brace group opening at `start` and the index after it, or None if it never closes."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{" and text[i - 1:i] != "\\":
            depth += 1
        elif text[i] == "}" and text[i - 1:i] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def boxed(text: str | None) -> str | None:
    """The last boxed answer in `text`: `\\boxed{\\frac{1}{2}}` gives `\\frac{1}{2}`; `\\boxed 5` gives `5`."""
    if not text:
        return None
    found = None
    for m in _BOX.finditer(text):
        at = m.end()
        if text[at:at + 1] == "{":
            inside = _braced(text, at)
            if inside is not None:
                found = inside[0].strip()
        else:  # \boxed 5: one token
            token = re.match(r"[^\s$}]+", text[at:])
            if token:
                found = token.group(0)
    return found


def has_boxed(text: str) -> bool:
    return boxed(text) is not None


def _plain(text: str) -> str:
    """The answer without what never changes its value: dollars, \\left/\\right, spacing, a trailing period,
    thousands separators, \\text{} wrappers."""
    s = str(text).strip().strip("$").strip()
    s = re.sub(r"\\(left|right|displaystyle|!|,|;|:|quad)", "", s)
    s = re.sub(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return re.sub(r"\s+", "", s).rstrip(".")


def equal(answer: str | None, gold: str | float | int | None) -> bool:
    """Whether `answer` states the value `gold` does (`3/7`, `\\frac{3}{7}` and `0.428571...` to six places)."""
    if answer is None or gold is None:
        return False
    a, g = _plain(answer), _plain(str(gold))
    if not a or not g:
        return False
    if a == g:
        return True
    if len(a) > MAX_ANSWER or len(g) > MAX_ANSWER or _HUGE.search(a) or _HUGE.search(g):
        return False
    verified = _math_verify(a, g)
    if verified is not None:
        return verified
    return _sympy_equal(a, g)


def _math_verify(a: str, g: str) -> bool | None:
    """math-verify's verdict, or None when it is not installed. Its LaTeX reading only (its other reader hands text
    to sympy's parser, which evaluates Python); its time limits use signals, which only the main thread has."""
    try:
        from math_verify import LatexExtractionConfig, parse, verify
    except ImportError:
        return None
    main = threading.current_thread() is threading.main_thread()
    limit = 5 if main else None
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    try:
        gold = parse(f"${g}$", extraction_config=config, parsing_timeout=limit)
        pred = parse(f"${a}$", extraction_config=config, parsing_timeout=limit)
        if not gold or not pred:
            return None  # neither reading found a value: let the fallback try
        return bool(verify(gold, pred, timeout_seconds=limit))
    except Exception:  # noqa: BLE001 - a parser's failure on hostile text means "not shown equal"
        return False


# ---- the fallback: a small grammar over numbers, never eval -------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<cmd>\\[a-zA-Z]+)|(?P<op>[-+*/^(){}]))")


def _tokens(text: str) -> list[str] | None:
    s = text.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/").replace("\\pi", " pi ")
    s = s.replace("pi", "\\pi").replace("%", "")
    out, at = [], 0
    while at < len(s):
        m = _TOKEN.match(s, at)
        if not m or m.end() == at:
            return None
        out.append(m.group(m.lastgroup))
        at = m.end()
    return out


class _Parser:
    """expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary | juxtaposed unary)*; unary := '-' unary |
    power; power := atom ('^' unary)?; atom := number | pi | '(' expr ')' | '{' expr '}' | \\frac{}{} | \\sqrt{}."""

    def __init__(self, tokens: list[str]):
        import sympy

        self.t, self.i, self.sp = tokens, 0, sympy

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ValueError(f"expected {want or 'more'}, got {tok}")
        self.i += 1
        return tok

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.unary()
        while self.peek() is not None and self.peek() not in ("+", "-", ")", "}"):
            if self.peek() == "*":
                self.take()
                value = value * self.unary()
            elif self.peek() == "/":
                self.take()
                value = value / self.unary()
            else:
                value = value * self.unary()  # 2\pi, 3\sqrt{2}
        return value

    def unary(self):
        if self.peek() == "-":
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.unary()
            if abs(float(exponent)) > 1000:
                raise ValueError("exponent too large")
            return base ** exponent
        return base

    def group(self):
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    def atom(self):
        tok = self.take()
        if tok[0].isdigit() or tok[0] == ".":
            return self.sp.Rational(tok)
        if tok == "\\pi":
            return self.sp.pi
        if tok == "\\frac":
            return self.group() / self.group()
        if tok == "\\sqrt":
            return self.sp.sqrt(self.group())
        if tok in ("(", "{"):
            value = self.expr()
            self.take(")" if tok == "(" else "}")
            return value
        raise ValueError(f"unexpected {tok}")


def _value(text: str):
    tokens = _tokens(text)
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        value = parser.expr()
    except (ValueError, ZeroDivisionError, TypeError, OverflowError):
        return None
    return value if parser.peek() is None else None


def _sympy_equal(a: str, g: str) -> bool:
    va, vg = _value(a), _value(g)
    if va is None or vg is None:
        return False
    try:
        if va == vg or (va - vg).simplify() == 0:
            return True
        fa, fg = float(va), float(vg)
    except (TypeError, ValueError, OverflowError):
        return False
    return abs(fa - fg) <= 1e-6 * max(1.0, abs(fg))
