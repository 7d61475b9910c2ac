"""Reading a task spec's file as untrusted input: bounded in size, nesting and values, duplicated keys kept
visible, and the data's shape checked before any field is read. A file that cannot be read this way raises
`Unreadable` naming the top-level field (or "" for the file) and what is wrong; toolpath.spec turns it into a
SpecError. Nothing here imports the rest of toolpath.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

# A hand-written spec is under 1 kB (the largest example is 940 bytes) and 3 to 5 levels deep. Each limit
# leaves ample room for that while a hostile file costs at most a second or two before it is refused.


# PyYAML's pure-Python parser (the one whose nesting can be bounded while it reads) takes about 1 s for 64 kB.
MAX_SPEC_BYTES = 64 * 1024
# Levels of mappings and lists. Far below Python's recursion limit (1,000), which pydantic, json and the
# viewer all spend when they walk a spec, so none of them can fail on one that passed.
MAX_NESTING = 32
# Values once YAML aliases are expanded. A file of MAX_SPEC_BYTES spells out at most about 32,000, so only
# aliases that repeat an anchor over and over reach this (1.5 kB of them expands to 10^9 values).
MAX_SPEC_VALUES = 100_000
# Any string: about 8,000 tokens, more than a task's instruction needs (long texts belong in inputs.files).
MAX_STRING_CHARS = 32_768


class Unreadable(Exception):
    """The file cannot be read as a spec: `field` is the top-level field where it went wrong ("" for the file)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field or '<top level>'}: {message}")
        self.field, self.message = field, message


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or str(part).startswith(("function-", "json-or-python")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


# ---- the shape of the data: nesting, size, strings, duplicated keys -------------------------------------

class _Mapping(dict):
    """A mapping as read from a file, with what the file wrote that the mapping cannot show: keys written more
    than once (JSON and YAML keep the last) and YAML merge keys (`<<`), which are not applied."""

    duplicates: tuple = ()
    merges: bool = False


def shown_path(path: tuple) -> str:
    """A field path for a message; a deep one is cut after six parts."""
    return field_path(path[:6]) + ("…" if len(path) > 6 else "")


def shape_problems(data: Any) -> list[tuple[str, str]]:
    """What is wrong with the data's shape, before any field is read: nesting deeper than MAX_NESTING, a
    value that contains itself, more than MAX_SPEC_VALUES values (YAML aliases expanded), strings over
    MAX_STRING_CHARS, keys written twice, values with no JSON form. Walks at most MAX_SPEC_VALUES values."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[tuple, Any, tuple]] = [((), data, ())]  # (path, value, ids of the containers above it)
    seen = 0
    while stack:
        path, value, above = stack.pop()
        seen += 1
        if seen > MAX_SPEC_VALUES:
            return problems + [(shown_path(path[:1]), f"expands to more than {MAX_SPEC_VALUES:,} values (YAML "
                                                       "aliases repeating an anchor?)")]
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                problems.append((shown_path(path), f"a string of {len(value):,} characters; at most "
                                                    f"{MAX_STRING_CHARS:,} (put long texts in inputs.files)"))
            continue
        if isinstance(value, (bytes, bytearray, set, frozenset)):
            problems.append((shown_path(path), f"a {type(value).__name__} has no JSON form; expected text, a number, "
                                                "true/false, null, a list or a mapping"))
            continue
        if not isinstance(value, (dict, list, tuple)):
            continue
        if id(value) in above:
            return problems + [(shown_path(path), "contains itself (a YAML alias inside its own anchor)")]
        if len(above) >= MAX_NESTING:
            return problems + [(shown_path(path), f"nested deeper than {MAX_NESTING} levels")]
        above = above + (id(value),)
        if isinstance(value, dict):
            problems += [(shown_path((*path, key)), "written more than once (only the last would count)")
                         for key in getattr(value, "duplicates", ())]
            if getattr(value, "merges", False):
                problems.append((shown_path(path), "YAML merge keys (<<) are not supported in a task spec: their "
                                                    "copies can grow exponentially; write the fields out"))
            items = list(value.items())
        else:
            items = list(enumerate(value))
        stack.extend(((*path, key), item, above) for key, item in reversed(items))
    return problems


# ---- reading a file ------------------------------------------------------------------------------------

def read_text(path: Path) -> str:
    """The file's text: a regular file of at most MAX_SPEC_BYTES bytes of UTF-8. Opened without blocking and
    checked before reading, so a FIFO or a device (/dev/zero) is refused instead of hanging or filling memory."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Unreadable("", "file not found") from None
    except (OSError, ValueError) as err:
        raise Unreadable("", f"cannot read file: {getattr(err, 'strerror', None) or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("", "not a regular file (a folder, FIFO or device); a spec is read from a file")
        raw = b""
        while len(raw) <= MAX_SPEC_BYTES and (chunk := os.read(fd, MAX_SPEC_BYTES + 1 - len(raw))):
            raw += chunk
    finally:
        os.close(fd)
    if len(raw) > MAX_SPEC_BYTES:
        raise Unreadable("", f"the file is {size_text(max(info.st_size, len(raw)))}; a spec may be at most "
                             f"{size_text(MAX_SPEC_BYTES)}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Unreadable("", f"cannot read file: not UTF-8 text (byte {err.start})") from None


class _TooDeep(Exception):
    def __init__(self, field: str, where: str = ""):
        super().__init__(field)
        self.field, self.where = field, where


def _number_or_text(digits: str) -> int | str:
    """An integer literal, or its text when it is longer than Python converts (sys.get_int_max_str_digits):
    the field it is in then says it expected a number, instead of the parser failing with no field named."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    return int(digits) if len(digits.lstrip("+-")) <= limit else digits


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: it stops at MAX_NESTING levels (naming the top-level field) before its
    recursion can overflow, marks keys written twice, and does not apply merge keys (`<<`), whose copies can
    grow exponentially before any value exists to count; shape_problems reports both."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._field = ""

    def compose_node(self, parent, index):
        if self._depth == 1 and isinstance(index, yaml.ScalarNode):
            self._field = index.value  # the top-level field being read
        if self._depth >= MAX_NESTING and not self.check_event(yaml.AliasEvent, yaml.ScalarEvent):
            mark = self.peek_event().start_mark
            raise _TooDeep(self._field, f" (line {mark.line + 1})")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_bounded_map(self, node):
        own = [(k, v) for k, v in node.value if k.tag != "tag:yaml.org,2002:merge"]
        keys = [k.value for k, _ in own if isinstance(k, yaml.ScalarNode)]
        data = _Mapping()
        yield data
        data.update(yaml.constructor.BaseConstructor.construct_mapping(
            self, yaml.MappingNode(node.tag, own, node.start_mark, node.end_mark)))
        data.duplicates = tuple(sorted({k for k in keys if keys.count(k) > 1}, key=keys.index))
        data.merges = len(own) < len(node.value)

    def construct_bounded_int(self, node):
        text = self.construct_scalar(node).replace("_", "")
        if re.fullmatch(r"[-+]?[0-9]+", text):
            return _number_or_text(text)
        return self.construct_yaml_int(node)  # 0x…, 0o…, 0b…, 1:30 (sexagesimal)

    def construct_date_or_text(self, node):
        try:
            return self.construct_yaml_timestamp(node)
        except ValueError:  # 2024-02-30 looks like a date and is none: keep what was written
            return self.construct_scalar(node)


_SpecLoader.add_constructor("tag:yaml.org,2002:map", _SpecLoader.construct_bounded_map)
_SpecLoader.add_constructor("tag:yaml.org,2002:int", _SpecLoader.construct_bounded_int)
_SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", _SpecLoader.construct_date_or_text)


def _json_mapping(pairs: list[tuple[str, Any]]) -> _Mapping:
    data = _Mapping(pairs)
    if len(data) < len(pairs):
        keys = [k for k, _ in pairs]
        data.duplicates = tuple(sorted({k for k in keys if keys.count(k) > 1}, key=keys.index))
    return data


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _deep_json_field(text: str) -> str:
    """The top-level field under which JSON nests deeper than MAX_NESTING levels ("" if the top level itself).
    Only called on text json.loads found too deep, which is well formed up to there."""
    depth, last, field = 0, "", ""
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return field
        elif token in "]}":
            depth -= 1
        elif token == ":":
            field = json.loads(last) if depth == 1 else field
        else:
            last = token
    return field


def parse_text(text: str, is_json: bool) -> Any:
    """The data of a spec's text, read by the bounded loaders."""
    try:
        if is_json:
            return json.loads(text, object_pairs_hook=_json_mapping, parse_int=_number_or_text)
        return yaml.load(text, Loader=_SpecLoader)
    except json.JSONDecodeError as err:
        raise Unreadable("", f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1} column {where.column + 1}" if where else ""
        raise Unreadable("", f"not valid YAML{at}: {getattr(err, 'problem', err)}") from None
    except _TooDeep as err:
        raise Unreadable(err.field, f"nested deeper than {MAX_NESTING} levels{err.where}") from None
    except RecursionError:  # JSON deeper than the parser's recursion: say under which field
        raise Unreadable(_deep_json_field(text), f"nested deeper than {MAX_NESTING} levels") from None
    except ValueError as err:  # a value the parser recognised and could not convert
        raise Unreadable("", f"not valid {'JSON' if is_json else 'YAML'}: {err}") from None
