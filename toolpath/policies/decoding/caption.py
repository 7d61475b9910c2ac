"""SHIELD's first caption and its CLIP text features.

The reference reads captions written beforehand by LLaVA; here the model writes its own, in one greedy pass over the
same images with the prompt CAPTION_PROMPT, before the real call (its forward passes are counted). The caption's
token states from the CLIP text encoder (the last hidden layer, without the start token) are what the visual
tokens are compared with. The CLIP is the model's own (`<model folder>/clip/`, as the tiny VLM saves it) or the
one `decoding.clip` names; without one, the parts that need it refuse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...loaded_once import LoadedOnce

CAPTION_PROMPT = "Describe the image."
_CLIPS = LoadedOnce("SHIELD's CLIP encoders")  # (folder, device) -> (CLIPModel, tokenizer)


def find_clip(model: Any, clip: str | None) -> Path:
    """The CLIP folder to use: `decoding.clip`, else the model folder's `clip/`; ValueError saying what is missing."""
    if clip:
        path = Path(clip).expanduser()
        if not (path / "config.json").is_file():
            raise ValueError(f"decoding.clip: no CLIP model folder (config.json) at {path}")
        return path
    folder = getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "")
    path = Path(folder) / "clip" if folder else None
    if path is None or not (path / "config.json").is_file():
        where = f"at {path}" if path else "(the model was not loaded from a folder)"
        raise ValueError(f"decoding.clip: SHIELD's statistical and vulnerability parts need a CLIP text encoder, and "
                         f"there is none {where}; set decoding.clip to a CLIPModel folder (with its tokenizer) or "
                         "turn those parts off (statistical: false, vulnerability: false)")
    return path


def load_clip(path: Path, device: Any):
    """(CLIPModel in float32, eval, no parameter gradients; its tokenizer), kept for the process."""
    from transformers import AutoTokenizer, CLIPModel

    def read():
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError) as exc:
            raise ValueError(f"decoding.clip: {path} has no tokenizer for its text encoder: {exc}") from exc
        return CLIPModel.from_pretrained(str(path), dtype="float32").to(device).eval().requires_grad_(False), tokenizer

    return _CLIPS.get((str(Path(path).resolve()), str(device)), read)


def caption_inputs(processor: Any, inputs: dict, prompt: str) -> dict:
    """The processor's encoding of `prompt` about the call's own images (their pixels are reused as they are)."""
    from PIL import Image

    pixels = inputs["pixel_values"]
    if inputs["input_ids"].shape[0] != 1:
        raise ValueError(f"decoding.shield: one prompt per call, got {inputs['input_ids'].shape[0]}")
    count = pixels.shape[0]
    content = [{"type": "image"}] * count + [{"type": "text", "text": prompt}]
    if getattr(processor, "chat_template", None):
        text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                             tokenize=False)
    else:  # LLaVA-1.5's conversation form
        text = "USER: " + getattr(processor, "image_token", "<image>") * count + f"\n{prompt} ASSISTANT:"
    blank = Image.new("RGB", (int(pixels.shape[-1]), int(pixels.shape[-2])))
    enc = processor(text=[text], images=[blank] * count, return_tensors="pt")
    if tuple(enc["pixel_values"].shape) != tuple(pixels.shape):
        raise ValueError(f"decoding.shield: the processor lays out images as {tuple(enc['pixel_values'].shape)}, the "
                         f"call's pixel_values are {tuple(pixels.shape)}; cannot caption the same images")
    out = {k: (v.to(pixels.device) if hasattr(v, "to") else v) for k, v in enc.items()}
    out["pixel_values"] = pixels
    return out


def first_caption(model: Any, processor: Any, inputs: dict, *, prompt: str, max_new_tokens: int, tally: Any) -> str:
    """One greedy caption of the call's images, cut after its last full sentence."""
    import torch

    enc = caption_inputs(processor, inputs, prompt)
    tokenizer = getattr(processor, "tokenizer", processor)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None,
                                 top_k=None, pad_token_id=pad)
    finally:
        handle.remove()
    tally.add(passes=len(calls))
    return trim_caption(tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))


def trim_caption(text: str) -> str:
    """Up to the last full stop (a caption cut by the token limit ends mid-sentence), else the whole text."""
    text = " ".join(text.split())
    return text[:text.rindex(".") + 1] if "." in text else text


def caption_features(clip: Any, tokenizer: Any, caption: str):
    """[tokens, text width]: the text encoder's last hidden states of the caption, without the start token."""
    import torch

    limit = clip.config.text_config.max_position_embeddings
    enc = tokenizer(caption, truncation=True, max_length=limit, return_tensors="pt").to(clip.device)
    with torch.no_grad():
        out = clip.text_model(input_ids=enc["input_ids"], attention_mask=enc.get("attention_mask"))
    states = out.last_hidden_state[0]
    ids = enc["input_ids"][0]
    if tokenizer.bos_token_id is not None and len(ids) > 1 and int(ids[0]) == tokenizer.bos_token_id:
        states = states[1:]  # the start token says nothing about the caption (the reference drops it too)
    return states
