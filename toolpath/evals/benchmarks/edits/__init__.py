"""A procedurally generated multi-turn image-edit suite whose success is decided by a program, never a judge.

`generate(n, seed)` makes tasks: a scene (384×288 or 512×384) of 2–5 coloured shapes on a background of one of
several kinds (uniform, gradient, noise, stripes, checker, soft "photo-like" blobs), some with text, and an
instruction of 1–4 subtasks in the grammar of planners/subtasks.py (recolor, remove, replace, text_remove,
text_replace, text_add, background, upscale). Since the scene is drawn here, the ground truth of every subtask
(masks, colours, removed regions, texts) and the expected final image are known: the scene is re-rendered
with the edits applied. Tasks are scene *descriptions*; images are rendered only when a task is used.

Rules that keep the tasks fair:
  * a target is unique by its colour+shape words at every point of the task, and "the star" is written only
    when there is one star; "remove the text" without quotes only when there is one text;
  * objects do not overlap (a removed object never hides another), and texts sit on background;
  * colours contrast with the background (CIELAB ΔE ≥ 35, and no background pixel is named that colour);
  * an added text is not edited again (removing it would undo the task); a text replacement is shorter
    than the text it replaces (≤ 60 % of its width), so a pixel check tells
    the new text from the old one (see below); a scene with a background change has no text (whether text is
    foreground is ambiguous); at most one background change and one upscale (×2) per task.

Conventions a tool can follow (the checks tolerate others):
  * replace: the new shape is drawn in the old object's box (`shape_box`): circle, square, star and
    triangle in the centred square of the box's shorter side; ellipse and rectangle in the box, or in a
    centred box of aspect 1.6 when the old box is squarish;
  * text_replace: the new text in the same font size and colour, left-aligned at the old text's left, same
    line; text_add: in the position's cell of a 3×3 grid, 5 % of the shorter side from the image's edges,
    font size 10 % of the image height, black on a light background, white on a dark one.

Checks (`check(task, image)`), all at the input's resolution (an upscaled image is first scaled back), with
colour distances in CIELAB ΔE76 and "named c" meaning c is the nearest of edit_base.COLORS:
  recolor      ≥ 80 % of the object's pixels (mask eroded 2 px) named the target colour.
  remove       the object's colour is gone (≤ 10 % of its pixels still named it, beyond what the expected
               background has) and the region matches the expected background once both are blurred at
               the texture's scale (median ΔE ≤ 12, 90th percentile ≤ 25): inpainting passes, a smear or a
               wrong fill does not.
  replace      a blob of the new colour (largest connected one near the object) of 0.5–2× the expected area,
               classified as the new shape by its contour (solidity, extent in its minimum-area rectangle,
               aspect), centred within 25 % of the box size; the old colour gone from the rest of the old mask.
  text_*       pixel checks, not OCR: "ink" is what differs (ΔE > 30) from the scene rendered without that
               text. text_remove: ≤ 15 % of the old ink left. text_replace: ink of 0.4–2.5× the expected
               amount whose width is 0.6–1.4× the new text's (the old text, ≥ 1.67× wider, fails: so does the
               new text written over the old) and height 0.6–1.5×. text_add: ink of 0.2–4× the expected
               amount, centred in the position's cell, a line (width 0.35–2.5×, aspect ≥ 0.4× the
               expected). Pixels cannot tell two words of the same size apart; an OCR read would, but
               would make the benchmark depend on an OCR model and on the fonts installed.
  background   ≥ 90 % of the background's pixels (away from the objects) within ΔE 20 of the colour.
  upscale      the image is k× the input's size (±1 px) and matches the bicubic upscale of the expected
               image (mean absolute difference ≤ 12 over the untouched part).
  every one    the rest of the image (outside every subtask's region) unchanged: ≤ 2 % of its pixels differ
               by more than 40 in a channel.
A subtask whose object or text a later subtask edits again can only be seen through that later edit; its
result is the later one's, and says so.

The adapter `Edits` (`toolpath eval edits`) writes each task's input PNG under
$TOOLPATH_HOME/benchmarks/edits/seed<seed>/ and runs the "fast_slow" agent; its answer is JSON
{"image": path, ...}, scored 1 when every subtask passes.

Modules: scene.py (what a scene holds, drawing it, the scene each subtask leaves), generation.py (tasks from a
seed), checks.py (an edited image against its task), adapter.py (the benchmark).
"""

from .adapter import Edits
from .checks import SubtaskResult, check, classify_shape
from .generation import generate, make_task, subtask_samples
from .scene import (
                    BG_KINDS,
                    CELLS,
                    SIZES,
                    EditScene,
                    EditTask,
                    Obj,
                    Text,
                    delta_e_rgb,
                    expected_image,
                    input_image,
                    object_mask,
                    render,
                    states,
                    text_mask,
)

__all__ = ["BG_KINDS", "CELLS", "SIZES", "EditScene", "EditTask", "Edits", "Obj", "SubtaskResult", "Text", "check",
           "classify_shape", "delta_e_rgb", "expected_image", "generate", "input_image", "make_task", "object_mask",
           "render", "states", "subtask_samples", "text_mask"]
