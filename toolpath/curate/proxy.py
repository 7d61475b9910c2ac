"""The proxy model that scores text: any local text model a spec can name (local, local:NAME, hf:PATH), loaded
through the policies, so its weights, conversion, engine and checks are a run's. Curation reads its logits, not
its answers: the next token's after a prompt (AskLLM), or every token's (perplexity).

The engine (ONNX Runtime GenAI) exports with the output head pruned to the last position, which is what AskLLM
reads. It reads one text at a time (its batches need one length) through one kept generator, rewound to the tokens
a prompt shares with the one before: AskLLM's prompts all start with the same worked examples, which are read once.
Torch runs batches of left-padded prompts and gives every position's logits, which perplexity needs: it always runs
on torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .items import CurateError

LOCAL_FORMS = "local, local:NAME or hf:PATH"
KEPT_TOKENS = 2048  # the kept generator's room: shared examples and a text of 512 tokens fit, ~120 MB on the 1.5B


def model_spec(name: str, options: dict):
    """The ModelSpec of --model and its options, checked as a run spec's `model` is; CurateError naming each bad
    field."""
    from pydantic import ValidationError

    from ..spec import ModelSpec

    try:
        return ModelSpec(name=name, options=options)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'model'}: {e['msg'].removeprefix('Value error, ')}"
                             for e in err.errors())
        raise CurateError(f"--model {name}: {problems}") from None


@dataclass
class Proxy:
    name: str
    engine: str  # "torch" or "onnxruntime"
    model: Any  # a transformers causal LM, or the engine's og.Model
    tokenizer: Any
    context: int  # the most tokens a prompt may have
    _kept: Any = field(default=None, repr=False)  # the engine's generator, the ids it holds and its max_length

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def next_logits(self, prompts: list[list[int]], batch: int = 8):
        """The logits of the token after each prompt, (len(prompts), vocab) float32 numpy."""
        import numpy as np

        if self.engine != "torch":
            return np.stack([self._engine_next(ids) for ids in prompts])
        out: list = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # like lengths share a batch
        for start in range(0, len(order), batch):
            chunk = order[start:start + batch]
            for i, row in zip(chunk, self._torch_next([prompts[i] for i in chunk])):
                out[i] = row
        return np.stack(out)

    def _torch_next(self, prompts: list[list[int]]):
        import torch

        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        # Left padding: positions count from each prompt's own first token, as generate() computes them.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits
        return logits[:, -1].float().numpy()

    def _engine_next(self, ids: list[int]):
        import onnxruntime_genai as og

        reused = 0
        if self._kept is not None and len(ids) < self._kept[2]:
            generator, held, room = self._kept
            reused = min(len(os.path.commonprefix([held, ids])), len(ids) - 1)  # works on any lists
        if reused > 0:
            generator.rewind_to(reused)  # what follows the shared tokens is dropped
        else:
            room = min(self.context, max(len(ids) + 1, KEPT_TOKENS))
            params = og.GeneratorParams(self.model)
            params.set_search_options(max_length=room)
            generator = og.Generator(self.model, params)
        generator.append_tokens(ids[reused:])
        self._kept = (generator, ids, room)
        return generator.get_logits().reshape(-1).astype("float32")

    def token_log_probs(self, ids: list[int]) -> list[float]:
        """log P(token | the ones before) for each token of `ids` after the first (torch only)."""
        import torch

        with torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
            chosen = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])
        return chosen[:, 0].tolist()


def checked_spec(name: str, options: dict, every_position: bool = False):
    """The ModelSpec of a proxy model, checked before anything is read or loaded. `every_position`: its scorer
    reads every token's logits, so torch runs it (the engine's export keeps the last position's only)."""
    from ..policies.engines import engine_of

    if every_position:
        if engine_of(options) not in (None, "torch"):
            raise CurateError(f"--engine {engine_of(options)}: this score reads every token's logits, which the "
                              "engine's export drops; use --engine torch (or leave it unset)")
        options = {**options, "engine": "torch"}
    spec = model_spec(name, options)
    if spec.name.partition(":")[0] not in ("local", "hf"):
        raise CurateError(f"--model {name}: curation reads a local model's logits; name {LOCAL_FORMS}")
    return spec


def load_proxy(name: str, options: dict, every_position: bool = False) -> Proxy:
    """The proxy model `name` with model.options `options` (see checked_spec)."""
    from ..policies.base import PolicyError, load

    spec = checked_spec(name, options, every_position)
    try:
        policy = load(spec)
    except PolicyError as err:
        raise CurateError(f"--model {name}: {err}") from None
    if getattr(policy, "is_vlm", False):
        raise CurateError(f"--model {name}: a vision-language model; curation scores text with a text model")
    engine = getattr(policy, "engine", "torch")
    if engine == "torch":
        config = policy.model.config
        context = int(getattr(config, "max_position_embeddings", 0) or 2048)
        return Proxy(policy.name, engine, policy.model, policy.tokenizer, context)
    if engine == "onnxruntime":
        return Proxy(policy.name, engine, policy.model.engine, policy.tokenizer, policy.context)
    raise CurateError(f"--model {name}: engine {engine} gives no logits to read; use --engine torch")
