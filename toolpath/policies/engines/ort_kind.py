"""The `onnxruntime` engine as the registry names it: its options and what it needs installed, read without
importing torch or the engine (a spec that names it is validated, and `models list` asks about it, before any
model loads). Loading runs ort.py, where the export and the policy are."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from . import ONNXRUNTIME


class Options(BaseModel):
    """model.options.engine: {kind: onnxruntime, threads: N}."""

    model_config = ConfigDict(extra="forbid")
    threads: int | None = Field(None, ge=1, le=512, description="intra-op threads; all cores when unset")


class OnnxRuntime:
    name = ONNXRUNTIME
    Options = Options

    def load(self, folder: Path, spec, name: str, options: Options):
        from .ort import load

        return load(folder, spec, name, options)

    def missing(self) -> str:
        absent = [m for m in ("onnxruntime_genai", "onnx", "onnx_ir") if importlib.util.find_spec(m) is None]
        return f"missing: {', '.join(absent)} (pip install 'toolpath[engine]')" if absent else ""


KIND = OnnxRuntime()
