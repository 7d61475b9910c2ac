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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...paths import models_dir
from ...progress import Progress
from ...spec import ModelSpec
from ..base import PolicyError
from ..hf import HFPolicy
from . import ONNXRUNTIME as NAME
from . import packed_codes
from .export import export_key, exported, source_digest

# model.options.weights -> the builder's precision. bf16 has no CPU kernels in ONNX Runtime: refused at load.
PRECISION = {"fp32": "fp32", "int8": "int8", "int4": "int4"}
# int4/int8 MatMulNBits multiply with the activations quantized to int8 per block (the CPU kernels' fastest path,
# VNNI/AMX where the processor has them); the perplexity cost is measured in docs/results/engine.md.
ACCURACY_LEVEL = 4
# The builder's options for every export; each is part of the export's key, so a changed option never reuses an
# export made without it. prune_lm_head: the output head runs on the last position only, which is all generation
# reads, instead of on every prompt token.
BUILDER = ("prune_lm_head=true", f"accuracy_level={ACCURACY_LEVEL}")


def version() -> str:
    import onnxruntime_genai as og

    return og.__version__


def _weights(folder: Path, spec: ModelSpec, name: str) -> str:
    """The export's weights setting: model.options.weights, or a compress folder's own packed bits (which a
    different weights option cannot change without rounding the codes again)."""
    asked = spec.options.get("weights")
    entry = packed_codes.layout(folder)
    if entry is not None:
        stored = packed_codes.bits_of(entry)
        if asked not in (None, stored):
            raise PolicyError(f"model.options.weights: {asked} does not apply to {name} on engine {NAME}: its "
                              f"weights are packed as {stored}, which the engine runs as they are; leave weights "
                              "unset, or use engine torch")
        return stored
    weights = asked or "fp32"
    if weights not in PRECISION:
        raise PolicyError(f"model.options.weights: {weights} does not run on engine {NAME} "
                          f"({name}); use one of {', '.join(PRECISION)}")
    return weights


def _build(folder: Path, precision: str, out: Path, extra: list[str] = ()) -> None:
    """The model builder's export of `folder` into `out` with BUILDER's options and `extra`, its own chatter
    (per-tensor bars, prints) swallowed: what the user sees is our one progress line."""
    from onnxruntime_genai.models import builder

    chatter = io.StringIO()
    # The quantizer logs a line per MatMul (and an ERROR for each table it leaves unquantized, which is no failure:
    # a real one raises) through handlers made before the redirect.
    logging.disable(logging.ERROR)
    with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        try:
            args = (str(folder), str(folder), str(out), precision, "cpu", str(out / ".cache"))
            # hf_token=false: the source is a local folder; nothing is looked up on the Hub.
            options = builder.parse_extra_options(*args, ["hf_token=false", *BUILDER, *extra])
            builder.create_model(*args, **options)
        except Exception as err:  # noqa: BLE001 — the builder raises what it likes for a model it cannot export
            tail = chatter.getvalue().strip().splitlines()[-1:] or [""]
            why = f"{type(err).__name__}: {err} {tail[0]}".strip()
            raise PolicyError(f"engine {NAME} cannot export {folder}: {why}") from None
        finally:
            logging.disable(logging.NOTSET)
    shutil.rmtree(out / ".cache", ignore_errors=True)  # the builder's scratch, not part of the export


def export(folder: Path, weights: str) -> Path:
    """The engine's export of `folder` at `weights`, made once (export.exported: keyed, written whole). A
    `toolpath compress` folder's weights are its packed codes (packed_codes.py); `weights` names them."""
    packed = packed_codes.layout(folder) is not None
    key = export_key(folder, NAME, version(), weights, source_digest(folder), BUILDER)

    def make(tmp: Path) -> None:
        with Progress(f"exporting {folder.name} for {NAME} at {weights} (first use only)") as line:
            if packed:
                placed = packed_codes.export_packed(folder, tmp, _build, ACCURACY_LEVEL)
                line.close(f"{placed} packed weights as stored, under {models_dir() / key}")
            else:
                _build(folder, PRECISION[weights], tmp)
                line.close(f"under {models_dir() / key}")

    try:
        return exported(models_dir(), key, make)
    except OSError as err:
        raise PolicyError(f"engine {NAME}: cannot write its export of {folder}: {err}") from None


