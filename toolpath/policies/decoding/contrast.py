"""Contrastive decoding as a transformers LogitsProcessor that owns its contrastive branch.

    out = (1 + α)·l(v) − α·l(v')     where log p(y|v) ≥ log β + max_y' log p(y'|v),   −inf elsewhere

l(v) are the scores generate hands the processor (the model's logits on the real image); l(v') come from this
processor's own forward passes of the same model on the distorted image v' (VCD: diffusion noise; SHIELD: an
adversarial perturbation), with its own KV cache: the whole prompt on the first call, then the one new token per
step. The cut keeps the tokens the real image finds plausible (VCD's "adaptive plausibility constraint", its
version 2: on logits, which is the same cut on log-probabilities since the log-partition cancels). Because the
processor changes the scores rather than the sampler, it applies to greedy decoding as much as to sampling
(the reference's patched `sample` only ran when sampling); generate places custom processors before its
temperature/top-k/top-p warpers, so the contrast is taken on unwarped logits, as in the reference.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
from typing import Any

from transformers import LogitsProcessor

# The keys of a processor's output that are the text; every other one is an image input given at prefill only.
TEXT_KEYS = ("input_ids", "attention_mask")


def contrast(logits: Any, logits_cd: Any, alpha: float, beta: float):
    """The contrastive scores for one step: rows are sequences, columns the vocabulary."""
    import torch

    cutoff = math.log(beta) + logits.max(dim=-1, keepdim=True).values
    out = (1 + alpha) * logits - alpha * logits_cd.to(logits.dtype)
    return out.masked_fill(logits < cutoff, -torch.inf)


class ContrastiveLogits(LogitsProcessor):
    """LogitsProcessor: `(input_ids, scores) -> scores`; `passes` counts its forward passes of the model."""

    def __init__(self, model: Any, inputs: dict, pixel_values_cd: Any, *, alpha: float, beta: float,
                 on_branch: Any = None, tally: Any = None):
        self.model = model
        self.prompt_ids = inputs["input_ids"]
        self.prompt_mask = inputs.get("attention_mask")
        # The distorted image replaces the real one; every other image input (sizes, masks) goes along unchanged.
        self.image_inputs = {k: v for k, v in inputs.items() if k not in TEXT_KEYS}
        self.image_inputs["pixel_values"] = pixel_values_cd
        self.alpha, self.beta = alpha, beta
        self.on_branch = on_branch  # a context manager factory: hooks know they run for the contrastive branch
        self.tally = tally
        self.passes = 0
        self._keep_last = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.reset()

    def reset(self) -> None:
        """Forget the branch's cache: the next call starts a new sequence."""
        self._cache = None
        self._mask = None
        self._seen = 0

    def __call__(self, input_ids: Any, scores: Any):
        import torch

        started = time.perf_counter()
        if self._cache is None or input_ids.shape[1] <= self._seen:
            self._prefill_checks(input_ids)
            from transformers import DynamicCache

            self.reset()
            self._cache = DynamicCache()
            mask = self.prompt_mask if self.prompt_mask is not None else torch.ones_like(self.prompt_ids)
            extra = input_ids.shape[1] - self.prompt_ids.shape[1]
            self._mask = torch.cat([mask, mask.new_ones(mask.shape[0], extra)], dim=1)
            kwargs = dict(self.image_inputs)
        else:
            extra = input_ids.shape[1] - self._seen
            self._mask = torch.cat([self._mask, self._mask.new_ones(self._mask.shape[0], extra)], dim=1)
            kwargs = {}
        new_ids = input_ids[:, self._seen:]
        if self._keep_last:
            kwargs["logits_to_keep"] = 1
        with torch.no_grad(), (self.on_branch() if self.on_branch else contextlib.nullcontext()):
            out = self.model(input_ids=new_ids, attention_mask=self._mask, cache=self._cache, use_cache=True, **kwargs)
        self._seen = input_ids.shape[1]
        self.passes += 1
        result = contrast(scores, out.logits[:, -1, :].float(), self.alpha, self.beta)
        if self.tally is not None:
            self.tally.add(passes=1, seconds=time.perf_counter() - started)
        return result

    def _prefill_checks(self, input_ids: Any) -> None:
        if input_ids.shape[0] != self.prompt_ids.shape[0]:
            raise ValueError(f"decoding: generate runs {input_ids.shape[0]} sequences for "
                             f"{self.prompt_ids.shape[0]} prompts; contrastive decoding keeps one branch per prompt "
                             "(no beam search or num_return_sequences > 1)")
        n = self.prompt_ids.shape[1]
        if input_ids.shape[1] < n or not bool((input_ids[:, :n].to(self.prompt_ids.device) == self.prompt_ids).all()):
            raise ValueError("decoding: generate was given other input_ids than the inputs the decoding was "
                             "prepared with; prepare it for each call")

