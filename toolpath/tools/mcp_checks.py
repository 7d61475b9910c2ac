"""What toolpath accepts from an MCP server it does not trust: tool names, input schemas, result sizes.

A tool name goes into prompts, tool-call grammars and step records, so it must be a plain name (MCP's rule:
letters, digits, `_`, `-`, `.`; here at most 64 characters, as function-calling APIs take). A schema goes to the
model and to jsonschema, so it must be small, shallow, self-contained (no `$ref` outside itself: nothing is
fetched) and free of `$ref` loops that validate nothing (`{"$ref": "#"}`, or A -> allOf B -> A), which send a
validator into endless recursion. A recursive schema that descends into the arguments (a tree's `children`)
is fine: each step reads a smaller part of the arguments. A result is cut to MAX_RESULT_CHARS of text, and
larger images are named instead of kept, so a server cannot fill the run store.
"""

from __future__ import annotations

import json
import re
from typing import Any

TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_RESULT_CHARS = 1_000_000
MAX_BLOB_BYTES = 16 * 1024 * 1024  # one image or audio block kept as an artifact
# Keywords whose subschemas apply to the same value: a $ref loop through only these never ends.
SAME_VALUE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref")


def name_problem(name: Any) -> str | None:
    if isinstance(name, str) and TOOL_NAME.fullmatch(name):
        return None
    return (f"offers a tool named {str(name)[:80]!r}, which is not a tool name (1 to 64 letters, digits, "
            f"'_', '-' or '.')")


def _depth(value: Any, limit: int) -> int:
    """How deep `value` nests, counting no further than `limit` + 1 (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _pointer(schema: dict, ref: str) -> Any:
    """The part of `schema` a local `#/a/b` reference names; KeyError when it names nothing."""
    node: Any = schema
    for part in ref[2:].split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _same_value_children(node: dict) -> list[tuple[str, Any]]:
    out = []
    for key in SAME_VALUE:
        sub = node.get(key)
        if key == "$ref":
            continue
        for item in sub if isinstance(sub, list) else [sub] if isinstance(sub, dict) else []:
            out.append((key, item))
    return out


def _ref_loop(schema: dict) -> str | None:
    """A chain of `$ref`s (and allOf/anyOf/oneOf/not/if/then/else) that comes back to where it started without
    reading any deeper into the value; the refs on it, or None. A depth-first search over those edges, each
    subschema explored once (the schema is bounded in size, so this is too)."""
    done: set[int] = set()

    def visit(node: Any, path: tuple[str, ...], on_path: dict[int, int]) -> str | None:
        if not isinstance(node, dict) or id(node) in done:
            return None
        if id(node) in on_path:
            return " -> ".join(path[on_path[id(node)]:]) or "#"
        on_path[id(node)] = len(path)
        ref = node.get("$ref")
        edges = ([(ref, _pointer(schema, ref))] if isinstance(ref, str) else []) + _same_value_children(node)
        for label, sub in edges:
            found = visit(sub, path + (label,), on_path)
            if found:
                return found
        del on_path[id(node)]
        done.add(id(node))
        return None

    stack: list[Any] = [schema]  # a loop may start at any subschema: try each
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found = visit(node, (), {})
            if found:
                return found
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return None


def _refs(schema: Any) -> list[str]:
    out, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                out.append(node["$ref"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def schema_problem(schema: Any) -> str | None:
    """Why toolpath will not use this input schema; None when it will."""
    if not isinstance(schema, dict):
        return f"has an input schema that is a {type(schema).__name__}, not a JSON object"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        return "has an input schema that is not plain JSON"
    if size > MAX_SCHEMA_BYTES:
        return f"has an input schema of {size} bytes (at most {MAX_SCHEMA_BYTES})"
    if _depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return f"has an input schema nested deeper than {MAX_SCHEMA_DEPTH} levels"
    for ref in _refs(schema):
        if not (ref == "#" or ref.startswith("#/")):
            return f"has an input schema that refers outside itself ($ref {ref[:80]!r}); nothing is fetched"
        try:
            _pointer(schema, ref)
        except (KeyError, IndexError, ValueError, TypeError):
            return f"has an input schema whose $ref {ref[:80]!r} names nothing in it"
    loop = _ref_loop(schema)
    if loop:
        return f"has an input schema whose $ref refers back to itself without end ({loop[:120]})"
    return None


def cut_text(text: str, what: str) -> str:
    """`text`, or its first MAX_RESULT_CHARS characters and a note saying how much was left out."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return (text[:MAX_RESULT_CHARS] + f"\n[{what}: {len(text) - MAX_RESULT_CHARS} more characters not kept; "
                                      f"a result keeps at most {MAX_RESULT_CHARS}]")


def blob_too_large(data: str) -> int | None:
    """The decoded size of a base64 block when it is over MAX_BLOB_BYTES (counted without decoding it)."""
    size = len(data) * 3 // 4
    return size if size > MAX_BLOB_BYTES else None
