"""TaskSpec: what a user writes (YAML or JSON) to describe one agent task.

A bad spec fails here, before anything starts, with a `SpecError` that names the file, the field path and
what was expected. A spec may come from anyone (a downloaded example, a generated file), so reading one is
bounded (file size, nesting, values after YAML aliases, string and path lengths), and a spec may not hold
secrets, reach pages outside its own folder or this machine unless it says so, or name inputs that are not
what they claim. Reading the file itself is spec_reading.py's job. Nothing in this module imports the rest of
toolpath but spec_reading, redact and registry, which import nothing of ours either.
"""

from __future__ import annotations

import ipaddress
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from . import registry
from .graph_spec import GraphSpecError, read_graph
from .spec_media import MAX_IMAGE_PIXELS, audio_problem, image_problem  # noqa: F401 (a spec limit too)
from .spec_molecules import MAX_MOLECULE_FILE_BYTES, is_molecule_file, molecule_problems

# The limits on the file and its shape live with the code that reads it; they are part of this module's API too.
from .spec_reading import (  # noqa: F401
    MAX_NESTING,
    MAX_SPEC_BYTES,
    MAX_SPEC_VALUES,
    MAX_STRING_CHARS,
    Unreadable,
    field_path,
    parse_text,
    read_text,
    shape_problems,
    shown_path,
    size_text,
)
from .spec_secrets import secret_problems

# ---- what a spec may name: paths and inputs -------------------------------------------------------------
# Linux's PATH_MAX: a longer path cannot be opened anyway, and saying so beats an OS error.
MAX_PATH_CHARS = 4096
# An input image is copied into the run's artifacts and decoded for the model: 64 MiB holds any photo or
# screenshot (an 8K PNG is about 30 MB), and is checked from the file's size alone, without reading it.
MAX_IMAGE_BYTES = 64 * 1024 * 1024
# An input file is copied into the sandbox's episode folder for every run of the task.
MAX_INPUT_FILE_BYTES = 100 * 1024 * 1024
# An input audio file is copied into the run's artifacts and decoded whole by the speech tools: 100 MiB is about
# ten minutes of CD-quality WAV, far more of FLAC or MP3.
MAX_AUDIO_BYTES = 100 * 1024 * 1024

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


def _policy_forms() -> str:
    """How each policy kind in the registry is written: `local, openai:MODEL, …, or detector`."""
    forms = [e.meta.get("form", e.name) for e in registry.declared("policy").values()]
    return ", ".join(forms[:-1]) + f", or {forms[-1]}" if len(forms) > 1 else "".join(forms)


# How a local model's weights are held (policies/quant.py): as loaded, bfloat16, or int8 / int4 weight-only.
WEIGHTS = ("fp32", "bf16", "int8", "int4")
LM_HEAD = ("quantized", "float")
INT4_GROUPS = (32, 64, 128)
# How a local model is told its tools (policies/hf.py): its own chat template's way when it has one, or toolpath's.
TOOL_FORMATS = ("auto", "native", "toolpath")


class ModelSpec(_Part):
    """Which policy decides. `name` is a policy kind of the registry, with its value when it takes one:
    `local`, `openai:MODEL`, `hf:PATH`, `scripted:FILE`, `python:MOD:ATTR`, or a rule-based one (`dom`)."""

    name: str = "local"
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_new_tokens: int = Field(256, gt=0, le=32768)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    options: dict[str, Any] = Field(default_factory=dict)
    # what policies/settings.py validated `options` into, kept with the options it read (never serialised)
    _settings: Any = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        kind = v.split(":", 1)[0]
        if not v.strip():
            raise ValueError(f"empty; expected {_policy_forms()}")
        known = registry.declared("policy")
        if kind not in known:
            raise ValueError(f"unknown model kind {kind!r}; expected {_policy_forms()}")
        value = known[kind].meta.get("value", "optional")
        if value == "none" and v != kind:
            raise ValueError(f"model {kind!r} takes no value after it")
        if value == "required" and (":" not in v or v.endswith(":")):
            raise ValueError(f"model {v!r} needs a value after '{kind}:'")
        choices = known[kind].meta.get("choices")
        given = v.partition(":")[2]
        if choices and (given or v.endswith(":")) and given not in choices:
            forms = ([kind] if value == "optional" else []) + [f"{kind}:{c}" for c in choices]
            raise ValueError(f"unknown {kind} model {given!r}; known: {', '.join(forms)}")
        return v

    @field_validator("options")
    @classmethod
    def _weights(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "weights" in v and v["weights"] not in WEIGHTS:
            raise ValueError(f"options.weights must be one of {', '.join(WEIGHTS)}, got {v['weights']!r}")
        if "lm_head" in v and v["lm_head"] not in LM_HEAD:
            raise ValueError(f"options.lm_head must be one of {', '.join(LM_HEAD)}, got {v['lm_head']!r}")
        if "int4_group" in v and v["int4_group"] not in INT4_GROUPS:
            raise ValueError(f"options.int4_group must be one of {', '.join(map(str, INT4_GROUPS))}, "
                             f"got {v['int4_group']!r}")
        if "tool_format" in v and v["tool_format"] not in TOOL_FORMATS:
            raise ValueError(f"options.tool_format must be one of {', '.join(TOOL_FORMATS)}, got {v['tool_format']!r}")
        return v

    @field_validator("options")
    @classmethod
    def _prefix_cache_mb(cls, v: dict[str, Any]) -> dict[str, Any]:
        # How many MiB of earlier calls' KV state a local model keeps for prompts that start the same way; 0: none.
        mb = v.get("prefix_cache_mb")
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, (int, float)) or not 0 <= mb <= 2**20):
            raise ValueError(f"options.prefix_cache_mb must be a number of MiB from 0 (off) to {2**20}, got {mb!r}")
        return v

    @field_validator("options")
    @classmethod
    def _kinds(cls, v: dict[str, Any]) -> dict[str, Any]:
        # Only the kinds' names: their options are validated into their Options on the policies floor
        # (policies/settings.py), where the kinds live, before the model loads or a run starts.
        for option in KIND_OPTIONS:
            if v.get(option):
                declared_kind(option, v[option])
        return v


