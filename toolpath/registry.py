"""One registry for everything that can be plugged in: agents, policy backends, sandboxes, benchmarks, tools,
edit tools, response formats, and the model side's kv caches, decoders, compressors and embedders.

Each kind maps a name to an entry. An entry is a lazy "module:attr" target, imported the first time it is
asked for, so listing names costs no import (`toolpath --help` and `toolpath tools list` stay fast):

    registry.names("agent")             -> ["computer_use", "embodied", "fast_slow", "react", "visual_program"]
    registry.load("agent", "react")     -> the object at toolpath.agents.react:AGENT
    registry.entry("policy", "hf").meta["value"] -> "required"

Tools and edit tools are many per module and register themselves when their module is imported (`@tool`,
`register_edit_tool`, which call `add`); for those kinds the registry lists *provider modules* and imports
them all before answering.

Plugins extend any kind in two ways, both read once per process:
- entry points: group `toolpath.<kind>` (e.g. `[project.entry-points."toolpath.policy"] mine = "pkg.mod:make"`);
  for `tool` and `edit_tool` the value is a module to import (`[project.entry-points."toolpath.tool"] x = "pkg.tools"`);
- TOOLPATH_PLUGINS, comma-separated: `pkg.module` (a tool module) or `KIND:NAME=pkg.module:attr`.
A plugin that cannot be imported is a RegistryError naming it and where it was declared, never a registry
that is silently missing part of its entries.

This module is floor 0: it imports nothing of toolpath at load time.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any

KINDS = ("agent", "policy", "sandbox", "benchmark", "tool", "edit_tool", "format", "kv_cache", "decoder",
         "compressor", "embedder", "engine")
# Kinds whose modules register many entries each on import, rather than naming one object per entry.
PROVIDED = ("tool", "edit_tool")


class RegistryError(ValueError):
    """An unknown name, or a plugin that cannot be loaded; the message names the kind, the name and the source."""


@dataclass(frozen=True)
class Entry:
    kind: str
    name: str
    target: str = ""  # "module:attr"; empty for an object added directly
    source: str = "toolpath"  # where it was declared: toolpath, an entry point's distribution, TOOLPATH_PLUGINS
    meta: dict[str, Any] = field(default_factory=dict)  # what callers may read without importing the target
    obj: Any = None  # the loaded object (set on first load, or given to add())


# ---- the built-in entries --------------------------------------------------------------------------------
# Policy meta: `value` says whether the spec name carries a value after "kind:" (required, optional, none)
# and `form` how it is written; `local` that it costs nothing per token (prices); `cache` that a loaded
# instance is reused in the process; `weights` that loading reads model weights (slow: the CLI says so).
# `choices`: the values a kind accepts (spec validation names them on a typo).
# `toolpath models list` shows `example` and asks `check` ("module:function" -> (available, why)), or the
# modules it `needs` (saying `missing` when absent), or shows `about`; `variants` ("module:function" -> rows)
# lists the models a kind can run, one row each.
_LOCAL_MODEL = {"value": "optional", "local": True, "cache": True, "weights": True}
_RULES = {"value": "none", "local": True, "cache": False}
_BUILTIN: dict[str, dict[str, tuple[str, dict]]] = {
    "agent": {name: (f"toolpath.agents.{name}:AGENT", {}) for name in
              ("react", "visual_program", "fast_slow", "computer_use", "embodied", "graph")},
    "policy": {
        # `local` is the bundled SmolLM2-135M; `local:NAME` a model of toolpath/policies/local_models.py's catalog
        # or one it builds (BUILT), whose names `choices` repeats (tests/test_local_models.py keeps them equal).
        "local": ("toolpath.policies.local:load_local", {
            **_LOCAL_MODEL, "form": "local[:NAME]", "example": "local",
            "choices": ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "gemma3-270m", "tiny-vlm", "tiny-molm"),
            "check": "toolpath.policies.local:availability", "variants": "toolpath.policies.local_models:variants"}),
        "hf": ("toolpath.policies.hf:HFPolicy.from_spec", {
            **_LOCAL_MODEL, "value": "required", "form": "hf:PATH", "example": "hf:/path/to/model",
            "check": "toolpath.policies.local:hf_availability"}),
        "openai": ("toolpath.policies.openai:OpenAIPolicy.from_spec", {
            "value": "required", "local": False, "cache": True, "form": "openai:MODEL", "example": "openai:MODEL",
            "check": "toolpath.policies.openai:availability"}),
        "scripted": ("toolpath.policies.scripted:ScriptedPolicy.from_spec", {
            "value": "required", "local": True, "cache": False, "form": "scripted:FILE",
            "example": "scripted:responses.yaml", "about": "replays recorded responses"}),
        "python": ("toolpath.policies.python_policy:load_python", {
            "value": "required", "local": True, "cache": False, "form": "python:MODULE:ATTR",
            "example": "python:module:Class", "about": "your own Policy class"}),
        "ocr-grounder": ("toolpath.baselines.ocr_grounder:OCRGrounder", {
            **_RULES, "about": "GUI grounding by OCR (rapidocr)", "needs": ("rapidocr_onnxruntime",),
            "missing": "missing: rapidocr-onnxruntime (pip install 'toolpath[edit]')"}),
        "dom": ("toolpath.baselines.dom:DOMPolicy", {
            **_RULES, "about": "rule-based actions on a web page's elements (computer_use, browser)"}),
        "oracle": ("toolpath.baselines.fsd_oracle:OraclePolicy", {
            **_RULES, "about": "FSD answers from the robot simulator's ground truth (embodied)"}),
        "detector": ("toolpath.baselines.fsd_detector:DetectorPolicy", {
            **_RULES, "about": "FSD answers from a colour/shape detector (embodied, tabletop)"}),
    },
    "sandbox": {
        "process": ("toolpath.sandboxes.process:ProcessSandbox", {"code": True}),
        "docker": ("toolpath.sandboxes.docker:DockerSandbox", {"code": True}),
        "browser": ("toolpath.sandboxes.browser:BrowserSandbox", {}),
        "desktop": ("toolpath.sandboxes.desktop:DesktopSandbox", {}),
        "robot": ("toolpath.sandboxes.robot_sim:TabletopSandbox", {}),
    },
    "benchmark": {name: (f"toolpath.evals.benchmarks.{target}", {}) for name, target in {
        "arith": "arith:Arith", "mindcube": "mindcube:MindCube", "omni3d_bench": "omni3d_bench:Omni3DBench",
        "edits": "edits:Edits", "osworld_g": "osworld_g:OSWorldG", "screenspot": "screenspot:ScreenSpot",
        "gui_grounding": "gui_grounding:GUIGrounding", "miniwob": "miniwob:MiniWoB", "webarena": "webarena:WebArena",
        "webarena_lite": "webarena:WebArenaLite", "webarena_lite_v2": "webarena:WebArenaLiteV2",
        "webarena_verified": "webarena:WebArenaVerified", "webarena_verified_hard": "webarena:WebArenaVerifiedHard",
        "tabletop": "tabletop:Tabletop", "vabench": "vabench:VABench", "pope": "pope:POPE",
        "chair": "chair:CHAIR", "bfcl": "bfcl:BFCL", "dag_math": "dag_math:DagMath",
        "mmsu": "mmsu:MMSU", "giqa": "giqa:GIQA", "molqa": "molqa:MolQA"}.items()},
    "format": {
        "json": ("toolpath.policies.formats.json:JSONFormat", {}),
        "deepeyes": ("toolpath.policies.formats.deepeyes:DeepEyesFormat", {}),
    },
    # Provider modules: importing one registers its tools (`@tool`) or edit tools (`register_edit_tool`).
    "tool": {**{name: (f"toolpath.tools.{name}", {}) for name in
                ("builtin", "code", "image.ops", "image.grounded_quality", "search", "retrieval", "gui", "robot",
                 "spatial_tools", "fsd.tools", "audio.speech", "inr.tools", "chem.tools")},
             # whole agents as tools (spatial_query, edit_image, gui_task, robot_task): on the agents floor
             "capabilities": ("toolpath.agents.capabilities", {})},
    "edit_tool": {name: (f"toolpath.tools.image.{name}", {}) for name in
                  ("fill", "locate", "learned", "paint", "text")},
    # `toolpath compress --method NAME` (toolpath/compress/): each entry is the kind (toolpath/kinds.py: name,
    # Options, compress). The folders they write are read by policies/packed_weights.py, not through here.
    "compressor": {name: (f"toolpath.compress.{module}:KIND", {}) for name, module in (
        ("rtn", "rtn"), ("gptq", "gptq"), ("moe-bits", "moe_bits"), ("tailor", "tailor"))},
    # KV caches (toolpath/policies/kvcache/): each entry is the kind's KIND (name, short, Options, refuse, attach).
    "kv_cache": {name: (f"toolpath.policies.kvcache.{name}:KIND", {})
                 for name in ("kivi", "chanmix", "quest", "icecache")},
    # Decoding methods (toolpath/policies/decoding/): each entry is the kind (toolpath/kinds.py: name, Options, build).
    "decoder": {name: (f"toolpath.policies.decoding.{name}:KIND", {}) for name in ("vcd", "shield")},
    "embedder": {},
    # What runs a local text model (toolpath/policies/engines/): each entry is the engine (toolpath/kinds.py: name,
    # Options, load); `torch` is transformers, where kv caches and decoding methods hook in.
    "engine": {"torch": ("toolpath.policies.engines.torch_engine:KIND", {}),
               "onnxruntime": ("toolpath.policies.engines.ort_kind:KIND", {})},
}

_LOCK = threading.RLock()
_entries: dict[str, dict[str, Entry]] | None = None
_provided: dict[str, dict[str, Entry]] = {kind: {} for kind in PROVIDED}  # objects providers registered
_imported: set[str] = set()  # provider modules already imported successfully


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise RegistryError(f"unknown registry kind {kind!r}; kinds: {', '.join(KINDS)}")


def _table() -> dict[str, dict[str, Entry]]:
    """Every declared entry (built-in, then entry points, then TOOLPATH_PLUGINS), read once per process."""
    global _entries
    with _LOCK:
        if _entries is None:
            table = {kind: {name: Entry(kind, name, target, "toolpath", dict(meta))
                            for name, (target, meta) in _BUILTIN[kind].items()} for kind in KINDS}
            for entry in [*_entry_point_entries(), *_env_entries()]:
                table[entry.kind][entry.name] = entry
            _entries = table
        return _entries


def _entry_point_entries() -> list[Entry]:
    from importlib.metadata import entry_points

    out = []
    installed = entry_points()  # read every distribution's entry points once, not once per kind (startup time)
    for kind in KINDS:
        for ep in installed.select(group=f"toolpath.{kind}"):
            dist = getattr(ep.dist, "name", None) or "an installed package"
            out.append(Entry(kind, ep.name, ep.value, f"entry point {ep.name!r} of {dist}"))
    return out


def _env_entries() -> list[Entry]:
    out = []
    for item in (s.strip() for s in os.environ.get("TOOLPATH_PLUGINS", "").split(",")):
        if not item:
            continue
        if "=" not in item:  # a plain module: it registers tools when imported
            out.append(Entry("tool", item, item, "TOOLPATH_PLUGINS"))
            continue
        head, _, target = item.partition("=")
        kind, _, name = head.partition(":")
        if kind not in KINDS or not name or not target:
            raise RegistryError(f"TOOLPATH_PLUGINS: cannot read {item!r}; expected pkg.module (a tool module) or "
                                f"KIND:NAME=pkg.module:attr with KIND one of {', '.join(KINDS)}")
        out.append(Entry(kind, name.strip(), target.strip(), "TOOLPATH_PLUGINS"))
    return out


def declared(kind: str) -> dict[str, Entry]:
    """The declared entries of a kind, without importing anything (for provided kinds: the provider modules)."""
    _check_kind(kind)
    return dict(_table()[kind])


def names(kind: str) -> list[str]:
    """The names of a kind, sorted. For tools and edit tools this imports their provider modules."""
    if kind in PROVIDED:
        return sorted(objects(kind))
    return sorted(declared(kind))


def entry(kind: str, name: str) -> Entry:
    """The entry of `name`, without importing its target; RegistryError naming the choices if there is none."""
    if kind in PROVIDED:
        objs = objects(kind)
        if name not in objs:
            raise RegistryError(f"unknown {kind.replace('_', ' ')} {name!r}; available: {', '.join(sorted(objs))}")
        return _provided[kind][name]
    entries = declared(kind)
    if name not in entries:
        raise RegistryError(f"unknown {kind.replace('_', ' ')} {name!r}; available: {', '.join(sorted(entries))}")
    return entries[name]


def load(kind: str, name: str) -> Any:
    """The object registered as `name`: imported on first use, then kept."""
    e = entry(kind, name)
    if e.obj is not None:
        return e.obj
    obj = _import_target(e)
    with _LOCK:
        _table()[kind][name] = Entry(e.kind, e.name, e.target, e.source, e.meta, obj)
    return obj


def objects(kind: str) -> dict[str, Any]:
    """For tools and edit tools: every registered object by name, after importing all provider modules."""
    if kind not in PROVIDED:
        raise RegistryError(f"{kind!r} entries are loaded one by one (registry.load), not listed as objects")
    for e in declared(kind).values():
        if e.target not in _imported:
            _import_module(e)
            _imported.add(e.target)
    return {name: e.obj for name, e in _provided[kind].items()}


def add(kind: str, name: str, obj: Any, meta: dict[str, Any] | None = None) -> Any:
    """Register an object under `name` now (a decorator's registration, a test's or a script's own entry)."""
    _check_kind(kind)
    e = Entry(kind, name, "", "added at run time", dict(meta or {}), obj)
    with _LOCK:
        if kind in PROVIDED:
            _provided[kind][name] = e
        else:
            _table()[kind][name] = e
    return obj


def _import_module(e: Entry) -> Any:
    try:
        return importlib.import_module(e.target)
    except Exception as err:  # noqa: BLE001 — any failure of a plugin's import is reported as that plugin's
        raise RegistryError(f"cannot load {e.kind.replace('_', ' ')} module {e.target!r} ({e.source}): "
                            f"{type(err).__name__}: {err}") from err


def _import_target(e: Entry) -> Any:
    module, _, attr = e.target.partition(":")
    if not module or not attr:
        raise RegistryError(f"{e.kind} {e.name!r} ({e.source}): target {e.target!r} is not module:attr")
    obj = _import_module(Entry(e.kind, e.name, module, e.source))
    try:
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise RegistryError(f"cannot load {e.kind.replace('_', ' ')} {e.name!r} ({e.source}): "
                            f"{module} has no attribute {attr!r}") from None
    return obj


def reset() -> None:
    """Forget what was read and loaded (tests that change TOOLPATH_PLUGINS); provided objects stay registered."""
    global _entries
    with _LOCK:
        _entries = None
        _imported.clear()
