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
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from .options import STRICT, Text, field_error

PARTS = ("statistical", "inherent", "vulnerability")
Part = Literal["statistical", "inherent", "vulnerability"]


class Options(BaseModel):
    """model.options.decoding: {kind: shield, ...}; the parts on either as three booleans or as `parts`."""

    model_config = STRICT
    statistical: bool = Field(True, description="re-weight visual tokens by the first caption")
    inherent: bool = Field(True, description="subtract the encoder's output on noise images")
    vulnerability: bool = Field(True, description="contrast with an adversarially perturbed image")
    # read into the three booleans and left out of the settings a run records
    parts: list[Part] | None = Field(None, exclude=True, description="the parts on, as a list (the others off): an "
                                                                     "alternative to the three booleans")
    alpha: float = Field(2.0, gt=0, description="weight of the contrast with the perturbed image")
    beta: float = Field(0.35, gt=0, le=1, description="plausibility cut of the contrast")
    gamma: float = Field(3.0, gt=0, description="power that stretches the patch weights")
    gain: float = Field(0.5, ge=0, le=1, description="stretched patch weights (in [0, 1]) at or below it are zeroed")
    bias_weight: float = Field(0.1, ge=0, description="weight of the inherent bias subtracted from the features")
    threshold: float = Field(0.011, ge=-1, le=1, description="similarity a caption token needs to be kept")
    noise_images: int = Field(32, ge=1, le=4096, description="uniform-noise images averaged into the inherent bias")
    epsilon: float = Field(0.14, gt=0, description="bound of the attack's δ (the perturbation is at most scale·ε)")
    steps: int = Field(30, ge=1, le=10_000, description="Adam steps of the attack")
    attack_lr: float = Field(0.14, gt=0, description="Adam learning rate of the attack")
    attack_scale: float = Field(12.0, gt=0, description="c: the image moves by c·δ")
    clip: Text | None = Field(None, description="a CLIPModel folder for the caption's text features (default: "
                                                "<model folder>/clip)")
    caption_prompt: Text = Field("Describe the image.", description="prompt of the first caption")
    caption_tokens: int = Field(48, ge=1, le=1024, description="most tokens of the first caption")
    seed: int = Field(0, ge=0, description="seed of the noise images")

    @field_validator("parts", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        # `--decoding` and short specs write the list as "statistical,inherent"
        return [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _parts_on(self) -> Options:
        if self.parts is not None:
            both = [p for p in PARTS if p in self.model_fields_set]
            if both:
                raise field_error("shield", both[0], "give the parts either as `parts` or as booleans, not both",
                                  getattr(self, both[0]))
            listed = self.parts
            for part in PARTS:
                setattr(self, part, part in listed)
            self.parts = None  # read as the three booleans from here on, so the settings validate to themselves
        if not any(getattr(self, p) for p in PARTS):
            raise field_error("shield", "parts", f"shield needs at least one part on ({', '.join(PARTS)})", [])
        return self


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

    def __init__(self, branch: Any, details: dict, *, text: Any = None, bias: Any = None, options: Options):
        self.branch, self.details, self.text, self.bias, self.options = branch, details, text, bias, options
        self.fired = 0

    def __call__(self, module: Any, args: tuple):
        from .reweight import patch_weights, reshape_features

        if self.branch.contrastive:
            return None
        features = args[0]
        weights = None
        if self.text is not None:
            weights, kept, fell_back = patch_weights(features, self.text, threshold=self.options.threshold,
                                                     gamma=self.options.gamma, gain=self.options.gain)
            self.details["kept_caption_tokens"] = [int(k) for k in kept.sum(dim=-1)]
            self.details["caption_tokens"] = int(self.text.shape[0])
            self.details["reweighted_patches"] = [int(k) for k in (weights > 0).sum(dim=-1)]
            if bool(fell_back.any()):
                self.details["threshold_fallback"] = "no caption token cleared the threshold: kept the best one"
        if self.bias is not None and tuple(self.bias.shape[1:]) != tuple(features.shape[1:]):
            raise ValueError(f"decoding.shield: the inherent bias has shape {tuple(self.bias.shape[1:])}, the image "
                             f"features {tuple(features.shape[1:])}")
        self.fired += 1
        return (reshape_features(features, weights, self.bias, self.options.bias_weight), *args[1:])


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


class Shield:
    name = "shield"
    Options = Options

    def build(self, model: Any, processor: Any, inputs: dict, options: Options, home: Path):
        from .session import Branch, Decoding, Tally

        tally, branch, details = Tally(), Branch(), {}
        pixels = inputs["pixel_values"]
        with tally.timed():
            projector = find_projector(model) if options.statistical or options.inherent else None
            mean, std = _normalisation(processor)
            clip = caption = None
            if options.statistical or options.vulnerability:
                from .caption import find_clip, first_caption, load_clip

                clip, clip_tokenizer = load_clip(find_clip(model, options.clip), pixels.device)
                caption = first_caption(model, processor, inputs, prompt=options.caption_prompt,
                                        max_new_tokens=options.caption_tokens, tally=tally)
                details["caption"] = caption
            text_features = bias = None
            if options.statistical:
                from .caption import caption_features

                text_features = caption_features(clip, clip_tokenizer, caption)
            if options.inherent:
                from .inherent import inherent_bias

                bias, cached = inherent_bias(model, projector, _vision_tower(model), tuple(pixels.shape[1:]),
                                             count=options.noise_images, seed=options.seed, mean=mean, std=std,
                                             home=home)
                details["inherent_bias"] = "cached" if cached else f"computed from {options.noise_images} noise images"
            adversarial = None
            if options.vulnerability:
                from .attack import adversarial_image

                adversarial, taken = adversarial_image(clip, clip_tokenizer, pixels, caption, epsilon=options.epsilon,
                                                       steps=options.steps, lr=options.attack_lr,
                                                       scale=options.attack_scale, mean=mean, std=std)
                details["attack_steps"] = taken
        processors, pre_hooks = [], []
        if projector is not None:
            hook = FeatureHook(branch, details, text=text_features, bias=bias, options=options)
            pre_hooks.append((projector, hook))
            processors.append(_hooks_guard(hook))
        if adversarial is not None:
            from .contrast import ContrastiveLogits

            processors.append(ContrastiveLogits(model, inputs, adversarial, alpha=options.alpha, beta=options.beta,
                                                on_branch=branch.contrastive_branch, tally=tally))
        return Decoding(self.name, options, processors=processors, pre_hooks=pre_hooks, tally=tally, details=details)


KIND = Shield()
