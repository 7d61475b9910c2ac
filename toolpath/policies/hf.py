"""Local transformers models: a safetensors folder or a single GGUF file, on the CPU or a GPU. A folder whose
config describes a vision-language model loads with its processor and sees the conversation's images as pixels
(vlm.py: loading, weights, context; vlm_chat.py: the chat of content parts); every generation goes through
`HFPolicy._generate(inputs, kwargs)` with the processor's full inputs. A text model keeps earlier calls' KV state
and prefills only what a prompt adds to the longest prefix it has seen (prefix_cache.py, `prefix_cache_mb`).

A text model whose chat template takes tools is prompted through it (`apply_chat_template(…, tools=…)`, earlier
calls and results in the template's own message shapes) and read in its family's call format (formats/native.py),
unless `model.options.tool_format` is `toolpath` or the run speaks a grammar of its own. Otherwise tool calls use
the run's response format (formats/: JSON tool calls by default, or DeepEyesV2's tags), taught in the system
prompt, cut at the format's stop sequences, and read back tolerantly.
A GGUF file is de-quantized by transformers on first use (tens of seconds) and the result is cached as a
safetensors folder under $TOOLPATH_HOME/models/<name>-<sha256 prefix>, so every later load is a plain,
fast `from_pretrained` of that folder.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..paths import home, models_dir
from ..progress import Progress
from ..quiet import quiet_model_loading
from ..spec import ModelSpec
from ..state import Message
from .base import PolicyError, Response
from .formats import FORMATS
from .formats.cut_calls import with_cut_call
from .formats.json import CLOSE, OPEN, JSONFormat
from .formats.native import NATIVE, family, openai_tools, opener, repaired_template, takes_tools, template_messages
from .kvcache import held_bytes

GENERATE_LOCK = threading.Lock()  # one generate() at a time per process: the CPU is the bottleneck anyway


def converted_dir(gguf: Path, digest: str | None = None) -> Path:
    """Where a GGUF file's safetensors conversion is cached; `digest`: its sha256 when already known (a pinned
    catalog model), which saves hashing a large file on every load."""
    from .fingerprint import file_digest

    return models_dir() / f"{gguf.stem}-{(digest or file_digest(gguf))[:16]}"


class gguf_progress:
    """While converting a GGUF file, transformers' per-tensor tqdm bar (hundreds of lines in a log) is replaced
    by one stage of ours (toolpath/progress.py: tensors converted, rate, time left)."""

    def __init__(self, label: str):
        self.label = label
        self.line: Progress | None = None
        self._module = None
        self._saved = None

    def _tqdm(self, iterable, desc=None, total=None, **_):
        items = list(iterable)
        self.line.set_total(total or len(items))
        for item in items:
            yield item
            self.line.update(1)

    def __enter__(self) -> gguf_progress:
        self.line = Progress(self.label, 0, unit="tensors")
        try:
            import transformers.modeling_gguf_pytorch_utils as module
        except ImportError:
            return self
        if hasattr(module, "tqdm"):
            self._module, self._saved = module, module.tqdm
            module.tqdm = self._tqdm
        return self

    def __exit__(self, kind, *_) -> None:
        if self._module is not None:
            self._module.tqdm = self._saved
        if kind is not None:  # a failure or Ctrl-C ends the line saying so; success is closed by the caller
            self.line.__exit__(kind)


def convert_gguf(gguf: Path, digest: str | None = None) -> Path:
    """De-quantize a GGUF file once into a safetensors folder; returns the folder (cached). Progress is one stage
    of ours on stderr (toolpath/progress.py), not transformers' bar."""
    target = converted_dir(gguf, digest)
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with gguf_progress(f"converting {gguf.name} to safetensors under {target} (first use only)") as progress:
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
    progress.line.close(f"written to {target}")
    return target


# The transcript a model without a chat template sees: the system text, then `User: …` / `Assistant: …` turns,
# ending with `Assistant:` for it to continue; generation stops where it starts a user turn of its own.
PLAIN_TURN = "\nUser:"