def _refusal(folder: Path) -> str:
    """Why this engine cannot run `folder`, or ""."""
    from ..vlm import folder_is_vlm

    if folder_is_vlm(folder):
        return "it is a vision-language model (the engine runs text models)"
    entry = packed_codes.layout(folder)
    if entry is not None and packed_codes.refusal(entry):
        return ("it is a `toolpath compress` folder whose packed weights the engine cannot run: "
                f"{packed_codes.refusal(entry)}")
    config = json.loads((folder / "config.json").read_text())
    heads = config.get("num_attention_heads") or 1
    head = config.get("head_dim") or (config.get("hidden_size") or 0) // heads
    if head % 16:  # the CPU attention kernel's constraint
        return f"its attention heads have {head} dimensions (the engine's kernel needs a multiple of 16)"
    return ""


def load(folder: Path, spec: ModelSpec, name: str, options: Any) -> EnginePolicy:
    """The engine's policy over a checked local text-model folder, exported once; `options` are ort_kind.Options
    (its KIND calls this)."""
    started = time.perf_counter()
    for option in ("kv_cache", "decoding"):
        if spec.options.get(option):
            raise PolicyError(f"model.options.{option} needs engine torch; model.options.engine is {NAME}")
    reason = _refusal(folder)
    if reason:
        raise PolicyError(f"model.options.engine: {NAME} cannot run {name}: {reason}; use engine torch")
    import onnxruntime_genai as og
    from transformers import AutoConfig, AutoTokenizer

    weights = _weights(folder, spec, name)
    out = export(folder, weights)
    threads = options.threads or os.cpu_count() or 1
    try:
        config = og.Config(str(out))
        config.clear_providers()  # the CPU
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        model = Loaded(og.Model(config), AutoConfig.from_pretrained(str(folder)))
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except Exception as err:  # noqa: BLE001 — ONNX Runtime raises its own RuntimeError subclasses
        raise PolicyError(f"engine {NAME} cannot load its export {out}: {err}") from None
    policy = EnginePolicy(model, tokenizer, spec, name, time.perf_counter() - started,
                          shape=json.loads((out / "genai_config.json").read_text())["model"])
    policy.weights = weights
    policy.export = out
    return policy


@dataclass
class Loaded:
    """What EnginePolicy holds as its `model`: the engine's model, and the source's transformers config that
    whoever asks a local model about itself reads (serve counts a request against max_position_embeddings)."""

    engine: Any
    config: Any