# model.options that name a kind of the registry -> the registry kind
KIND_OPTIONS = {"engine": "engine", "kv_cache": "kv_cache", "decoding": "decoder"}


def declared_kind(option: str, value: Any, field: str | None = None) -> str:
    """The kind a model option names (`KIND[:N]`, a name, or a mapping with `kind`), one of the registry's
    declared names (nothing is imported); ValueError naming `field` (default the option) otherwise."""
    field, known = field or option, registry.declared(KIND_OPTIONS[option])
    if not isinstance(value, (str, dict)):
        raise ValueError(f"{field}: expected a mapping with 'kind' or a kind's name ({', '.join(known)}), "
                         f"got {type(value).__name__}")
    name = value.partition(":")[0].strip() if isinstance(value, str) else value.get("kind")
    if name is None:
        raise ValueError(f"{field}.kind: missing; known: {', '.join(known)}")
    if not isinstance(name, str):
        raise ValueError(f"{field}.kind: expected a kind's name ({', '.join(known)}), got {type(name).__name__}")
    if name not in known:
        raise ValueError(f"{field}.kind: unknown kind {name!r}; known: {', '.join(known)}")
    return name


class AgentSpec(_Part):
    name: str = Field("react", min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class SandboxSpec(_Part):
    kind: str = "none"
    options: dict[str, Any] = Field(default_factory=dict)


class Limits(_Part):
    max_steps: int = Field(12, gt=0, le=100_000, description="policy calls before the run ends as budget_exhausted")
    max_seconds: float = Field(600.0, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    loop_repeats: int = Field(3, ge=2, description="identical consecutive tool calls that end the run as looping")


# How a benchmark's scorer scores: ours ("toolpath") or the published one, bugs included ("official").
SCORING_MODES = ("toolpath", "official")


class EvaluatorSpec(_Part):
    """How the answer is scored. `name` is one of the scorers in toolpath.evals.scorers; `options.scoring`, where
    a scorer has both, picks toolpath (default) or official scoring."""

    name: str
    expected: Any = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _scoring(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "scoring" in v and v["scoring"] not in SCORING_MODES:
            raise ValueError(f"options.scoring must be one of {', '.join(SCORING_MODES)}, got {v['scoring']!r}")
        return v


class Inputs(_Part):
    images: list[Path] = Field(default_factory=list)
    files: list[Path] = Field(default_factory=list)
    urls: list[str] = Field(default_factory=list)
    audio: list[Path] = Field(default_factory=list)  # named audio_1, audio_2, … in an episode, like images
    graphs: list[str] = Field(default_factory=list)  # molecules: SMILES or .smi/.sdf/.mol files; graph_1, …

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for u in v:
            if not re.match(r"^(https?|file)://", u):
                raise ValueError(f"{u!r} is not an http(s):// or file:// URL")
        return v


class McpServerSpec(_Part):
    """An MCP server whose tools the agent gets (tools/mcp_client.py): a stdio `command` (`env` set over a minimal
    one) or a streamable HTTP `url`; `tools` an allow-list; `timeout` per call, `start_timeout` to start (s)."""

    name: str = ""
    command: str | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(None, pattern=r"^https?://[^/\s]+(/\S*)?$")
    tools: list[str] | None = Field(None, min_length=1)
    prefix: str = Field("", pattern=r"^([A-Za-z_][A-Za-z0-9_.-]{0,63})?$")
    timeout: float = Field(30.0, gt=0, le=3600)
    start_timeout: float = Field(60.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"give `command` (stdio) or `url` (HTTP), not {'both' if self.command else 'neither'}")
        if self.url is not None and (self.args or self.env):
            raise ValueError("`args` and `env` are for a stdio `command`; a `url` server takes neither")
        return self


class TaskSpec(_Part):
    id: str
    instruction: str = Field(min_length=1)
    # the user's later messages: each is sent when the model answers the one before (agents/user_turns.py)
    followups: list[str] = Field(default_factory=list)
    inputs: Inputs = Field(default_factory=Inputs)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    tools: list[str] | None = Field(None, description="allow-list of tool names; None means the agent's defaults")
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    evaluator: EvaluatorSpec | None = None
    seed: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("expected 1-128 characters of letters, digits, '_', '.', '-', starting with a letter "
                             "or digit")
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


def error_message(e: dict) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) in a spec's words, without its field."""
    msg = {"extra_forbidden": "unknown field", "missing": "required field is missing"}.get(
        e["type"], e["msg"].removeprefix("Value error, "))
    if "input" in e and e["type"] not in ("missing", "extra_forbidden") and not isinstance(e["input"], dict):
        shown = repr(e["input"])
        msg += f" (got {shown if len(shown) <= 100 else shown[:99] + '…'})"
    return msg


def describe_errors(err: ValidationError) -> list[tuple[str, str]]:
    return [(field_path(e["loc"]), error_message(e)) for e in err.errors()]


def parse_spec(data: Any, source: str = "<spec>", base_dir: Path | None = None,
               allow_paths: Sequence[str | Path] = ()) -> TaskSpec:
    """Validate a mapping into a TaskSpec; relative input paths resolve against `base_dir` (the spec's folder,
    default the working directory) and must exist.

    Besides the fields' own rules: the limits above, no secrets (see `secret_problems`) and no key the user did
    not allow, inputs that are what they claim, files (inputs, a start page on disk) under the spec's folder or
    one of `allow_paths` (the user's, never the spec's), a start page on this machine unless allowed by name."""
    if not isinstance(data, dict):
        raise SpecError(source, [("", f"expected a mapping of fields, got {type(data).__name__}")])
    problems = shape_problems(data)
    if problems:
        raise SpecError(source, problems)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(source, describe_errors(err)) from None
    base = base_dir or Path.cwd()
    reach = Reach(base, allow_paths)
    problems = secret_problems(data) + input_problems(spec, reach)
    start = resolve_start_url(spec, base, allow_paths)
    if start is not None:
        problems.append(("sandbox.options.start_url", start))
    model = resolve_model_path(spec, base)
    if model is not None:
        problems.append(("model.name", model))
    if spec.agent.name == "graph":  # the graph it declares: unknown, unreachable nodes, cycles with no exit
        problems += graph_problems(spec, base)
    if problems:
        raise SpecError(source, problems)
    return spec


# ---- an `agent: graph` spec: its graph, and each policy node's own model --------------------------------

def node_model(name: str, model: Any) -> ModelSpec:
    """A policy node's own `model` (a name, or a mapping as the spec's `model`) as a ModelSpec; GraphSpecError
    naming the node's field and each problem in the words a spec's own model gets."""
    try:
        return ModelSpec(name=model) if isinstance(model, str) else ModelSpec.model_validate(model)
    except ValidationError as err:
        text = "; ".join(f"{field}: {msg}" if field else msg for field, msg in describe_errors(err))
        raise GraphSpecError(f"agent.params.nodes.{name}.model", text) from None


def graph_problems(spec: TaskSpec, base_dir: Path) -> list[tuple[str, str]]:
    """What is wrong with an `agent: graph` spec, as (field, message) pairs for SpecError; a policy node's own
    `model` is checked as the spec's model is, its relative file made absolute."""
    from types import SimpleNamespace

    try:
        graph = read_graph(spec.agent.params)
    except GraphSpecError as err:
        return [(err.field, err.message)]
    problems = []
    for name, node in graph["nodes"].items():
        if node["kind"] != "policy" or "model" not in node:
            continue
        where = f"agent.params.nodes.{name}.model"
        try:
            model = node_model(name, node["model"])
        except GraphSpecError as err:
            problems.append((err.field, err.message))
            continue
        problem = resolve_model_path(SimpleNamespace(model=model), base_dir)
        if problem is not None:
            problems.append((where, problem))
        spec.agent.params["nodes"][name]["model"] = model.model_dump(exclude_defaults=True) or {"name": model.name}
    return problems


# ---- inputs --------------------------------------------------------------------------------------------

def _path_problem(text: str, what: str = "path") -> str | None:
    """Why `text` cannot name a file, before the file system is asked; None when it can."""
    if "\x00" in text:
        return f"the {what} contains a NUL byte"
    if len(text) > MAX_PATH_CHARS:
        return f"a {what} of {len(text):,} characters; at most {MAX_PATH_CHARS:,}"
    return None


def _regular_file_problem(full: Path, limit: int) -> str | None:
    """Is `full` a regular file of at most `limit` bytes? Asked of its metadata only, so a FIFO does not block
    and a sparse 2 GB file is not read."""
    try:
        info = full.stat()
    except (FileNotFoundError, NotADirectoryError):
        return f"file not found: {full}"
    except (OSError, ValueError) as err:
        return f"cannot read {full}: {getattr(err, 'strerror', None) or err}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file: {full}"
    if info.st_size > limit:
        return f"{full} is {size_text(info.st_size)}; at most {size_text(limit)}"
    return None


class Reach:
    """The folders a spec's files may be in: the spec's own (relative paths are taken against it) and those the
    user allowed (`--allow-path DIR`, `allow_paths=`). A spec may come from anyone and what it names is read,
    copied into the run and shown to the model, so a path outside them (/etc/shadow, /proc/self/environ, a link
    in the spec's folder that points out of it) is refused, links resolved before the check."""

    def __init__(self, base_dir: Path, allow_paths: Sequence[str | Path] = ()):
        self.base = Path(base_dir)
        self.allowed = [Path(p).expanduser() for p in allow_paths]

    def resolve(self, path: Path) -> tuple[Path | None, str | None]:
        """(the file, links resolved; None when refused) and why it is refused (None when it is not)."""
        try:
            full = (path if path.is_absolute() else self.base / path).resolve()
            folders = [f.resolve() for f in (self.base, *self.allowed)]
        except (OSError, ValueError, RuntimeError) as err:
            return None, f"cannot use {path}: {err}"
        if any(full.is_relative_to(f) for f in folders):
            return full, None
        allowed = f" or a folder allowed with --allow-path ({', '.join(map(str, folders[1:]))})" if self.allowed else ""
        named = f"{path} (that is {full})" if str(path) != str(full) else str(full)
        return None, (f"{named} is outside the spec's folder {folders[0]}{allowed}; a file a spec names must be "
                      f"under it, unless the user allows its folder: --allow-path DIR (allow_paths= in Python)")


def input_problems(spec: TaskSpec, reach: Reach) -> list[tuple[str, str]]:
    """Each input file must be within the spec's reach, a regular file within its size limit, each image an
    image, each molecule (inputs.graphs) one RDKit reads, each file: URL a file within reach; paths are made
    absolute (links resolved). Also asked where an episode starts (agents/reach.py), of tasks a benchmark built
    from its data."""
    problems = []
    for kind, limit in (("images", MAX_IMAGE_BYTES), ("files", MAX_INPUT_FILE_BYTES), ("audio", MAX_AUDIO_BYTES),
                        ("graphs", MAX_MOLECULE_FILE_BYTES)):
        paths = getattr(spec.inputs, kind)
        for i, p in enumerate(paths):
            if kind == "graphs" and not is_molecule_file(p):
                continue  # a SMILES string: read with the files below
            where = f"inputs.{kind}[{i}]"
            problem = _path_problem(str(p))
            if problem is None:
                full, problem = reach.resolve(Path(p))
            if problem is None:
                problem = _regular_file_problem(full, limit)
                if problem is None and kind == "images":
                    problem = image_problem(full)
                if problem is None and kind == "audio":
                    problem = audio_problem(full)
                if problem is None:
                    paths[i] = str(full) if kind == "graphs" else full
            if problem is not None:
                problems.append((where, problem))
    problems += molecule_problems(spec.inputs.graphs, refused={where for where, _ in problems})
    for i, url in enumerate(spec.inputs.urls):
        if url.lower().startswith("file:"):
            problem = _path_problem(url, "URL") or _file_url_problem(url, reach)
            if problem is not None:
                problems.append((f"inputs.urls[{i}]", problem))
    return problems


# ---- the start page ------------------------------------------------------------------------------------

def host_allowed(host: str, port: int | None, allowed_hosts: Any) -> bool:
    """Does an allow-list admit host:port? Its entries are names ("example.com", any port), "host:port",
    "*.example.com" (subdomains) or "*" (everything), as a list or one comma- or space-separated string."""
    if isinstance(allowed_hosts, str):
        allowed_hosts = allowed_hosts.replace(",", " ").split()
    for entry in allowed_hosts if isinstance(allowed_hosts, (list, tuple)) else []:
        entry = str(entry).strip().lower()
        if entry == "*":
            return True
        name, _, want = entry.partition(":")
        port_ok = not want or (want.isdigit() and int(want) == port)
        if port_ok and (name == host or (name.startswith("*.") and host.endswith(name[1:]))):
            return True
    return False


def _on_this_machine(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _file_under(path: Path, reach: Reach) -> str | None:
    """A page the spec opens from disk must be a file within its reach (Reach), links resolved."""
    full, problem = reach.resolve(path)
    if problem is None and not full.is_file():
        return f"no file {full}"
    return problem


def _file_url_problem(url: str, reach: Reach) -> str | None:
    """A file: URL must name a file of this machine within the spec's reach."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        return f"a file: URL on another machine ({parts.netloc}); a page on disk must be under the spec's folder"
    return _file_under(Path(unquote(parts.path)), reach)


def resolve_start_url(spec: TaskSpec, base_dir: Path, allow_paths: Sequence[str | Path] = ()) -> str | None:
    """Check a sandbox's start_url, and turn one written as a file path into a file:// URL; the problem, or None.

    The page is shown to the model (and, through it, to whoever serves the model), so a spec opens only what
    it could have shipped or started itself: a file under its own folder (a path is taken relative to it) or
    one the user allowed (`allow_paths`), a page on this machine (localhost, 127.0.0.1, ::1), data: and about:
    pages, or a host that sandbox.options.allowed_hosts names. Nothing is fetched here."""
    reach = Reach(base_dir, allow_paths)
    options = spec.sandbox.options
    url = options.get("start_url")
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        return f"expected a URL or a file path, got {url!r}"
    problem = _path_problem(url, "URL or path")
    if problem is not None:
        return problem
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url):  # a file path
        path = Path(url)
        problem = _file_under(path, reach)
        if problem is None:
            options["start_url"] = reach.resolve(path)[0].as_uri()
        return problem
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("data", "about"):
        return None
    if scheme == "file":
        return _file_url_problem(url, reach)
    if scheme not in ("http", "https"):
        return f"expected an http(s), file, data or about URL, got scheme {scheme!r}"
    try:
        host, port = (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}[scheme]
    except ValueError as err:
        return f"not a valid URL: {err}"
    if not host:
        return "the URL names no host"
    if _on_this_machine(host) or host_allowed(host, port, options.get("allowed_hosts")):
        return None
    return (f"{host} is not on this machine, and sandbox.options.allowed_hosts does not name it; add {host!r} "
            "there (browser sandbox) to let the episode open it")


def resolve_model_path(spec: TaskSpec, base_dir: Path) -> str | None:
    """Make a relative `scripted:FILE` or `hf:PATH` absolute, so the run resumes from any directory; the
    problem with the path, or None.

    A path is taken relative to the spec file first, then to the working directory; one found in neither
    is left as written, and loading the model reports it. A scripted file that exists must be a regular file
    (reading a FIFO would block the run before it starts)."""
    kind, _, value = spec.model.name.partition(":")
    if kind not in ("scripted", "hf") or not value:
        return None
    problem = _path_problem(value)
    if problem is not None:
        return problem
    path = Path(value).expanduser()
    for candidate in [path] if path.is_absolute() else [base_dir / path, Path.cwd() / path]:
        try:
            found = candidate.exists()
        except OSError as err:  # a name longer than the file system allows
            return f"cannot use {value!r}: {err.strerror}"
        if found:
            if not path.is_absolute():
                spec.model.name = f"{kind}:{candidate.resolve()}"
            return _regular_file_problem(candidate, MAX_INPUT_FILE_BYTES) if kind == "scripted" else None
    return None


def load_spec(path: str | Path, allow_paths: Sequence[str | Path] = ()) -> TaskSpec:
    """Read a TaskSpec from a .yaml/.yml/.json file; the files it names must be under its folder or one of
    `allow_paths`."""
    path = Path(path)
    source = str(path)
    try:
        data = parse_text(read_text(path), path.suffix.lower() == ".json")
    except Unreadable as err:
        raise SpecError(source, [(err.field, err.message)]) from None
    return parse_spec(data, source, base_dir=path.parent, allow_paths=allow_paths)
