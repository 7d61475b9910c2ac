"""SHIELD (Huang et al., ICLR 2026): three training-free defences at the vision encoder, each switchable.

- statistical: re-weight the visual tokens by their match with the model's own first caption (reweight.py,
  caption.py), in a forward pre-hook on the projector;
- inherent: subtract the encoder's mean output on uniform-noise images (inherent.py), in the same hook;
- vulnerability: contrast the logits with those on an adversarially perturbed image (attack.py, contrast.py).
Defaults are the reference scripts' (llava1.5_pope_coco.bash): α 2.0, β 0.35, γ 3.0, gain 0.5, bias weight 0.1,
threshold 0.011, 32 noise images, ε 0.14, 30 steps, Adam lr 0.14, scale c 12.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .options import boolean, integer, known_only, number, text

PARTS = ("statistical", "inherent", "vulnerability")
OPTIONS = {
    "statistical": "re-weight visual tokens by the first caption (true)",
    "inherent": "subtract the encoder's output on noise images (true)",
    "vulnerability": "contrast with an adversarially perturbed image (true)",
    "parts": "the parts on, as a list (the others off): an alternative to the three booleans",
    "alpha": "weight of the contrast with the perturbed image (2.0)",
    "beta": "plausibility cut of the contrast (0.35)",
    "gamma": "power that stretches the patch weights (3.0)",
    "gain": "stretched patch weights (in [0, 1]) at or below it are zeroed (0.5)",
    "bias_weight": "weight of the inherent bias subtracted from the features (0.1)",
    "threshold": "similarity a caption token needs to be kept (0.011)",
    "noise_images": "uniform-noise images averaged into the inherent bias (32)",
    "epsilon": "bound of the attack's δ (0.14; the perturbation is at most scale·ε)",
    "steps": "Adam steps of the attack (30)",
    "attack_lr": "Adam learning rate of the attack (0.14)",
    "attack_scale": "c: the image moves by c·δ (12)",
    "clip": "a CLIPModel folder for the caption's text features (default: <model folder>/clip)",
    "caption_prompt": f"prompt of the first caption ({'Describe the image.'!r})",
    "caption_tokens": "most tokens of the first caption (48)",
    "seed": "seed of the noise images (0)",
}


def validate(options: dict[str, Any]) -> dict[str, Any]:
    known_only(options, OPTIONS, "shield")
    parts = _parts(options)
    if not any(parts.values()):
        raise ValueError(f"decoding.parts: shield needs at least one part on ({', '.join(PARTS)})")
    return {**parts,
            "alpha": number(options, "alpha", 2.0, above=0),
            "beta": number(options, "beta", 0.35, above=0, at_most=1),
            "gamma": number(options, "gamma", 3.0, above=0),
            "gain": number(options, "gain", 0.5, at_least=0, at_most=1),
            "bias_weight": number(options, "bias_weight", 0.1, at_least=0),
            "threshold": number(options, "threshold", 0.011, at_least=-1, at_most=1),
            "noise_images": integer(options, "noise_images", 32, minimum=1, maximum=4096),
            "epsilon": number(options, "epsilon", 0.14, above=0),
            "steps": integer(options, "steps", 30, minimum=1, maximum=10_000),
            "attack_lr": number(options, "attack_lr", 0.14, above=0),
            "attack_scale": number(options, "attack_scale", 12.0, above=0),
            "clip": text(options, "clip", None),
            "caption_prompt": text(options, "caption_prompt", "Describe the image."),
            "caption_tokens": integer(options, "caption_tokens", 48, minimum=1, maximum=1024),
            "seed": integer(options, "seed", 0, minimum=0)}


def _parts(options: dict[str, Any]) -> dict[str, bool]:
    if "parts" not in options:
        return {part: boolean(options, part, True) for part in PARTS}
    listed = options["parts"]
    if isinstance(listed, str):
        listed = [p.strip() for p in listed.split(",") if p.strip()]
    if not isinstance(listed, (list, tuple)) or not all(isinstance(p, str) for p in listed):
        raise ValueError(f"decoding.parts: expected a list of part names ({', '.join(PARTS)}), got {listed!r}")
    for part in listed:
        if part not in PARTS:
            raise ValueError(f"decoding.parts: unknown part {part!r}; parts: {', '.join(PARTS)}")
    both = [p for p in PARTS if p in options]
    if both:
        raise ValueError(f"decoding.{both[0]}: give the parts either as `parts` or as booleans, not both")
    return {part: part in listed for part in PARTS}


def find_projector(model: Any):
    """The module between the vision tower and the language model (Llava's multi_modal_projector)."""
    for owner in (model, getattr(model, "model", None)):
        projector = getattr(owner, "multi_modal_projector", None)
        if projector is not None and hasattr(model, "get_image_features"):
            return projector
    raise ValueError(f"decoding.shield: the statistical and inherent parts reshape the image features at a "
                     f"Llava-style multi_modal_projector, and {type(model).__name__} has none; turn them off "
                     "(statistical: false, inherent: false) or use vcd")


def _vision_tower(model: Any):
    for owner in (model, getattr(model, "model", None)):
        if getattr(owner, "vision_tower", None) is not None:
            return owner.vision_tower
    raise ValueError(f"decoding.shield: {type(model).__name__} has no vision_tower")


def _normalisation(processor: Any) -> tuple[list[float], list[float]]:
    images = getattr(processor, "image_processor", processor)
    mean, std = getattr(images, "image_mean", None), getattr(images, "image_std", None)
    if mean is None or std is None:
        raise ValueError(f"decoding.shield: the processor ({type(processor).__name__}) names no image_mean/image_std")
    return list(map(float, mean)), list(map(float, std))


class FeatureHook:
    """Forward pre-hook on the projector: the real image's features become f − w_b·bias + f·w. The contrastive
    branch's features are left alone, as in the reference."""

    def __init__(self, branch: Any, details: dict, *, text: Any = None, bias: Any = None, options: dict):
        self.branch, self.details, self.text, self.bias, self.options = branch, details, text, bias, options
        self.fired = 0

    def __call__(self, module: Any, args: tuple):
        from .reweight import patch_weights, reshape_features

        if self.branch.contrastive:
            return None
        features = args[0]
        weights = None
        if self.text is not None:
            weights, kept, fell_back = patch_weights(features, self.text, threshold=self.options["threshold"],
                                                     gamma=self.options["gamma"], gain=self.options["gain"])
            self.details["kept_caption_tokens"] = [int(k) for k in kept.sum(dim=-1)]
            self.details["caption_tokens"] = int(self.text.shape[0])
            self.details["reweighted_patches"] = [int(k) for k in (weights > 0).sum(dim=-1)]
            if bool(fell_back.any()):
                self.details["threshold_fallback"] = "no caption token cleared the threshold: kept the best one"
        if self.bias is not None and tuple(self.bias.shape[1:]) != tuple(features.shape[1:]):
            raise ValueError(f"decoding.shield: the inherent bias has shape {tuple(self.bias.shape[1:])}, the image "
                             f"features {tuple(features.shape[1:])}")
        self.fired += 1
        return (reshape_features(features, weights, self.bias, self.options["bias_weight"]), *args[1:])


def _hooks_guard(hook: FeatureHook):
    from transformers import LogitsProcessor

    class HooksGuard(LogitsProcessor):
        """Fails the call when the image features went through unchanged: generate ran outside `hooks()`."""

        def reset(self) -> None:
            hook.fired = 0

        def __call__(self, input_ids: Any, scores: Any):
            if not hook.fired:
                raise RuntimeError("decoding.shield: the image features were not re-weighted; run generate inside "
                                   "`with decoding.hooks():`")
            return scores

    return HooksGuard()


def build(model: Any, processor: Any, inputs: dict, options: dict, home: Path):
    from .session import Branch, Decoding, Tally

    tally, branch, details = Tally(), Branch(), {}
    pixels = inputs["pixel_values"]
    with tally.timed():
        projector = find_projector(model) if options["statistical"] or options["inherent"] else None
        mean, std = _normalisation(processor)
        clip = caption = None
        if options["statistical"] or options["vulnerability"]:
            from .caption import find_clip, first_caption, load_clip

            clip, clip_tokenizer = load_clip(find_clip(model, options["clip"]), pixels.device)
            caption = first_caption(model, processor, inputs, prompt=options["caption_prompt"],
                                    max_new_tokens=options["caption_tokens"], tally=tally)
            details["caption"] = caption
        text_features = bias = None
        if options["statistical"]:
            from .caption import caption_features

            text_features = caption_features(clip, clip_tokenizer, caption)
        if options["inherent"]:
            from .inherent import inherent_bias

            bias, cached = inherent_bias(model, projector, _vision_tower(model), tuple(pixels.shape[1:]),
                                         count=options["noise_images"], seed=options["seed"], mean=mean, std=std,
                                         home=home)
            details["inherent_bias"] = "cached" if cached else f"computed from {options['noise_images']} noise images"
        adversarial = None
        if options["vulnerability"]:
            from .attack import adversarial_image

            adversarial, taken = adversarial_image(clip, clip_tokenizer, pixels, caption, epsilon=options["epsilon"],
                                                   steps=options["steps"], lr=options["attack_lr"],
                                                   scale=options["attack_scale"], mean=mean, std=std)
            details["attack_steps"] = taken
    processors, pre_hooks = [], []
    if projector is not None:
        hook = FeatureHook(branch, details, text=text_features, bias=bias, options=options)
        pre_hooks.append((projector, hook))
        processors.append(_hooks_guard(hook))
    if adversarial is not None:
        from .contrast import ContrastiveLogits

        processors.append(ContrastiveLogits(model, inputs, adversarial, alpha=options["alpha"], beta=options["beta"],
                                            on_branch=branch.contrastive_branch, tally=tally))
    return Decoding("shield", options, processors=processors, pre_hooks=pre_hooks, tally=tally, details=details)
