"""The `onnxruntime` engine: ONNX Runtime GenAI running a model folder exported by its own model builder (int4 or
int8 MatMulNBits kernels, fp32 otherwise). The policy is HFPolicy with only `_generate` replaced, so the prompt
(native template or toolpath's grammar), the stop rules, the reading of the reply and the Response's token counts
are exactly the torch backend's; the tokenizer is the source folder's, and the engine is handed token ids."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...spec import ModelSpec
from ..base import PolicyError
from ...progress import Progress
from ..hf import HFPolicy, home_dir
from . import checked
from .export import export_key, exported, source_digest

NAME = "onnxruntime"
# model.options.weights -> the builder's precision. bf16 has no CPU kernels in ONNX Runtime: refused at load.
PRECISION = {"fp32": "fp32", "int8": "int8", "int4": "int4"}


class Options(BaseModel):
    """model.options.engine: {kind: onnxruntime, threads: N}."""

    model_config = ConfigDict(extra="forbid")
    threads: int | None = Field(None, ge=1, le=512, description="intra-op threads; all cores when unset")


def validate(options: dict) -> dict:
    return checked(Options, options)


def missing() -> str:
    import importlib.util

    absent = [m for m in ("onnxruntime_genai", "onnx", "onnx_ir") if importlib.util.find_spec(m) is None]
    return f"missing: {', '.join(absent)} (pip install 'toolpath[engine]')" if absent else ""


def version() -> str:
    import onnxruntime_genai as og

    return og.__version__


def _precision(spec: ModelSpec, name: str) -> str:
    weights = spec.options.get("weights") or "fp32"
    if weights not in PRECISION:
        raise PolicyError(f"model.options.weights: {weights} does not run on engine {NAME} "
                          f"({name}); use one of {', '.join(PRECISION)}")
    return weights


def _build(folder: Path, precision: str, out: Path) -> None:
    """The model builder's export of `folder` into `out`, its own chatter (per-tensor bars, prints) swallowed:
    what the user sees is our one progress line."""
    from onnxruntime_genai.models import builder

    chatter = io.StringIO()
    logging.disable(logging.INFO)  # the quantizer logs a line per MatMul through handlers made before the redirect
    with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        try:
            args = (str(folder), str(folder), str(out), precision, "cpu", str(out / ".cache"))
            # hf_token=false: the source is a local folder; nothing is looked up on the Hub.
            builder.create_model(*args, **builder.parse_extra_options(*args, ["hf_token=false"]))
        except Exception as err:  # noqa: BLE001 — the builder raises what it likes for a model it cannot export
            tail = chatter.getvalue().strip().splitlines()[-1:] or [""]
            raise PolicyError(f"engine {NAME} cannot export {folder}: {type(err).__name__}: {err} {tail[0]}".strip()) from None
        finally:
            logging.disable(logging.NOTSET)
    shutil.rmtree(out / ".cache", ignore_errors=True)  # the builder's scratch, not part of the export


def export(folder: Path, weights: str) -> Path:
    """The engine's export of `folder` at `weights`, made once (export.exported: keyed, written whole)."""
    key = export_key(folder, NAME, version(), weights, source_digest(folder))

    def make(tmp: Path) -> None:
        with Progress(f"exporting {folder.name} for {NAME} at {weights} (first use only)") as line:
            _build(folder, PRECISION[weights], tmp)
            line.close(f"under {home_dir() / 'models' / key}")

    try:
        return exported(home_dir() / "models", key, make)
    except OSError as err:
        raise PolicyError(f"engine {NAME}: cannot write its export of {folder}: {err}") from None


def _refusal(folder: Path) -> str:
    """Why this engine cannot run `folder`, or ""."""
    from ..vlm import folder_is_vlm

    if folder_is_vlm(folder):
        return "it is a vision-language model (the engine runs text models)"
    if (folder / "compression.json").is_file():
        return "it is a `toolpath compress` folder (its packed weights load on engine torch only)"
    config = json.loads((folder / "config.json").read_text())
    heads = config.get("num_attention_heads") or 1
    head = config.get("head_dim") or (config.get("hidden_size") or 0) // heads
    if head % 16:  # the CPU attention kernel's constraint
        return f"its attention heads have {head} dimensions (the engine's kernel needs a multiple of 16)"
    return ""


