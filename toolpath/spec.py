"""TaskSpec: what a user writes (YAML or JSON) to describe one agent task.

A bad spec fails here, before anything starts, with a `SpecError` that names the file, the field path and
what was expected. Nothing in this module imports the rest of toolpath.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class SpecError(ValueError):
    """A task spec that cannot be used. `problems` holds (field path, message) pairs."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: invalid task spec"]
        lines += [f"  {path or '<top level>'}: {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


class _Part(BaseModel):
    # A typo in a field name is an error, not a silently ignored key.
    model_config = ConfigDict(extra="forbid")


# Policies that decide without a language model: OCR grounding and DOM rules (computer_use agent); the
# simulator's ground truth and a colour/shape detector (embodied agent).
OFFLINE_POLICIES = ("ocr-grounder", "dom", "oracle", "detector")


class ModelSpec(_Part):
    """Which policy decides. `name` is `local`, `openai:MODEL`, `hf:PATH`, `scripted:FILE` or `python:MOD:ATTR`."""

    name: str = "local"
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_new_tokens: int = Field(256, gt=0, le=32768)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        kind = v.split(":", 1)[0]
        if kind not in {"local", "openai", "hf", "scripted", "python", *OFFLINE_POLICIES}:
            raise ValueError(f"unknown model kind {kind!r}; expected local, openai:MODEL, hf:PATH, scripted:FILE, "
                             f"python:MODULE:ATTR, or {' or '.join(OFFLINE_POLICIES)}")
        if kind in OFFLINE_POLICIES and v != kind:
            raise ValueError(f"model {kind!r} takes no value after it")
        if kind not in ("local", *OFFLINE_POLICIES) and (":" not in v or v.endswith(":")):
            raise ValueError(f"model {v!r} needs a value after '{kind}:'")
        return v


class AgentSpec(_Part):
    name: str = "react"
    params: dict[str, Any] = Field(default_factory=dict)


class SandboxSpec(_Part):
    kind: str = "none"
    options: dict[str, Any] = Field(default_factory=dict)


class Limits(_Part):
    max_steps: int = Field(12, gt=0, le=100_000, description="policy calls before the run ends as budget_exhausted")
    max_seconds: float = Field(600.0, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    loop_repeats: int = Field(3, ge=2, description="identical consecutive tool calls that end the run as looping")


class EvaluatorSpec(_Part):
    """How the answer is scored. `name` is one of the scorers in toolpath.evals.scorers."""

    name: str
    expected: Any = None
    options: dict[str, Any] = Field(default_factory=dict)


class Inputs(_Part):
    images: list[Path] = Field(default_factory=list)
    files: list[Path] = Field(default_factory=list)
    urls: list[str] = Field(default_factory=list)

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for u in v:
            if not re.match(r"^(https?|file)://", u):
                raise ValueError(f"{u!r} is not an http(s):// or file:// URL")
        return v


class TaskSpec(_Part):
    id: str
    instruction: str = Field(min_length=1)
    inputs: Inputs = Field(default_factory=Inputs)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    tools: list[str] | None = Field(None, description="allow-list of tool names; None means the agent's defaults")
    limits: Limits = Field(default_factory=Limits)
    evaluator: EvaluatorSpec | None = None
    seed: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("expected 1-128 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
        return v

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        # `model: openai:gpt-4.1-mini` and `agent: react` are the common way to write these.
        if isinstance(data, dict):
            data = dict(data)
            for key, field in (("model", "name"), ("agent", "name"), ("sandbox", "kind")):
                if isinstance(data.get(key), str):
                    data[key] = {field: data[key]}
        return data

    def to_json(self) -> str:
        return self.model_dump_json()


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or str(part).startswith(("function-", "json-or-python")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def describe_errors(err: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        elif e["type"] == "missing":
            msg = "required field is missing"
        if "input" in e and e["type"] not in ("missing", "extra_forbidden") and not isinstance(e["input"], dict):
            msg += f" (got {e['input']!r})"
        problems.append((_field_path(e["loc"]), msg))
    return problems


def parse_spec(data: Any, source: str = "<spec>", base_dir: Path | None = None) -> TaskSpec:
    """Validate a mapping into a TaskSpec; relative input paths resolve against `base_dir` and must exist."""
    if not isinstance(data, dict):
        raise SpecError(source, [("", f"expected a mapping of fields, got {type(data).__name__}")])
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(source, describe_errors(err)) from None
    base = base_dir or Path.cwd()
    missing = []
    for kind in ("images", "files"):
        paths = getattr(spec.inputs, kind)
        for i, p in enumerate(paths):
            full = p if p.is_absolute() else (base / p)
            if not full.is_file():
                missing.append((f"inputs.{kind}[{i}]", f"file not found: {full}"))
            paths[i] = full.resolve()
    start = resolve_start_url(spec, base)
    if start is not None:
        missing.append(("sandbox.options.start_url", start))
    if missing:
        raise SpecError(source, missing)
    resolve_model_path(spec, base)
    return spec


def resolve_start_url(spec: TaskSpec, base_dir: Path) -> str | None:
    """Turn a sandbox start_url written as a file path (no scheme) into a file:// URL; the problem, or None.

    A path is taken relative to the spec file first, then to the working directory, so an example's local page
    opens from wherever `toolpath run` is started. Any URL with a scheme is left to the sandbox to check."""
    url = spec.sandbox.options.get("start_url")
    if not isinstance(url, str) or not url or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url):
        return None
    path = Path(url).expanduser()
    for candidate in ([path] if path.is_absolute() else [base_dir / path, Path.cwd() / path]):
        if candidate.is_file():
            spec.sandbox.options["start_url"] = candidate.resolve().as_uri()
            return None
    return f"no URL scheme, and no file {url!r} next to the spec or in the working directory"


def resolve_model_path(spec: TaskSpec, base_dir: Path) -> None:
    """Make a relative `scripted:FILE` or `hf:PATH` absolute, so the run resumes from any directory.

    A path is taken relative to the spec file first, then to the working directory; one found in neither
    is left as written, and loading the model reports it."""
    kind, _, value = spec.model.name.partition(":")
    if kind not in ("scripted", "hf") or not value or Path(value).expanduser().is_absolute():
        return
    for root in (base_dir, Path.cwd()):
        candidate = root / value
        if candidate.exists():
            spec.model.name = f"{kind}:{candidate.resolve()}"
            return


def load_spec(path: str | Path) -> TaskSpec:
    """Read a TaskSpec from a .yaml/.yml/.json file."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(source, [("", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(source, [("", f"cannot read file: {err}")]) from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except json.JSONDecodeError as err:
        raise SpecError(source, [("", f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}")]) from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1} column {where.column + 1}" if where else ""
        raise SpecError(source, [("", f"not valid YAML{at}: {getattr(err, 'problem', err)}")]) from None
    return parse_spec(data, source, base_dir=path.parent)
