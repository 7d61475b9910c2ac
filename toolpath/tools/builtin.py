"""The tools every agent has: calculator, read_file, final_answer."""

from __future__ import annotations

import ast
import math
import mimetypes
import operator
import os
from pathlib import Path

from ..sandboxes.kernel_client import INSIDE, read_beneath
from .registry import ToolContext, ToolError, ToolResult, tool

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": math.log,
          "log10": math.log10, "log2": math.log2, "exp": math.exp, "sin": math.sin, "cos": math.cos,
          "tan": math.tan, "floor": math.floor, "ceil": math.ceil, "factorial": math.factorial}
_CONSTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_EXPONENT = 10_000  # 9**9**9 would otherwise hang the process computing a number nobody asked for
_MAX_DIGITS = 4_000


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ToolError(f"calculator: exponent {right} is too large (limit {_MAX_EXPONENT})")
        result = _BINOPS[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > _MAX_DIGITS * 3.33:
            raise ToolError(f"calculator: result has more than {_MAX_DIGITS} digits")
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        if node.func.id == "factorial":
            arg = _eval(node.args[0]) if node.args else 0
            if arg > 1000:
                raise ToolError("calculator: factorial argument above 1000")
        return _FUNCS[node.func.id](*[_eval(a) for a in node.args])
    what = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
    raise ToolError(f"calculator: {what!r} is not arithmetic; use numbers, + - * / // % **, parentheses, "
                    f"{', '.join(sorted(_CONSTS))} and {', '.join(sorted(_FUNCS))}()")


def _format_number(x: float | int) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


# Its argument's description shows the syntax, never a whole expression: small models called it with a shown
# expression in place of the task's own.
@tool(timeout=5.0, cost=0.0005, quality=1.0, tags=("math",), pure=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the number.

    Args:
        expression: the arithmetic to evaluate, as the task writes it (its numbers, and its parentheses where
            it has them): + - * / ** ( ) and functions such as sqrt; ^ means power
    """
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolError("calculator: the expression is empty")
    if len(text) > 2000:
        raise ToolError("calculator: the expression is longer than 2000 characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ToolError(f"calculator: cannot parse {expression!r}: {err.msg} at column {err.offset}") from None
    try:
        return _format_number(_eval(tree))
    except ZeroDivisionError:
        raise ToolError(f"calculator: division by zero in {expression!r}") from None
    except (OverflowError, ValueError, TypeError) as err:
        raise ToolError(f"calculator: {err} in {expression!r}") from None


_TEXT_LIMIT = 20_000


@tool(timeout=10.0, cost=0.001, quality=1.0, tags=("io",))
def read_file(path: str, ctx: ToolContext) -> ToolResult:
    """Read one of the task's input files, or a file in the episode's work folder (/episode: what code wrote
    there). Text comes back as text, images as an artifact.

    Args:
        path: the file's name or path as listed in the task's inputs, or its path in the work folder
    """
    match, where = _input_named(path, ctx.inputs), None
    if match is None:
        where = _in_work_folder(path, ctx.sandbox)
    if match is None and where is None:
        names = ", ".join(sorted(p.name for p in ctx.inputs)) or "none"
        raise ToolError(f"read_file: {path!r} is not one of this task's input files (inputs: {names}) nor a file "
                        "in the episode's work folder")
    name = match.name if match is not None else Path(where[1]).name
    mime = mimetypes.guess_type(name)[0] or ""
    # Imported here, not at the top: importing the spec builds its models, which listing the tools never needs.
    from ..spec import MAX_IMAGE_BYTES, MAX_INPUT_FILE_BYTES

    limit = MAX_IMAGE_BYTES if mime.startswith("image/") else MAX_INPUT_FILE_BYTES
    # Read now, one name at a time, following no link: the file checked when the task started may have been
    # swapped since (for a link to /etc/shadow, a FIFO, a huge file), and what is read is what is checked.
    raw = read_beneath(Path("/"), os.path.abspath(match).lstrip("/"), limit) if match is not None else \
        read_beneath(where[0], where[1], limit)
    if raw is None:
        shown = match if match is not None else f"{INSIDE}/{where[1]}"
        raise ToolError(f"read_file: {shown} cannot be read: not a regular file of at most {limit >> 20} MiB "
                        "reached without links (it changed since the task started, or is not one)")
    if mime.startswith("image/"):
        ref = ctx.artifact(raw, name=name, mime=mime)
        return ToolResult(content=f"[image {name}, {ref.size} bytes]", artifacts=[ref])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ToolResult(content=f"[binary file {name}, {len(raw)} bytes; not text]")
    if len(text) > _TEXT_LIMIT:
        text = text[:_TEXT_LIMIT] + f"\n[... truncated: {len(text) - _TEXT_LIMIT} more characters]"
    return ToolResult(content=text)


def _input_named(path: str, inputs: list[Path]) -> Path | None:
    """The task input `path` names: its exact path, or a unique file name or path ending. The inputs' paths as
    the episode checked them (absolute, links resolved), never resolved again: a link is followed only by
    the read, which refuses it."""
    candidate = Path(path)
    if candidate.is_absolute():
        normal = Path(os.path.normpath(candidate))
        return normal if normal in inputs else None
    hits = {p for p in inputs if p.name == candidate.name or str(p).endswith("/" + path.lstrip("./"))}
    return hits.pop() if len(hits) == 1 else None


def _in_work_folder(path: str, sandbox) -> tuple[Path, str] | None:
    """(the work folder on the host, the path in it) for a path in the episode's work folder (relative, or under
    /episode as code in the sandbox sees it); None when the episode has none or the path is not in it."""
    workdir = getattr(sandbox, "workdir", None)
    if workdir is None or "\x00" in path:
        return None
    relative = path[len(INSIDE) + 1:] if path.startswith(INSIDE + "/") else path
    if Path(relative).is_absolute():
        return None
    return Path(workdir), os.path.normpath(relative) if relative else relative


@tool(timeout=None, cost=0.0, quality=1.0, tags=("control",))
def final_answer(answer: str) -> ToolResult:
    """Give the final answer to the task and end the run.

    Args:
        answer: the answer, as short as the task allows
    """
    return ToolResult(content=str(answer), final=True)
