"""Learned edit tools: OWL-ViT detection, SAM segmentation, diffusion inpainting, from local weights only.

Each tool reads its weights from a folder named by an environment variable and is offered only when that
folder exists (`available()` says what to set otherwise); nothing is ever downloaded (local_files_only).

- `owlvit_detect` (locate): OWL-ViT or OWLv2 from $TOOLPATH_DETECTOR_MODEL, queried with the target's name;
  the best box above $TOOLPATH_DETECTOR_THRESHOLD (default 0.1) becomes the mask, refined by SAM when
  $TOOLPATH_SAM_MODEL is set too.
- `sam_segment` (locate): SAM from $TOOLPATH_SAM_MODEL, prompted with the box of the largest region of the
  target's colour.
- `diffusion_inpaint` (fill): a diffusers inpainting pipeline from $TOOLPATH_INPAINT_MODEL on the CPU with
  $TOOLPATH_INPAINT_STEPS steps (default 8), prompt "background"; only the masked pixels change.

Models load once per process (keyed by folder). torch, transformers and diffusers are imported inside the
functions that run them, so importing this module (which registers the tools) stays cheap.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from ...loaded_once import LoadedOnce
from ...quiet import quiet_model_loading
from .edit_base import COLORS, EditError, EditState, EditTool, Subtask, register_edit_tool
from .fill_area import GROW_PX, fill_mask

DETECTOR_ENV = "TOOLPATH_DETECTOR_MODEL"
SAM_ENV = "TOOLPATH_SAM_MODEL"
INPAINT_ENV = "TOOLPATH_INPAINT_MODEL"
THRESHOLD_ENV = "TOOLPATH_DETECTOR_THRESHOLD"
STEPS_ENV = "TOOLPATH_INPAINT_STEPS"
DEFAULT_THRESHOLD = 0.1  # OWL-ViT's usual cut-off; OWLv2 users often raise it to ~0.2
DEFAULT_STEPS = 8  # few: this runs on a CPU, and a background fill needs little detail
INPAINT_MAX_SIDE = 512  # Stable Diffusion's training size; larger images are filled at this size, then scaled back

_MODELS = LoadedOnce("image edit models")  # (kind, real path) -> loaded model: loading is the slow part


# ---- availability and loading -------------------------------------------------------------------------

def _weights_reason(env: str, what: str, packages: tuple[str, ...]) -> str | None:
    """Why a tool whose weights come from $env cannot run here, or None. Cheap: it imports nothing."""
    path = os.environ.get(env)
    if not path:
        return f"set {env} to a local {what} folder (weights are never downloaded)"
    if not os.path.isdir(path):
        return f"{env} points at {path}, which is not a folder"
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        return f"{what} needs {', '.join(missing)}: pip install {' '.join(missing)}"
    return None


def detector_reason() -> str | None:
    return _weights_reason(DETECTOR_ENV, "OWL-ViT", ("torch", "transformers"))


def sam_reason() -> str | None:
    return _weights_reason(SAM_ENV, "SAM", ("torch", "transformers"))


def inpaint_reason() -> str | None:
    return _weights_reason(INPAINT_ENV, "diffusers inpainting", ("torch", "transformers", "diffusers"))


def _model_path(env: str, reason: Callable[[], str | None], tool: str) -> str:
    why = reason()
    if why:
        raise EditError(f"{tool}: {why}")
    return os.environ[env]


def _load(kind: str, what: str, path: str, loader: Callable[[str], Any]) -> Any:
    def read() -> Any:
        if not os.path.isdir(path):
            raise EditError(f"{what} folder not found: {path}")
        quiet_model_loading(diffusers=True)
        try:
            return loader(path)
        except Exception as err:  # noqa: BLE001 — a broken folder fails in many ways; each is this folder's fault
            raise EditError(f"cannot load {what} from {path}: {type(err).__name__}: {err}") from None

    return _MODELS.get((kind, os.path.realpath(path)), read)


def _load_detector(path: str):
    from transformers import AutoConfig

    model_type = AutoConfig.from_pretrained(path, local_files_only=True).model_type
    if model_type == "owlvit":
        from transformers import OwlViTForObjectDetection as Model
        from transformers import OwlViTProcessor as Processor
    elif model_type == "owlv2":
        from transformers import Owlv2ForObjectDetection as Model
        from transformers import Owlv2Processor as Processor
    else:
        raise ValueError(f"its config says model_type {model_type!r}; expected 'owlvit' or 'owlv2'")
    model = Model.from_pretrained(path, local_files_only=True).eval()
    # OWLv2 pads the image to a square (bottom and right) before resizing, so its boxes are fractions of that
    # square; OWL-ViT stretches the image to the square, so its boxes are fractions of the image itself.
    return model, Processor.from_pretrained(path, local_files_only=True), model_type == "owlv2"


def _load_sam(path: str):
    from transformers import SamModel, SamProcessor

    return (SamModel.from_pretrained(path, local_files_only=True).eval(),
            SamProcessor.from_pretrained(path, local_files_only=True))


def _load_inpainter(path: str):
    from diffusers import AutoPipelineForInpainting

    pipe = AutoPipelineForInpainting.from_pretrained(path, local_files_only=True)  # float32 on the CPU by default
    pipe.set_progress_bar_config(disable=True)
    return pipe


# ---- input checks -------------------------------------------------------------------------------------

def _image(state: EditState, tool: str) -> np.ndarray:
    im = state.image
    if not (isinstance(im, np.ndarray) and im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8 and im.size):
        got = f"{im.dtype} {im.shape}" if isinstance(im, np.ndarray) else type(im).__name__
        raise EditError(f"{tool}: the image must be H×W×3 uint8 RGB, got {got}")
    return im


def _target(subtask: Subtask, tool: str):
    if subtask.target is None or not subtask.target.name.strip():
        raise EditError(f"{tool}: subtask {subtask.id} ({subtask.kind}) names no target to locate")
    return subtask.target


def _env_number(env: str, default: float, cast: type, low: float, high: float) -> float:
    raw = os.environ.get(env)
    if raw is None or raw == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise EditError(f"{env} must be {'an integer' if cast is int else 'a number'} in [{low}, {high}], got {raw!r}")
    return value


# ---- colour: the cheap estimate that places SAM's prompt, and the locate check ----------------------------
# (a minimal nearest-palette-colour estimate; locate.py's color_segment does the full job for the OpenCV tools)

_PALETTE_NAMES = list(COLORS)
MAX_LAB_DISTANCE = 60.0  # farther than this from every palette colour is "no named colour"


def _lab(pixels_rgb: np.ndarray) -> np.ndarray:
    """N×3 RGB → N×3 float CIELAB (OpenCV's 8-bit scaling). Not done at import: cv2's first call is slow."""
    return (cv2.cvtColor(pixels_rgb.reshape(-1, 1, 3).astype(np.uint8), cv2.COLOR_RGB2LAB)
            .reshape(-1, 3).astype(np.float32))


def nearest_color_index(pixels_rgb: np.ndarray) -> np.ndarray:
    """For N×3 uint8 RGB pixels, the index into COLORS of the nearest colour (CIELAB), or -1 when none is near."""
    lab = _lab(pixels_rgb.reshape(-1, 3))
    d = np.linalg.norm(lab[:, None, :] - _lab(np.array(list(COLORS.values())))[None], axis=-1)
    idx = d.argmin(axis=1)
    idx[d[np.arange(len(d)), idx] > MAX_LAB_DISTANCE] = -1
    return idx


def color_prompt_box(image: np.ndarray, color: str, work_side: int = 256) -> tuple[int, int, int, int]:
    """The box (x0, y0, x1, y1; pixels of `image`, x1/y1 exclusive) of the largest connected region whose
    pixels are nearest to COLORS[color]. Estimated on a copy at most `work_side` pixels wide: it only has to
    place a prompt."""
    if color not in COLORS:
        raise EditError(f"unknown colour {color!r}; known: {', '.join(COLORS)}")
    h, w = image.shape[:2]
    scale = min(1.0, work_side / max(h, w))
    small = cv2.resize(image, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA) \
        if scale < 1 else image
    sh, sw = small.shape[:2]
    hit = (nearest_color_index(small) == _PALETTE_NAMES.index(color)).reshape(sh, sw).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(hit, connectivity=8)
    if n <= 1 or stats[1:, cv2.CC_STAT_AREA].max() < max(4, 0.0005 * sh * sw):
        raise EditError(f"no {color} region in the image to prompt SAM with")
    x, y, bw, bh = stats[1 + int(stats[1:, cv2.CC_STAT_AREA].argmax()), :4]
    fx, fy = w / sw, h / sh
    return (max(0, math.floor(x * fx)), max(0, math.floor(y * fy)),
            min(w, math.ceil((x + bw) * fx)), min(h, math.ceil((y + bh) * fy)))


# ---- detection ----------------------------------------------------------------------------------------

def boxes_in_pixels(logits: np.ndarray, pred_boxes: np.ndarray, width: int, height: int,
                    padded_square: bool) -> list[tuple[float, tuple[int, int, int, int]]]:
    """OWL-ViT's raw output for one image → [(score, (x0, y0, x1, y1))] best first, in pixels of the original
    `width`×`height` image (x1/y1 exclusive, clipped to it; empty boxes dropped).

    logits: (patches, queries); a box's score is the sigmoid of its best query. pred_boxes: (patches, 4),
    centre-x, centre-y, width, height as fractions of the model's input square — the image itself for OWL-ViT
    (stretched), the image padded at the bottom/right to max(width, height) for OWLv2 (`padded_square`).
    The model's output is untrusted: wrong shapes or non-finite values are an EditError."""
    logits, pred_boxes = np.asarray(logits, np.float64), np.asarray(pred_boxes, np.float64)
    if logits.ndim != 2 or pred_boxes.shape != (logits.shape[0], 4):
        raise EditError(f"detector output: expected logits (N, queries) and boxes (N, 4), got {logits.shape} "
                        f"and {pred_boxes.shape}")
    if not (np.isfinite(logits).all() and np.isfinite(pred_boxes).all()):
        raise EditError("detector output holds non-finite scores or boxes")
    scores = 0.5 * (1.0 + np.tanh(logits.max(axis=1) / 2.0))  # the sigmoid, without exp's overflow at -1e6
    sx, sy = (max(width, height),) * 2 if padded_square else (width, height)
    cx, cy, bw, bh = pred_boxes.T
    x0, x1 = np.clip((cx - bw / 2) * sx, 0, width), np.clip((cx + bw / 2) * sx, 0, width)
    y0, y1 = np.clip((cy - bh / 2) * sy, 0, height), np.clip((cy + bh / 2) * sy, 0, height)
    out = []
    for i in np.argsort(-scores, kind="stable"):
        # the tolerance keeps float noise (0.15 * 200 = 30.000000000000004) from widening a box by a pixel
        box = (math.floor(x0[i] + 1e-6), math.floor(y0[i] + 1e-6), math.ceil(x1[i] - 1e-6), math.ceil(y1[i] - 1e-6))
        if box[2] > box[0] and box[3] > box[1]:
            out.append((float(scores[i]), box))
    return out


def detect(image: np.ndarray, query: str, model_path: str) -> list[tuple[float, tuple[int, int, int, int]]]:
    """Every box OWL-ViT/OWLv2 at `model_path` proposes for `query`, best first (see boxes_in_pixels)."""
    import torch

    model, processor, padded_square = _load("detector", "an OWL-ViT detector", model_path, _load_detector)
    inputs = processor(text=[[query]], images=[image], return_tensors="pt")
    with torch.inference_mode():
        out = model(**inputs)
    h, w = image.shape[:2]
    return boxes_in_pixels(out.logits[0].float().numpy(), out.pred_boxes[0].float().numpy(), w, h, padded_square)


def box_mask(shape: tuple[int, int], box: tuple[int, int, int, int]) -> np.ndarray:
    mask = np.zeros(shape, bool)
    x0, y0, x1, y1 = box
    mask[y0:y1, x0:x1] = True
    return mask


def _owlvit_detect(state: EditState, subtask: Subtask) -> EditState:
    image, target = _image(state, "owlvit_detect"), _target(subtask, "owlvit_detect")
    path = _model_path(DETECTOR_ENV, detector_reason, "owlvit_detect")
    threshold = _env_number(THRESHOLD_ENV, DEFAULT_THRESHOLD, float, 0.0, 1.0)
    hits = detect(image, target.name, path)
    if not hits or hits[0][0] < threshold:
        best = f"; the best scored {hits[0][0]:.3f}" if hits else ""
        raise EditError(f"owlvit_detect: nothing scored above {threshold} ({THRESHOLD_ENV}) for {target.name!r}{best}")
    score, box = hits[0]
    mask, refined = box_mask(image.shape[:2], box), False
    if sam_reason() is None:  # SAM configured too: the box is a prompt for a tighter mask
        sam_mask = segment(image, box, os.environ[SAM_ENV])
        if sam_mask.any():
            mask, refined = sam_mask, True
    info = {**state.info, "owlvit_detect": {"query": target.name, "box": list(box), "score": round(score, 4),
                                            "refined_by_sam": refined}}
    return state.evolve(mask=mask, info=info)


# ---- segmentation -------------------------------------------------------------------------------------

def segment(image: np.ndarray, box: tuple[int, int, int, int], model_path: str) -> np.ndarray:
    """SAM's mask (H×W bool, aligned with `image`) for a box prompt in image pixels: of its multimask
    proposals, the one with the highest predicted IoU."""
    import torch

    model, processor = _load("sam", "a SAM model", model_path, _load_sam)
    inputs = processor(images=image, input_boxes=[[[float(v) for v in box]]], return_tensors="pt")
    with torch.inference_mode():
        out = model(**inputs, multimask_output=True)
    masks = processor.post_process_masks(out.pred_masks, inputs["original_sizes"], inputs["reshaped_input_sizes"])[0]
    iou = out.iou_scores[0, 0].float().numpy()
    h, w = image.shape[:2]
    if masks.ndim != 4 or tuple(masks.shape[2:]) != (h, w) or masks.shape[1] != len(iou) or not len(iou):
        raise EditError(f"SAM output: expected masks (1, {len(iou)}, {h}, {w}), got {tuple(masks.shape)}")
    iou = np.where(np.isfinite(iou), iou, -np.inf)
    return masks[0, int(iou.argmax())].numpy().astype(bool)


def _sam_segment(state: EditState, subtask: Subtask) -> EditState:
    image, target = _image(state, "sam_segment"), _target(subtask, "sam_segment")
    path = _model_path(SAM_ENV, sam_reason, "sam_segment")
    if not target.color:
        raise EditError(f"sam_segment: {target.name!r} names no colour to place SAM's prompt box with")
    box = color_prompt_box(image, target.color)
    mask = segment(image, box, path)
    if not mask.any():
        raise EditError(f"sam_segment: SAM found nothing in the box {list(box)} around the {target.color} region")
    return state.evolve(mask=mask, info={**state.info, "sam_segment": {"prompt_box": list(box)}})


def _locate_check(before: EditState, after: EditState, subtask: Subtask) -> float:
    """A plausible mask: neither empty nor most of the image, and, when the target names a colour, made of
    pixels of that colour (a loose box scores lower than a tight mask)."""
    mask = after.mask
    if mask is None or mask.shape != after.image.shape[:2]:
        return 0.0
    frac = float(mask.mean())
    if mask.sum() < 4 or frac >= 0.95:
        return 0.0
    plausible = 1.0 if frac <= 0.5 else (0.95 - frac) / 0.45
    color = subtask.target.color if subtask.target else None
    if color not in COLORS:
        return plausible
    pixels = after.image[mask]
    if len(pixels) > 20000:  # a sample is enough for a fraction
        pixels = pixels[np.random.default_rng(0).choice(len(pixels), 20000, replace=False)]
    share = float((nearest_color_index(pixels) == _PALETTE_NAMES.index(color)).mean())
    return plausible * (0.4 + 0.6 * share)


# ---- inpainting ---------------------------------------------------------------------------------------

def _work_size(w: int, h: int, max_side: int) -> tuple[int, int]:
    """The size the pipeline runs at: at most max_side, both sides multiples of 8 (the VAE's requirement)."""
    scale = min(1.0, max_side / max(w, h))
    return max(8, round(w * scale / 8) * 8), max(8, round(h * scale / 8) * 8)


def inpaint(image: np.ndarray, mask: np.ndarray, model_path: str, steps: int = DEFAULT_STEPS,
            prompt: str = "background", guidance: float = 7.5, seed: int = 0,
            max_side: int = INPAINT_MAX_SIDE) -> np.ndarray:
    """`image` (H×W×3 uint8) with the pixels of `mask` (H×W bool) repainted by the pipeline at `model_path`;
    every other pixel is returned unchanged. Seeded, so the same call gives the same fill."""
    import torch
    from PIL import Image

    pipe = _load("inpaint", "a diffusers inpainting pipeline", model_path, _load_inpainter)
    h, w = image.shape[:2]
    ww, wh = _work_size(w, h, max_side)
    small = cv2.resize(image, (ww, wh), interpolation=cv2.INTER_AREA if ww < w else cv2.INTER_CUBIC)
    # any work pixel the mask touches is repainted, so a thin mask survives the downscale
    small_mask = ((cv2.resize(mask.astype(np.float32), (ww, wh), interpolation=cv2.INTER_AREA) > 0)
                  .astype(np.uint8) * 255)
    out = pipe(prompt=prompt, image=Image.fromarray(small), mask_image=Image.fromarray(small_mask), height=wh,
               width=ww, num_inference_steps=steps, guidance_scale=guidance,
               generator=torch.Generator("cpu").manual_seed(seed), output_type="np").images
    out = np.asarray(out)
    if out.shape != (1, wh, ww, 3) or not np.isfinite(out).all():
        raise EditError(f"inpainting output: expected one finite {wh}×{ww}×3 image, got shape {out.shape}")
    filled = (np.clip(out[0], 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    if (ww, wh) != (w, h):
        filled = cv2.resize(filled, (w, h), interpolation=cv2.INTER_CUBIC)
    return np.where(mask[..., None], filled, image)


def _diffusion_inpaint(state: EditState, subtask: Subtask) -> EditState:
    image = _image(state, "diffusion_inpaint")
    path = _model_path(INPAINT_ENV, inpaint_reason, "diffusion_inpaint")
    steps = int(_env_number(STEPS_ENV, DEFAULT_STEPS, int, 1, 200))
    result = inpaint(image, fill_mask(state), path, steps=steps)
    return state.evolve(image=result, info={**state.info, "diffusion_inpaint": {"steps": steps, "grow_px": GROW_PX}})


def _fill_check(before: EditState, after: EditState, subtask: Subtask) -> float:
    """The filled region should look like the ring of pixels around it (mean CIELAB colour), and nothing
    outside it may have changed."""
    if after.image.shape != before.image.shape:
        return 0.0
    mask = fill_mask(before)
    if (after.image[~mask] != before.image[~mask]).any():
        return 0.0
    r = int(min(30, max(3, 0.25 * math.sqrt(mask.sum()))))
    ring = cv2.dilate(mask.astype(np.uint8),
                      cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1,) * 2)).astype(bool)
    ring &= ~mask
    if not ring.any():
        return 0.0  # the mask covers the image: there is no surrounding to match
    lab = cv2.cvtColor(after.image, cv2.COLOR_RGB2LAB).astype(np.float32)
    d = float(np.linalg.norm(lab[mask].mean(axis=0) - lab[ring].mean(axis=0)))
    return max(0.0, 1.0 - d / 60.0)


# ---- registration -------------------------------------------------------------------------------------

register_edit_tool(EditTool(
    name="owlvit_detect", stage="locate", kinds=("recolor", "remove", "replace"), fn=_owlvit_detect,
    check=_locate_check, cost=1.5, quality=0.8, available=detector_reason,
    description="open-vocabulary detection (OWL-ViT/OWLv2) of the target's name; box mask, SAM-refined if SAM is set"))
register_edit_tool(EditTool(
    name="sam_segment", stage="locate", kinds=("recolor", "remove", "replace"), fn=_sam_segment,
    check=_locate_check, cost=4.0, quality=0.85, available=sam_reason,
    description="SAM mask prompted with the box of the largest region of the target's colour"))
register_edit_tool(EditTool(
    name="diffusion_inpaint", stage="fill", kinds=("remove", "replace", "text_remove", "text_replace"),
    fn=_diffusion_inpaint, check=_fill_check, cost=60.0, quality=0.75, available=inpaint_reason,
    description="Stable Diffusion inpainting of the mask (or text boxes) with a 'background' prompt, on the CPU"))