def load(folder: Path, spec: ModelSpec, name: str) -> "EnginePolicy":
    started = time.perf_counter()
    for option in ("kv_cache", "decoding"):
        if spec.options.get(option):
            raise PolicyError(f"model.options.{option} needs engine torch; model.options.engine is {NAME}")
    reason = _refusal(folder)
    if reason:
        raise PolicyError(f"model.options.engine: {NAME} cannot run {name}: {reason}; use engine torch")
    import onnxruntime_genai as og
    from transformers import AutoTokenizer

    weights = _precision(spec, name)
    out = export(folder, weights)
    setting = spec.options.get("engine")
    threads = (setting.get("threads") if isinstance(setting, dict) else None) or os.cpu_count() or 1
    try:
        config = og.Config(str(out))
        config.clear_providers()  # the CPU
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        model = og.Model(config)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except Exception as err:  # noqa: BLE001 — ONNX Runtime raises its own RuntimeError subclasses
        raise PolicyError(f"engine {NAME} cannot load its export {out}: {err}") from None
    policy = EnginePolicy(model, tokenizer, spec, name, time.perf_counter() - started)
    policy.weights = weights
    policy.export = out
    return policy


class EnginePolicy(HFPolicy):
    """HFPolicy whose generation runs on ONNX Runtime GenAI."""

    engine = NAME

    def _generate(self, inputs: dict, kwargs: dict):
        import onnxruntime_genai as og
        import torch

        from ..hf import _LOCK

        ids = inputs["input_ids"][0].tolist()
        max_new = int(kwargs["max_new_tokens"])
        params = og.GeneratorParams(self.model)
        search: dict[str, Any] = dict(max_length=len(ids) + max_new, do_sample=bool(kwargs.get("do_sample")))
        if search["do_sample"]:
            search.update(temperature=float(kwargs["temperature"]), top_p=float(kwargs["top_p"]), top_k=0,
                          random_seed=int(torch.initial_seed()) & 0x7FFFFFFF)
        try:
            params.set_search_options(**search)
        except Exception as err:  # noqa: BLE001
            raise PolicyError(f"{self.name}: engine {NAME} refused the prompt of {len(ids)} tokens: {err}") from None
        stops = Stops(self.tokenizer, kwargs.get("stop_strings") or ())
        streamer, criteria = kwargs.get("streamer"), kwargs.get("stopping_criteria")
        new: list[int] = []
        with _LOCK:
            generator = og.Generator(self.model, params)
            try:
                generator.append_tokens(ids)
            except Exception as err:  # noqa: BLE001 — past the context, mostly
                raise PolicyError(f"{self.name}: engine {NAME} refused the prompt of {len(ids)} tokens: {err}") from None
            if streamer is not None:
                streamer.put(torch.tensor([ids]))
            while len(new) < max_new and not generator.is_done():
                generator.generate_next_token()
                token = int(generator.get_next_tokens()[0])
                new.append(token)
                if streamer is not None:
                    streamer.put(torch.tensor([token]))
                if stops.hit(new):
                    break
                if criteria is not None and bool(criteria(torch.tensor([ids + new]), None).all()):
                    break
        if streamer is not None:
            streamer.end()
        return torch.tensor([ids + new]), None


class Stops:
    """transformers' stop_strings, on token ids: generation ends once the text made so far contains a stop string
    that the newest token completed (one that ran past it is cut by the format's reader, as with torch)."""

    def __init__(self, tokenizer, stops):
        self.tokenizer, self.stops = tokenizer, [s for s in stops if s]
        self._before = ""

    def hit(self, new: list[int]) -> bool:
        if not self.stops:
            return False
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        start = max(0, len(self._before) - max(map(len, self.stops)))
        self._before = text
        return any(s in text[start:] for s in self.stops)
