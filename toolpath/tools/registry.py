"""`@tool`: a typed Python function becomes a tool with a JSON schema, validated arguments, a timeout and priors.

    @tool(cost=0.001, quality=1.0)
    def calculator(expression: str) -> str:
        '''Evaluate an arithmetic expression.

        Args:
            expression: e.g. "(17 + 4) * 3 / 2"
        '''

The schema comes from the type hints (through pydantic) and the docstring (summary + `Args:` section).
`cost` (expected seconds) and `quality` (expected quality in [0, 1]) are priors a planner reads to search over
tools without calling them. A tool that needs the episode (its inputs, its sandbox, the artifact store) takes
a parameter annotated `ToolContext`; that parameter is not part of the schema.

Tools live in toolpath/registry.py (kind `tool`): `@tool` adds each one there, and `load_tools()` asks it for
all of them, which imports the tool modules it names (built-in ones, entry points of group `toolpath.tool`,
TOOLPATH_PLUGINS) once; a module that fails to import is a ToolError naming it.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .. import registry
from ..spec_molecules import Molecule
from ..state import ArtifactRef


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the agent as an error observation."""


@dataclass
class ToolResult:
    content: str
    artifacts: list[ArtifactRef] = field(default_factory=list)
    final: bool = False  # True for final_answer: the run ends with `content` as its answer
    data: Any = None  # structured result for programmatic callers; not shown to the model


@dataclass
class ToolContext:
    """What a tool may touch in its episode. Built per run by the agent; never part of the graph state."""

    run_id: str = ""
    inputs: list[Path] = field(default_factory=list)
    save_artifact: Callable[..., ArtifactRef] | None = None
    sandbox: Any = None  # the episode's sandbox (a ProcessSandbox for `python`), None when the spec has none
    images: dict[str, Path] = field(default_factory=dict)  # image names tools may read: image_1…, crop_1…
    audio: dict[str, Path] = field(default_factory=dict)  # audio names the speech tools read: audio_1, …
    graphs: dict[str, Molecule] = field(default_factory=dict)  # molecules the chemistry tools read: graph_1, …
    # time.monotonic() by which this step's work must end: what is left of the run's max_seconds, set by the
    # agent for each step (toolpath/deadline.py). None outside an agent.
    deadline: float | None = None
    # The calling agent's step, for the capability tools that run a whole agent nested in this run
    # (agents/capabilities.py); set by the agent for each call, None outside an agent.
    caller: Any = None

    def image_name(self, name: str, what: str = "") -> str:
        """The episode's name for an image a model named: an image name (image_1, crop_2, …), or the file name of
        one of the task's images (models often write "room_1.jpg" for image_1); else an error listing the names."""
        if name in self.images:
            return name
        by_file = [k for k, path in self.images.items() if Path(path).name == name and Path(path) in self.inputs]
        if len(by_file) == 1:
            return by_file[0]
        raise ToolError(f"{what + ': ' if what else ''}unknown image {name!r}; images in this episode: "
                        f"{', '.join(self.images) or 'none'}")

    def audio_path(self, name: str, what: str = "") -> Path:
        """The file of an audio a model named: an audio name (audio_1, …) or the file name of one of the task's
        audio inputs; else an error listing the names. The line the task message lists it by, "audio_1 (a.wav)",
        names it too: small models copied that line whole as the name."""
        if name in self.audio:
            return Path(self.audio[name])
        listed = re.fullmatch(r"(\S+) \((.+)\)", name.strip())
        if listed and listed[1] in self.audio and Path(self.audio[listed[1]]).name == listed[2]:
            return Path(self.audio[listed[1]])
        by_file = [path for path in self.audio.values() if Path(path).name == name]
        if len(by_file) == 1:
            return Path(by_file[0])
        raise ToolError(f"{what + ': ' if what else ''}unknown audio {name!r}; audio in this episode: "
                        f"{', '.join(self.audio) or 'none'}")

    def artifact(self, data: bytes | str | Path, name: str = "", mime: str | None = None) -> ArtifactRef:
        if self.save_artifact is None:
            raise ToolError("this tool call has no artifact store to keep its output in")
        return self.save_artifact(data, name=name, mime=mime)


class _Args(BaseModel):
    # Models often write 5 where a string is expected ("answer": 5); accept it, reject unknown keys.
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