class EnginePolicy(HFPolicy):
    """HFPolicy whose generation runs on ONNX Runtime GenAI."""

    engine = NAME

    def __init__(self, *args, shape: dict, **kwargs):
        # The export's context and the bytes one token's keys and values take (fp32, every layer): what bounds the
        # generator kept for prefix reuse, which holds its KV cache for its whole max_length.
        decoder = shape["decoder"]
        self.context = int(shape.get("context_length") or 2048)
        self.token_bytes = 2 * 4 * decoder["num_hidden_layers"] * decoder["num_key_value_heads"] * decoder["head_size"]
        super().__init__(*args, **kwargs)

    def _prefix_cache_setting(self):
        """model.options.prefix_cache_mb: the last call's generator is kept (see EnginePrefix); off at 0."""
        from ..prefix_cache import DEFAULT_MB

        mb = self.spec.options.get("prefix_cache_mb", DEFAULT_MB)
        tokens = min(self.context, int(mb * 2**20) // self.token_bytes) if mb else 0
        return EnginePrefix(tokens) if tokens > 1 else None

    def _generate(self, inputs: dict, kwargs: dict):
        import onnxruntime_genai as og
        import torch

        from ..hf import GENERATE_LOCK

        ids = inputs["input_ids"][0].tolist()
        max_new = int(kwargs["max_new_tokens"])
        state = kwargs.get("cache")  # an EnginePrefix lookup's State, when prefix reuse is on
        sampling = bool(kwargs.get("do_sample"))
        if state is not None and (sampling or len(ids) + max_new > state.capacity):
            state.drop()  # a sampling call, or one longer than the kept generator holds, starts afresh
        params = og.GeneratorParams(self.model.engine)
        length = max(state.capacity, len(ids) + max_new) if state is not None and not sampling else len(ids) + max_new
        search: dict[str, Any] = dict(max_length=min(length, self.context), do_sample=sampling)
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
        # The sequence as one preallocated tensor that stopping criteria see a growing view of: building a fresh
        # tensor of the whole sequence per token would make a long answer's cost grow with its square.
        sequence = torch.tensor([ids + [0] * max_new]) if criteria is not None else None
        with GENERATE_LOCK:
            reused = state.reuse.reused if state is not None and state.generator is not None else 0
            generator = state.generator if reused else og.Generator(self.model.engine, params)
            try:
                if reused:
                    generator.rewind_to(reused)  # its keys and values past the shared prefix are dropped
                generator.append_tokens(ids[reused:])
            except Exception as err:  # noqa: BLE001 — past the context, mostly
                raise PolicyError(f"{self.name}: engine {NAME} refused the prompt of {len(ids)} tokens: "
                                  f"{err}") from None
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
                if criteria is not None:
                    sequence[0, len(ids) + len(new) - 1] = token
                    if bool(criteria(sequence[:, :len(ids) + len(new)], None).all()):
                        break
            if state is not None and not sampling:
                state.keep(generator, search["max_length"], len(ids) + len(new) - 1)  # the last token is unread
        if streamer is not None:
            streamer.end()
        return torch.tensor([ids + new]), None


class Stops:
    """transformers' stop_strings, on token ids: generation ends once the text made so far contains a stop string
    that the newest token completed (one that ran past it is cut by the format's reader, as with torch).
    Only the last `window` tokens are decoded per step, so the check costs the same at every token: a stop string
    of n characters lies within its last 4n tokens (a token adds at least one byte of text; a character is at most
    four), and the margin keeps a tokenizer's start-of-text rules (a dropped leading space, a character cut
    mid-bytes) away from where the stop string can begin."""

    MARGIN = 8

    def __init__(self, tokenizer, stops):
        self.tokenizer, self.stops = tokenizer, [s for s in stops if s]
        longest = max(map(len, self.stops), default=0)
        self.longest, self.window = longest, 4 * longest + self.MARGIN

    def hit(self, new: list[int]) -> bool:
        if not self.stops:
            return False
        tail = new[-self.window:]
        text = self.tokenizer.decode(tail, skip_special_tokens=False)
        before = self.tokenizer.decode(tail[:-1], skip_special_tokens=False) if len(tail) > 1 else ""
        # A stop string the newest token completed ends past what the text was without it (the longest one's
        # length back, so a character the newest token finished, shown before as a replacement, still counts).
        start = max(0, len(before) - self.longest)
        return any(s in text[start:] for s in self.stops)


class EnginePrefix:
    """Prefix reuse on the engine, with the torch backend's lookup/store interface (prefix_cache.PrefixCache), so
    HFPolicy.respond counts prefilled and reused tokens the same way. The engine keeps a call's keys and values
    inside its generator, so the state kept is one generator and the tokens it has read (the last call's: the next
    step of an episode, or the next episode with the same system prompt and tools); a prompt that starts the same
    way rewinds it to the shared prefix and appends only the rest. Its size is `capacity` tokens of keys and values,
    what prefix_cache_mb allows. Calls run one at a time (hf.GENERATE_LOCK); a lookup takes the generator out, so two
    calls never extend the same one."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._generator, self._ids = None, []
        self._lock = threading.Lock()

    def lookup(self, input_ids):
        from ..prefix_cache import Reuse, common_prefix

        with self._lock:
            generator, ids = self._generator, self._ids
            self._generator, self._ids = None, []
        n = 0
        if generator is not None:
            n = min(common_prefix(ids, input_ids), input_ids.shape[0] - 1)
        state = State(self, generator if n > 0 else None, self.capacity)
        state.reuse = Reuse(state, n if state.generator is not None else 0)
        return state.reuse

    def store(self, ids, state: State) -> None:
        if state.generator is None or state.length <= 0 or state.capacity > self.capacity:
            return  # nothing read, or a generator made larger than the bound for one long call
        with self._lock:
            self._generator, self._ids = state.generator, ids[:state.length].clone()


class State:
    """One call's share of an EnginePrefix: the generator it may extend (None: a fresh one) and what it read."""

    def __init__(self, prefix: EnginePrefix, generator, capacity: int):
        self.prefix, self.generator, self.capacity = prefix, generator, capacity
        self.length = 0
        self.reuse = None

    def drop(self) -> None:
        self.generator = None
        self.reuse.reused = 0

    def keep(self, generator, capacity: int, length: int) -> None:
        self.generator, self.capacity, self.length = generator, capacity, length
