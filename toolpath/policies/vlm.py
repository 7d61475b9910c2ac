"""Vision-language model folders for the `hf:` backend: telling one from a text model, loading it with its
processor, low-bit weights for its language side, and the context check that names the image that overflows.

A folder is a VLM when its config has a `vision_config` or its architecture is one transformers'
AutoModelForImageTextToText maps (Llava, Idefics3/SmolVLM, Qwen2-VL, ...); it loads through that auto class
and AutoProcessor, so every later code path (placeholders, pixel values, the vision tower) is transformers' own.

Weights (`model.options.weights`) apply to the language model and its head only; the vision tower and the
projector stay as loaded (float32 for fp32, bfloat16 otherwise). Measured on a LLaVA of the tiny VLM's shape
(SmolLM2-135M + a 6-layer, 192-wide CLIP tower at 64 px; 1 thread on the shared 2-core machine): the vision side
is 2.3% of the parameters; quantizing it too saved 3-4 MB of 198 (int8) / 147 (int4) and did not make the image
encoding faster (int8 35 ms against 16 ms as bf16, int4 15 against 13: weight-only kernels gain nothing on such
small matrices), while generation time is the language side's. LLaVA-1.5-7B's proportions are similar (0.3B of
7B). So the simpler choice costs nothing measurable, keeps the CLIP tower exact (where LLaVA's own 4/8-bit
recipes skip quantization too), and leaves the decoding methods that hook the tower and the projector (VCD,
SHIELD) plain float modules.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from .base import PolicyError


def is_vlm_config(config: Any) -> bool:
    """Whether a transformers config describes a vision-language model."""
    if getattr(config, "vision_config", None) is not None:
        return True
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return getattr(config, "model_type", None) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def folder_is_vlm(folder: Path) -> bool:
    """Whether the model folder holds a VLM, read from its config.json (a bad config is transformers' error)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError) as err:
        raise PolicyError(f"cannot read the config of hf model folder {folder}: {err}") from err
    return is_vlm_config(config)


def load_vlm(folder: Path, dtype: Any) -> tuple[Any, Any]:
    """(model, processor) of a VLM folder; PolicyError naming the folder and what is missing."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if "toolpath_compression" in config:
        # `toolpath compress` writes packed weights of causal language models only; such a folder would load
        # with its packed tensors missing.
        raise PolicyError(f"hf model folder {folder}: packed compressed weights are not supported for "
                          f"vision-language models; use model.options.weights (int8/int4) on the original folder")
    try:
        processor = AutoProcessor.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as err:
        # Some processors (Qwen2-VL's, with its video processor) cannot even be built without torchvision.
        hint = ("" if importlib.util.find_spec("torchvision")
                else " (torchvision is not installed; some processors need it)")
        raise PolicyError(f"cannot load the processor of vision-language model {folder}: "
                          f"{type(err).__name__}: {err}{hint}") from err
    missing = [part for part in ("image_processor", "tokenizer") if getattr(processor, part, None) is None]
    if missing:
        raise PolicyError(f"vision-language model {folder} has no {' or '.join(missing)} (AutoProcessor gave "
                          f"{type(processor).__name__}); its folder needs the processor files it was saved with")
    if not getattr(processor, "image_token", None):
        raise PolicyError(f"the processor of {folder} ({type(processor).__name__}) names no image token")
    try:
        model = AutoModelForImageTextToText.from_pretrained(str(folder), dtype=dtype, use_safetensors=True)
    except (OSError, ValueError, KeyError) as err:
        raise PolicyError(f"cannot load vision-language model from {folder}: {err}") from err
    return model, processor


def apply_weights_to_language_side(model: Any, spec: Any) -> dict:
    """quant.apply_from_spec on the language model and its head, the vision tower and projector untouched (see
    the module's notes); the summary's bytes count the whole model."""
    from torch import nn

    from .quant import apply_from_spec, model_bytes

    class LanguageSide(nn.Module):
        """A view holding the VLM's own decoder and head: quantizing through it replaces their linears in place."""

        def __init__(self):
            super().__init__()
            self.decoder = model.get_decoder()
            self.head = model.get_output_embeddings()
            self.config = model.config

        def get_output_embeddings(self):
            return self.head

        def get_input_embeddings(self):
            return model.get_input_embeddings()

    side = LanguageSide()
    head = side.head
    summary = apply_from_spec(side, spec)
    if side.head is not head:  # the head is the view's own child: its low-bit replacement was set on the view
        model.set_output_embeddings(side.head)
    if summary["weights"] in ("int8", "int4") and not model.config.get_text_config().tie_word_embeddings:
        model._tied_weights_keys = {}  # the head has its own low-bit weight now: nothing may tie it back
    summary["bytes"] = model_bytes(model)
    summary["vision"] = "as loaded"
    return summary


def image_spans(input_ids: list[int], image_token_id: int) -> list[tuple[int, int]]:
    """[start, end) of each run of the image placeholder token in a prompt."""
    spans, start = [], None
    for i, t in enumerate(input_ids + [None]):
        if t == image_token_id and start is None:
            start = i
        elif t != image_token_id and start is not None:
            spans.append((start, i))
            start = None
    return spans


def context_room(input_ids: list[int], limit: int | None, image_token_id: int | None, labels: list[str],
                 model: str) -> int | None:
    """Tokens left for the answer in a context of `limit` tokens, or PolicyError when the prompt fills it,
    naming the first image that does not fit (or, where the processor splits images into tiles, all of them)."""
    if not limit:
        return None
    n = len(input_ids)
    if n < limit:
        return limit - n
    if not labels:
        raise PolicyError(f"the conversation takes {n} tokens, more than {model}'s context of {limit - 1} "
                          f"(plus one to answer)")
    spans = image_spans(input_ids, image_token_id) if image_token_id is not None else []
    per_image = ""
    if len(spans) == len(labels):
        sizes = sorted({end - start for start, end in spans})
        per_image = f" ({'/'.join(map(str, sizes))} tokens each)"
        late = next((i for i, (start, end) in enumerate(spans) if end >= limit), None)
        if late is not None:
            raise PolicyError(f"the conversation's {len(labels)} images{per_image} and text take {n} tokens, more "
                              f"than {model}'s context of {limit} tokens: {labels[late]} is the first image that "
                              f"does not fit; send fewer or smaller images")
    raise PolicyError(f"the conversation's {len(labels)} images{per_image} and text take {n} tokens, more than "
                      f"{model}'s context of {limit} tokens: {', '.join(labels)}; send fewer or smaller images")
