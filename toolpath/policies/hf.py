"""Local transformers models: a safetensors folder or a single GGUF file, on the CPU or a GPU.

Tool calls use the run's response format (formats.py: JSON tool calls by default, or DeepEyesV2's tags),
taught in the system prompt, cut at the format's stop sequences, and read back tolerantly.
A GGUF file is de-quantized by transformers on first use (tens of seconds) and the result is cached as a
safetensors folder under $TOOLPATH_HOME/models/<name>-<sha256 prefix>, so every later load is a plain,
fast `from_pretrained` of that folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..spec import ModelSpec
from ..state import Message
from .base import PolicyError, Response
from .formats import FORMATS

_LOCK = threading.Lock()  # one generate() at a time per process: the CPU is the bottleneck anyway


def _home() -> Path:
    return Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def converted_dir(gguf: Path) -> Path:
    return _home() / "models" / f"{gguf.stem}-{_file_digest(gguf)[:16]}"


def _quiet_transformers() -> None:
    # Progress bars and advice from transformers would interleave with toolpath's own progress lines.
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def convert_gguf(gguf: Path, log=print) -> Path:
    """De-quantize a GGUF file once into a safetensors folder; returns the folder (cached)."""
    target = converted_dir(gguf)
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log(f"converting {gguf.name} to safetensors under {target} (first use only)")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The de-quantized weights are plain float tensors now; transformers only refuses to save because it still
    # remembers the GGUF quantizer.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    try:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        os.replace(tmp, target)  # atomic: a parallel loader sees either nothing or the whole folder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").is_file():
            raise
    return target


class HFPolicy:
    def __init__(self, model: Any, tokenizer: Any, spec: ModelSpec, name: str, load_seconds: float = 0.0):
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.name = name
        self.load_seconds = load_seconds
        template = getattr(tokenizer, "chat_template", None) or ""
        self._tool_role = "tool" in template  # templates that know a tool role get one; others see a user turn

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> "HFPolicy":
        """`hf:PATH`: a transformers model folder (safetensors) or a .gguf file."""
        return cls.from_path(spec.name.partition(":")[2], spec)

    @classmethod
    def from_path(cls, path: str, spec: ModelSpec, name: str | None = None) -> "HFPolicy":
        p = Path(path).expanduser()
        if not p.exists():
            raise PolicyError(f"hf model not found: {p}")
        started = time.perf_counter()
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as err:
            raise PolicyError(f"hf models need torch and transformers: {err} (pip install 'toolpath[local]')") from err
        _quiet_transformers()
        import sys

        folder = convert_gguf(p, log=lambda m: print(f"toolpath: {m}", file=sys.stderr)) if p.suffix == ".gguf" else p
        if not (folder / "config.json").is_file():
            raise PolicyError(f"hf model folder {folder} has no config.json")
        try:
            tok = AutoTokenizer.from_pretrained(str(folder))
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        except (OSError, ValueError) as err:
            raise PolicyError(f"cannot load hf model from {folder}: {err}") from err
        model.eval()
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        return cls(model, tok, spec, name or f"hf:{path}", time.perf_counter() - started)

    def _chat(self, messages: list[Message], tools: list[dict], fmt=FORMATS["json"]) -> list[dict]:
        chat = []
        guide = fmt.guide(tools) if tools else ""
        demo = fmt.demonstration(tools) if self.spec.options.get("demonstration", True) else []
        for m in messages:
            if m.role == "system":
                chat.append({"role": "system", "content": (m.content + "\n\n" + guide).strip()})
                chat.extend(demo)
                guide, demo = "", []
            elif m.role == "tool":
                if self._tool_role:
                    chat.append({"role": "tool", "content": m.content})
                else:
                    chat.append({"role": "user", "content": fmt.render_observation(m.name or "", m.content)})
            elif m.role == "assistant":
                # Its calls go back in the grammar the model wrote them in, so it sees its own turn.
                chat.append({"role": "assistant", "content": fmt.render_assistant(m.content, m.tool_calls)})
            else:
                text = m.content
                if m.images:
                    text += "".join(f"\n[image: {ref.name or ref.sha256[:12]}]" for ref in m.images)
                chat.append({"role": m.role, "content": text})
        if guide:
            chat[0:0] = [{"role": "system", "content": guide}] + demo
        return chat

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        import torch

        started = time.perf_counter()
        fmt = generation.get("format") or FORMATS["json"]
        enc = self.tokenizer.apply_chat_template(self._chat(messages, tools, fmt), add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        temperature = float(generation.get("temperature", self.spec.temperature))
        max_new = int(generation.get("max_new_tokens", self.spec.max_new_tokens))
        kwargs: dict[str, Any] = dict(max_new_tokens=max_new, pad_token_id=self.tokenizer.eos_token_id,
                                      stop_strings=list(fmt.stop), tokenizer=self.tokenizer)
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=float(self.spec.options.get("top_p", 0.95)))
            torch.manual_seed(int(generation.get("seed", 0)))
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with _LOCK, torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        n_in = enc["input_ids"].shape[1]
        new = out[0, n_in:]
        raw = self.tokenizer.decode(new, skip_special_tokens=True)
        parsed = fmt.parse(raw, id_prefix=f"call{sum(1 for m in messages if m.role == 'assistant') + 1}")
        return Response(text=parsed.content, tool_calls=parsed.calls, issues=parsed.issues, answer=parsed.answer, raw=raw,
                        tokens_in=int(n_in), tokens_out=int(new.shape[0]), latency_s=time.perf_counter() - started)