@dataclass
class Tool:
    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    timeout: float | None
    cost: float
    quality: float
    ctx_param: str | None
    tags: tuple[str, ...] = ()
    # The same arguments always give the same result and the call changes nothing (an analysis of an input, a
    # sum): an agent answers a repeat of such a call with the result it already has (agents/nodes.py). Off
    # unless a tool says so: a screenshot, a wait, a click or a code cell legitimately repeats.
    pure: bool = False

    def schema(self) -> dict:
        """The JSON schema in the shape OpenAI-style function calling uses."""
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": params}

    def validate(self, arguments: Any) -> BaseModel:
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}")
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as err:
            problems = [_describe(e) for e in err.errors()]
            if any(e["type"] in ("extra_forbidden", "missing") for e in err.errors()):
                problems.append(f"{self.name} takes {self.takes()}")  # what a model should write instead
            raise ToolError(f"{self.name}: bad arguments: " + "; ".join(problems)) from None

    def takes(self) -> str:
        """Its arguments in a line, the required ones marked: "expression (required), precision"."""
        fields = self.args_model.model_fields
        return ", ".join(f"{k} (required)" if f.is_required() else k for k, f in fields.items()) or "no arguments"

    def call(self, arguments: Any, ctx: ToolContext | None = None) -> ToolResult:
        """Validate, run with the tool's timeout, and normalise the result. Raises ToolError on any failure."""
        args = self.validate(arguments)
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        if self.ctx_param:
            kwargs[self.ctx_param] = ctx or ToolContext()
        timeout = self._timeout(ctx)
        if timeout is None:
            out = self._invoke(kwargs)
        else:
            future = _pool().submit(self._invoke, kwargs)
            try:
                out = future.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise ToolError(f"{self.name}: timed out after {timeout:g} s") from None
        if isinstance(out, ToolResult):
            return out
        return ToolResult(content=out if isinstance(out, str) else _to_text(out), data=out)

    def _timeout(self, ctx: ToolContext | None) -> float | None:
        """The tool's own timeout, cut to what is left of the step's budget. The grace lets a tool that stops by
        the deadline itself (a wait, typing) finish and say what it did not do."""
        from ..deadline import seconds_left

        left = seconds_left(ctx.deadline if ctx is not None else None)
        if left is None or self.timeout is None:
            return self.timeout
        return min(self.timeout, left + 5.0)

    def _invoke(self, kwargs: dict) -> Any:
        try:
            return self.fn(**kwargs)
        except ToolError:
            raise
        except Exception as err:  # a tool's own bug or bad input must reach the agent, not crash the run
            raise ToolError(f"{self.name}: {type(err).__name__}: {err}") from err


def _describe(e: dict) -> str:
    where = ".".join(str(p) for p in e["loc"]) or "arguments"
    msg = "unknown argument" if e["type"] == "extra_forbidden" else e["msg"]
    got = "" if e["type"] in ("missing", "extra_forbidden") else f" (got {e.get('input')!r})"
    return f"{where}: {msg}{got}"


def _to_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    # One pool for timed tool calls; a call that times out keeps its thread until it returns.
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="toolpath-tool")
        return _POOL


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary text and per-argument descriptions from a Google-style docstring."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    parts = re.split(r"^\s*(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    summary = " ".join(parts[0].split())
    args: dict[str, str] = {}
    if len(parts) > 1:
        current = None
        for line in parts[1].splitlines():
            if re.match(r"^\S", line):  # a new unindented section (Returns:, Raises:) ends Args
                break
            m = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if m:
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
    return summary, args


def tool(fn: Callable | None = None, *, name: str | None = None, timeout: float | None = 60.0, cost: float = 0.01,
         quality: float = 1.0, tags: tuple[str, ...] = (), pure: bool = False) -> Any:
    """Register a function as a tool. Usable bare (`@tool`) or with options (`@tool(cost=2.0)`); `pure`: see
    Tool.pure."""

    def register(f: Callable) -> Callable:
        if not 0.0 <= quality <= 1.0:
            raise ValueError(f"tool {f.__name__}: quality must be in [0, 1], got {quality}")
        tool_name = name or f.__name__
        summary, arg_docs = parse_docstring(f.__doc__)
        hints = get_type_hints(f)
        fields: dict[str, Any] = {}
        ctx_param = None
        for pname, param in inspect.signature(f).parameters.items():
            hint = hints.get(pname, Any)
            if hint is ToolContext:
                ctx_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name}: *args/**kwargs cannot be described by a schema")
            from pydantic import Field

            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (hint, Field(default, description=arg_docs.get(pname)))
        model = create_model(f"{tool_name}_args", __base__=_Args, **fields)
        t = Tool(name=tool_name, description=summary, fn=f, args_model=model, timeout=timeout, cost=cost,
                 quality=quality, ctx_param=ctx_param, tags=tags, pure=pure)
        add_tool(t)
        f.tool = t  # type: ignore[attr-defined]
        return f

    return register(fn) if fn is not None else register


def add_tool(t: Tool) -> Tool:
    """Register a built Tool under its name (what `@tool` does with the Tool it makes)."""
    return registry.add("tool", t.name, t)


def load_tools() -> dict[str, Tool]:
    """Every tool by name: the registry imports its tool modules (built-in ones, entry points of group
    `toolpath.tool`, TOOLPATH_PLUGINS) once; a module that fails to import is an error naming it."""
    try:
        return registry.objects("tool")
    except registry.RegistryError as err:
        raise ToolError(str(err)) from err


def get_tool(name: str) -> Tool:
    tools = load_tools()
    if name not in tools:
        raise ToolError(f"unknown tool {name!r}; available: {', '.join(sorted(tools))}")
    return tools[name]


def select_tools(names: list[str] | None, defaults: list[str]) -> list[Tool]:
    """The tools an episode may use: the spec's allow-list if given, else the agent's defaults."""
    wanted = defaults if names is None else names
    tools = [get_tool(n) for n in wanted]
    if not any(t.name == "final_answer" for t in tools):
        tools.append(get_tool("final_answer"))  # an agent must always be able to finish
    return tools