def plain_prompt(chat: list[dict]) -> str:
    lines = []
    for m in chat:
        if m["role"] == "system":
            lines.append(m["content"].strip())
        else:
            lines.append(f"{'Assistant' if m['role'] == 'assistant' else 'User'}: {m['content'].strip()}")
    return "\n\n".join(lines) + "\n\nAssistant:"


class HFPolicy:
    """A local transformers model: a text model (tokenizer + causal LM) or a vision-language model (processor +
    image-text-to-text model, `is_vlm`), which is given the conversation's images as pixels (vlm_chat.py)."""

    engine = "torch"  # what runs its forward passes (engines/): serve's model card and `models list` name it

    def __init__(self, model: Any, tokenizer: Any, spec: ModelSpec, name: str, load_seconds: float = 0.0,
                 processor: Any = None):
        self.model = model
        self.tokenizer = tokenizer
        self.processor = processor  # a VLM's processor (images -> pixel values, placeholders); None for text models
        self.is_vlm = processor is not None
        self.spec = spec
        self.name = name
        self.load_seconds = load_seconds
        template = (getattr(processor, "chat_template", None) if self.is_vlm else None) \
            or getattr(tokenizer, "chat_template", None) or ""
        if isinstance(template, dict):  # a processor with several named templates: its default one
            template = template.get("default") or ""
        if not self.is_vlm and takes_tools(template):
            template = repaired_template(template)
            tokenizer.chat_template = template  # what _native_inputs renders through
        self.template = template
        self._tool_role = "tool" in template  # templates that know a tool role get one; others see a user turn
        self.plain = not template  # a base model without a chat template is prompted as a plain transcript
        self.tool_format = self._tool_format_setting()
        self.traits = self._read_template() if self.is_vlm else None
        if self.is_vlm:
            from .vlm_chat import control_tokens

            self._control_tokens = control_tokens(processor)
        self.kv_cache = self._kv_cache_setting()
        self.decoding = self._decoding_setting()
        self.prefix = self._prefix_cache_setting()

    def _tool_format_setting(self) -> str:
        """model.options.tool_format: auto (the model's own when its template takes tools), native or toolpath.
        `native` for a model that has no tool-taking template is refused when it loads, before a run starts."""
        setting = self.spec.options.get("tool_format") or "auto"
        if setting == "native" and (self.is_vlm or not takes_tools(self.template)):
            raise PolicyError(f"model.options.tool_format: native needs a text model whose chat template takes "
                              f"tools; {self.name}'s does not (use auto or toolpath)")
        return setting

    def native(self, fmt) -> bool:
        """Whether this call is prompted through the model's own template and tool format: only in place of
        toolpath's default JSON grammar; a run that speaks another grammar (deepeyes, ScaleCUA) keeps it."""
        return (self.tool_format != "toolpath" and not self.is_vlm and fmt.name == "json"
                and takes_tools(self.template))

    def _prefill(self, fmt, tool_choice: Any) -> str:
        """The start of the assistant turn when a call is forced (tool_choice `required` or {"name": …}): the
        family's call opener, so the model's reply can only go on as a call."""
        if tool_choice in (None, "auto", "none") or self.is_vlm or fmt.name not in ("json", "native"):
            return ""
        name = tool_choice.get("name") if isinstance(tool_choice, dict) else None
        return opener(family(self.template) if self.native(fmt) else "hermes", name)

    def _decoding_setting(self):
        """model.options.decoding (policies/decoding) as its kind and typed Options, read once for every call:
        contrastive and encoder-side decoding act on an image, so a text-only model is refused when it loads,
        before a run starts."""
        chosen = self._model_settings().decoding
        if chosen is None:
            return None
        if not self.is_vlm:
            raise PolicyError(f"model.options.decoding: {chosen.kind} needs a vision-language model; "
                              f"{self.name} is text-only")
        return chosen

    def _model_settings(self):
        """The spec's kind settings (settings.py: validated once, remembered by the spec); a bad one is a
        PolicyError, for a spec that came straight to the backend rather than through policies.load."""
        from .settings import model_settings

        try:
            return model_settings(self.spec)
        except ValueError as err:
            raise PolicyError(str(err)) from None

    def _prefix_cache_setting(self):
        """model.options.prefix_cache_mb (prefix_cache.py): earlier calls' KV state, kept for the next prompt that
        starts the same way. Off at 0, for a VLM (the same placeholder ids stand for different images), with a
        kv_cache kind or a decoding method (each owns the cache and the forward passes), and for a model whose cache
        cannot be cut back to a prefix."""
        from .prefix_cache import DEFAULT_MB, PrefixCache, supports

        mb = self.spec.options.get("prefix_cache_mb", DEFAULT_MB)
        if not mb or self.is_vlm or self.kv_cache or self.decoding or self.model is None or not supports(self.model):
            return None
        return PrefixCache(int(mb * 2**20))

    def _read_template(self):
        from .vlm_chat import TemplateTraits, read_template

        marker = self.processor.image_token
        if self.plain:  # a plain transcript: each image is its placeholder on a line of its own
            return TemplateTraits(marker=marker, system=True, tool=None)
        return read_template(lambda chat: self.processor.apply_chat_template(
            chat, chat_template=self.template, tokenize=False, add_generation_prompt=True), marker, self.name,
            tool_role=self._tool_role)

    # ---- model.options.kv_cache (toolpath/policies/kvcache): checked at load, a fresh cache per generate() ----
    def _kv_cache_setting(self):
        """The kv_cache Setting (settings.py: validated once), refused here if this model cannot serve it."""
        from .kvcache import refusal
        from .settings import kind_of

        setting = self._model_settings().kv_cache
        if setting is None:
            return None
        reason = refusal(kind_of("kv_cache", setting.kind), self.model.config.get_text_config())  # a VLM: its LM's
        if reason:
            raise PolicyError(f"model.options.kv_cache: {setting.kind} cannot run with {self.name}: {reason}")
        return setting

    def _new_kv_cache(self):
        if self.kv_cache is None:
            return None
        from .kvcache import attach

        return attach(self.model, self.kv_cache.kind, self.kv_cache.options)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> HFPolicy:
        """`hf:PATH`: a transformers model folder (safetensors) or a .gguf file."""
        return cls.from_path(spec.name.partition(":")[2], spec)

    @classmethod
    def from_path(cls, path: str, spec: ModelSpec, name: str | None = None, digest: str | None = None) -> HFPolicy:
        """`digest`: the sha256 of a .gguf file when already known (it names the conversion cache)."""
        p = Path(path).expanduser()
        if not p.exists():
            raise PolicyError(f"hf model not found: {p}")
        started = time.perf_counter()
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as err:
            raise PolicyError(f"hf models need torch and transformers: {err} (pip install 'toolpath[local]')") from err
        quiet_model_loading()
        folder = convert_gguf(p, digest=digest) if p.suffix == ".gguf" else p
        if not (folder / "config.json").is_file():
            raise PolicyError(f"hf model folder {folder} has no config.json")
        from safetensors import SafetensorError

        from .model_files import ModelFileError, check_model_folder

        try:
            check_model_folder(folder)  # pickle weights are refused, safetensors headers checked, before loading
        except ModelFileError as err:
            raise PolicyError(str(err)) from None
        from .molm.model import is_graph_lm

        if is_graph_lm(folder):  # a graph-language model reads the task's molecules: its own policy
            from .graph_lm import GraphLMPolicy

            return GraphLMPolicy.from_folder(folder, name or f"hf:{path}")
        from .engines import load_engine_policy

        # model.options.engine, or the default's choice: the checked folder may run on another engine
        policy = load_engine_policy(folder, spec, name or f"hf:{path}")
        if policy is not None:
            return policy
        from .quant import apply_from_spec, load_dtype  # low-bit or bf16 weights when the spec's options ask
        from .vlm import apply_weights_to_language_side, folder_is_vlm, load_vlm

        processor = None
        try:
            if folder_is_vlm(folder):
                model, processor = load_vlm(folder, load_dtype(spec))
                tok = processor.tokenizer
            else:
                tok = AutoTokenizer.from_pretrained(str(folder))
                if (folder / "compression.json").is_file():  # written by `toolpath compress`: maybe packed weights
                    from .packed_weights import load_packed

                    model = load_packed(folder)
                else:
                    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=load_dtype(spec),
                                                                 use_safetensors=True)
        except (OSError, ValueError, SafetensorError) as err:
            raise PolicyError(f"cannot load hf model from {folder}: {err}") from err
        model.eval()
        weights = apply_weights_to_language_side(model, spec) if processor is not None else apply_from_spec(model, spec)
        if not os.environ.get("OMP_NUM_THREADS"):  # a thread count the user set is theirs to keep
            torch.set_num_threads(max(1, os.cpu_count() or 1))
        policy = cls(model, tok, spec, name or f"hf:{path}", time.perf_counter() - started, processor=processor)
        policy.weights = weights
        return policy

    def _turns(self, messages: list[Message], tools: list[dict], fmt) -> list:
        """The conversation as turns in the run's grammar: the tool guide joins the system prompt, followed by the
        format's worked example; assistant turns are their calls rendered back as the model wrote them."""
        from .vlm_chat import Turn

        turns = []
        guide = fmt.guide(tools) if tools else ""
        demo = [Turn(d["role"], d["content"]) for d in fmt.demonstration(tools)] \
            if self.spec.options.get("demonstration", True) else []
        for i, m in enumerate(messages, 1):
            source = f"message {i}, {m.role}" + (f" {m.name}" if m.name else "")
            if m.role == "system":
                turns.append(Turn("system", (m.content + "\n\n" + guide).strip(), list(m.images), m.name or "", source))
                turns.extend(demo)
                guide, demo = "", []
            elif m.role == "assistant":
                # Its calls go back in the grammar the model wrote them in, so it sees its own turn.
                turns.append(Turn("assistant", fmt.render_assistant(m.content, m.tool_calls), list(m.images),
                                  m.name or "", source))
            else:
                turns.append(Turn(m.role, m.content, list(m.images), m.name or "", source))
        if guide:
            turns[0:0] = [Turn("system", guide)] + demo
        return turns

    def _chat(self, messages: list[Message], tools: list[dict], fmt=FORMATS["json"]) -> list[dict]:
        """The chat a text model sees: images are named, since it cannot see them."""
        chat = []
        for t in self._turns(messages, tools, fmt):
            if t.role == "tool":
                if self._tool_role:
                    chat.append({"role": "tool", "content": t.text})
                else:
                    chat.append({"role": "user", "content": fmt.render_observation(t.name, t.text)})
            elif t.role in ("system", "assistant"):
                chat.append({"role": t.role, "content": t.text})
            else:
                text = t.text + "".join(f"\n[image: {ref.name or ref.sha256[:12]}]" for ref in t.images)
                chat.append({"role": t.role, "content": text})
        return chat

    def _vlm_chat(self, messages: list[Message], tools: list[dict],
                  fmt=FORMATS["json"]) -> tuple[list[dict], list[str]]:
        """The chat a vision-language model sees (content parts with the images read as pixels) and the label of
        each image in order; PolicyError naming an image that cannot be read."""
        from .vlm_chat import build_chat

        return build_chat(self._turns(messages, tools, fmt), self.traits, fmt.render_observation)

    def _native_inputs(self, messages: list[Message], tools: list[dict], prefill: str) -> dict:
        """The prompt the model's own template makes of the conversation and the tools, ending in `prefill`."""
        try:
            text = self.tokenizer.apply_chat_template(template_messages(messages), tools=openai_tools(tools) or None,
                                                      add_generation_prompt=True, tokenize=False)
        except Exception as err:  # noqa: BLE001 — a template raises what it likes (jinja2's TemplateError, its own)
            raise PolicyError(f"{self.name}: its chat template refused the conversation: {err}") from None
        return dict(self.tokenizer(text + prefill, add_special_tokens=False, return_tensors="pt"))

    def _inputs(self, messages: list[Message], tools: list[dict], fmt,
                tool_choice: Any = None) -> tuple[dict, list[str]]:
        """The model's full inputs (input_ids, attention_mask and, for a VLM, pixel_values and whatever else its
        processor makes: image_sizes, image_grid_thw...) and the labels of the images in them. A forced
        tool_choice ends the prompt with the call's opener (_prefill)."""
        prefill = self._prefill(fmt, tool_choice)
        if self.native(fmt):
            return self._native_inputs(messages, tools, prefill), []
        if prefill and not self.is_vlm:
            chat = self._chat(messages, tools, fmt)
            text = plain_prompt(chat) if self.plain else self.tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=False)
            return dict(self.tokenizer(text + prefill, add_special_tokens=self.plain, return_tensors="pt")), []
        if not self.is_vlm:
            chat = self._chat(messages, tools, fmt)
            if self.plain:
                return dict(self.tokenizer(plain_prompt(chat), return_tensors="pt")), []
            return dict(self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt",
                                                           return_dict=True)), []
        from .vlm_chat import as_plain_text, check_placeholders, escape_control_tokens, without_text

        chat, labels = self._vlm_chat(messages, tools, fmt)
        chat = escape_control_tokens(chat, self._control_tokens)
        images = [p["image"] for m in chat if not isinstance(m["content"], str) for p in m["content"]
                  if p.get("type") == "image"]
        try:
            if self.plain:
                enc = self.processor(text=plain_prompt(as_plain_text(chat, self.traits.marker)),
                                     images=[images] if images else None, return_tensors="pt")  # one sample: its images
            else:
                check_placeholders(self.processor.apply_chat_template(
                    without_text(chat), chat_template=self.template, tokenize=False, add_generation_prompt=True),
                    self.traits, labels, self.name)
                enc = self.processor.apply_chat_template(chat, chat_template=self.template, add_generation_prompt=True,
                                                         tokenize=True, return_dict=True, return_tensors="pt")
        except (ValueError, TypeError, IndexError) as err:
            named = f" with its images {', '.join(labels)}" if labels else ""
            raise PolicyError(f"{self.name}: the processor refused the conversation{named}: {err}") from err
        return dict(enc), labels

    def _generation_kwargs(self, generation: dict, fmt, room: int | None) -> dict[str, Any]:
        import torch

        temperature = float(generation.get("temperature", self.spec.temperature))
        max_new = int(generation.get("max_new_tokens", self.spec.max_new_tokens))
        if room is not None:
            max_new = min(max_new, room)  # the answer gets what the context has left
        stops = list(fmt.stop) + list(generation.get("stop") or ()) + ([PLAIN_TURN] if self.plain else [])
        kwargs: dict[str, Any] = dict(max_new_tokens=max_new, pad_token_id=self.tokenizer.eos_token_id)
        if stops:  # transformers refuses an empty list
            kwargs.update(stop_strings=stops, tokenizer=self.tokenizer)
        # A caller that shows the answer as it is made (toolpath serve) hands a transformers streamer, and one that
        # may give up on it a stopping criterion, so a gone client does not hold the model until max_new_tokens.
        for key in ("streamer", "stopping_criteria"):
            if generation.get(key) is not None:
                kwargs[key] = generation[key]
        if temperature > 0:
            top_p = generation.get("top_p", self.spec.options.get("top_p", 0.95))
            kwargs.update(do_sample=True, temperature=temperature, top_p=float(top_p))
            torch.manual_seed(int(generation.get("seed", 0)))
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        return kwargs

    def _generate(self, inputs: dict, kwargs: dict):
        """The one place a generation runs: `inputs` are the processor's (or tokenizer's) full outputs, `kwargs`
        generate()'s options (cache, stop strings, sampling); -> (output ids, the decoding's stats or None).
        A decoding option adds its logits processors and, for the call only, its forward hooks; it is prepared
        outside inference mode (SHIELD's attack needs gradients) and under the same lock."""
        import contextlib

        import torch

        with GENERATE_LOCK:
            decoding = None
            if self.decoding is not None:
                from .decoding import prepare

                decoding = prepare(self.model, self.processor, inputs, self.decoding, home())
                kwargs = {**kwargs, "logits_processor": decoding.logits_processor}
            with decoding.hooks() if decoding is not None else contextlib.nullcontext(), torch.inference_mode():
                out = self.model.generate(**inputs, **kwargs)
        return out, (decoding.stats() if decoding is not None else None)

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        from .vlm import context_room

        started = time.perf_counter()
        fmt = generation.get("format") or FORMATS["json"]
        tool_choice = generation.get("tool_choice")
        inputs, labels = self._inputs(messages, tools, fmt, tool_choice)
        prefill = self._prefill(fmt, tool_choice)
        fmt = NATIVE if self.native(fmt) else fmt  # read (and stopped) in the model's own call format
        n_in = inputs["input_ids"].shape[1]
        room = None
        if self.is_vlm:
            text_config = self.model.config.get_text_config()
            room = context_room(inputs["input_ids"][0].tolist(), getattr(text_config, "max_position_embeddings", None),
                                getattr(self.processor, "image_token_id", None), labels, self.name)
        kwargs = self._generation_kwargs(generation, fmt, room)
        cache = self._new_kv_cache()
        if cache is not None:
            kwargs["cache"] = cache
        reuse = self.prefix.lookup(inputs["input_ids"][0]) if self.prefix is not None else None
        if reuse is not None:
            kwargs["cache"] = reuse.cache
        out, decoding = self._generate(inputs, kwargs)
        if reuse is not None:
            self.prefix.store(out[0], reuse.cache)
        reused = reuse.reused if reuse is not None else 0
        new = out[0, n_in:]
        raw = prefill + self.tokenizer.decode(new, skip_special_tokens=True)
        if self.plain:
            raw = raw.split(PLAIN_TURN, 1)[0].rstrip()  # the model went on to write the next user turn
        for stop in generation.get("stop") or ():  # the caller's own stop sequences end the answer, unshown
            raw = raw.split(stop, 1)[0]
        id_prefix = f"call{sum(1 for m in messages if m.role == 'assistant') + 1}"
        parsed = fmt.parse(raw, id_prefix=id_prefix)
        if int(new.shape[0]) >= kwargs["max_new_tokens"] and isinstance(fmt, JSONFormat):
            parsed = _with_cut_call(fmt, raw, tools, id_prefix) or parsed
        return Response(text=parsed.content, tool_calls=parsed.calls, issues=parsed.issues, answer=parsed.answer,
                        raw=raw, tokens_in=int(n_in), tokens_out=int(new.shape[0]),
                        latency_s=time.perf_counter() - started,
                        cache_bytes=held_bytes(cache) if cache is not None else None, decoding=decoding,
                        prefill_tokens=int(n_in) - reused, reused_tokens=reused)


def _with_cut_call(fmt, raw: str, tools: list[dict], id_prefix: str):
    """The reply read again with its last call closed, when the token limit cut that call after the last
    argument its tool takes (formats/cut_calls.py); None when there is no such call."""
    closed = with_cut_call(raw, tools, OPEN, CLOSE)
    return fmt.parse(closed, id_prefix=id_prefix) if closed is not None else None
