"""Images as INRs: every activation (COSMO, SIREN, WIRE, Gauss, FINER) at one parameter budget and one number
of steps, on the same photos, in one run; super-resolution against bicubic interpolation.

    python benchmarks/inr.py [--sizes 128 256] [--steps N] [--batch N] [--budget N | --width N]
                             [--images N | --photos NAME ...] [--watch-every K] [--workers N] [--smoothness W]
                             [--lr R] [--band-start RAW] [--no-sr] [--json]

Images: scikit-image's bundled photos (astronaut, camera, coffee, chelsea, rocket, ...), centre-cropped to a
square and resized (Lanczos) to each size. Reconstruction: fit the image, render it on its own grid. 4x
super-resolution: downscale by 4 (area averaging), fit a network whose averages over the small image's pixels
match them (restore.super_resolve, with --smoothness as its total-variation weight), render it at the full
size, compare with the original; bicubic upscaling of the same small image is the baseline. Denoising with
--denoise SIGMA. Every network has --budget parameters (equal size), or with --width that hidden width (equal
width, the official comparison's: a complex network then carries twice the weights). Reported: PSNR (dB) and
SSIM of the final fit per image and activation, and the best PSNR over the fit (the papers' statistic: the
rendering scored against the reference every --watch-every steps and after the last); each activation's
difference from SIREN, SR's difference from bicubic, and the goals (COSMO >= SIREN + 1 dB on at least 4 of 5
images for reconstruction; SR 4x above bicubic), each met or not on both statistics.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from toolpath.tools.inr import restore  # noqa: E402
from toolpath.tools.inr.fit import as_float_image, fit  # noqa: E402
from toolpath.tools.inr.metrics import psnr, ssim  # noqa: E402
from toolpath.tools.inr.network import activation_names, count_parameters  # noqa: E402

PHOTOS = ("astronaut", "camera", "coffee", "chelsea", "rocket", "cat", "immunohistochemistry", "hubble_deep_field")
SR_SCALE = 4


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def photos(n: int | list[str], size: int) -> dict[str, np.ndarray]:
    """The first n bundled photos (or those named) as size x size RGB floats (grey ones repeated to three
    channels)."""
    from PIL import Image
    from skimage import data

    out = {}
    for name in PHOTOS[:n] if isinstance(n, int) else n:
        im = Image.fromarray(getattr(data, name)()).convert("RGB")
        side = min(im.size)
        left, top = (im.width - side) // 2, (im.height - side) // 2
        im = im.crop((left, top, left + side, top + side)).resize((size, size), Image.LANCZOS)
        out[name] = as_float_image(im)
    return out


def bicubic(small: np.ndarray, scale: int) -> np.ndarray:
    from PIL import Image

    im = Image.fromarray((small * 255 + 0.5).astype(np.uint8))
    up = im.resize((im.width * scale, im.height * scale), Image.BICUBIC)
    return as_float_image(up)


def downscale(image: np.ndarray, scale: int) -> np.ndarray:
    """Area (box) downsampling, the operator both official SR scripts use (OpenCV's INTER_AREA) and the one
    restore.super_resolve inverts."""
    from PIL import Image

    im = Image.fromarray((image * 255 + 0.5).astype(np.uint8))
    return as_float_image(im.resize((im.width // scale, im.height // scale), Image.BOX))


def scores(estimate: np.ndarray, reference: np.ndarray) -> dict:
    return {"psnr": round(psnr(estimate, reference), 3), "ssim": round(ssim(estimate, reference), 4)}


def watching(reference: np.ndarray, args) -> dict:
    """fit's options that score the rendering at the reference's size against it every --watch-every steps."""
    height, width = reference.shape[:2]
    return {"watch": lambda render: psnr(render(height, width), reference), "watch_every": args.watch_every}


def fitted(f, estimate: np.ndarray, reference: np.ndarray) -> dict:
    """Final PSNR/SSIM, the best PSNR over the fit and its step, the network's size, and the PSNR curve (steps
    done, PSNR) scored every --watch-every steps."""
    step, best = f.best_watched()
    return {**scores(estimate, reference), "best_psnr": round(best, 3), "best_step": step,
            "seconds": round(f.seconds, 1), "parameters": count_parameters(f.model), "width": f.model.width,
            "curve": [[done, round(score, 3)] for done, score in f.watched]}


def reconstruct(image: np.ndarray, args) -> dict:
    out = {}
    for act in args.activations:
        f = fit(image, act, args.steps, args.seed, budget=args.budget, hidden_width=args.width, batch=args.batch,
                lr=args.lr, band_start=args.band_start, **watching(image, args))
        out[act] = fitted(f, f.render(*image.shape[:2]), image)
    return out


def super_resolve(image: np.ndarray, args) -> dict:
    small = downscale(image, SR_SCALE)
    baseline = scores(bicubic(small, SR_SCALE), image)
    out = {"bicubic": {**baseline, "best_psnr": baseline["psnr"]}}
    for act in args.activations:
        # The best over the fit is scored against the full-size original, which the fit never sees: an oracle's
        # choice of step, as the papers' best-PSNR figures are.
        up, f = restore.super_resolve(small, SR_SCALE, act, args.steps, args.seed, budget=args.budget,
                                      hidden_width=args.width, batch=args.batch, lr=args.lr, smoothness=args.smoothness,
                                      band_start=args.band_start, **watching(image, args))
        out[act] = fitted(f, up, image)
    return out


def denoise(image: np.ndarray, args) -> dict:
    rng = np.random.default_rng(args.seed)
    noisy = np.clip(image + rng.normal(0, args.denoise, image.shape), 0, 1).astype(np.float32)
    baseline = scores(noisy, image)
    out = {"noisy": {**baseline, "best_psnr": baseline["psnr"]}}
    for act in args.activations:
        clean, f = restore.denoise(noisy, act, args.steps, args.seed, budget=args.budget, hidden_width=args.width,
                                   lr=args.lr, band_start=args.band_start, **watching(image, args))
        out[act] = {**fitted(f, clean, image), "steps": f.steps, "stopped": f.stopped}
    return out


def measure(name: str, image: np.ndarray, args) -> dict:
    """Every task on one image (one worker's share)."""
    out = {"reconstruction": reconstruct(image, args)}
    log(f"{name} reconstruction: {out['reconstruction']}")
    if not args.no_sr:
        out["super_resolution"] = super_resolve(image, args)
        log(f"{name} SR x{SR_SCALE}: {out['super_resolution']}")
    if args.denoise:
        out["denoising"] = denoise(image, args)
        log(f"{name} denoising: {out['denoising']}")
    return out


def measure_all(images: dict[str, np.ndarray], args) -> dict:
    """task -> image -> results; images in parallel processes with --workers (each fit is single-threaded)."""
    if args.workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.workers) as pool:
            futures = {name: pool.submit(measure, name, image, args) for name, image in images.items()}
            per_image = {name: f.result() for name, f in futures.items()}
    else:
        per_image = {name: measure(name, image, args) for name, image in images.items()}
    tasks = next(iter(per_image.values())).keys()
    return {task: {name: per_image[name][task] for name in images} for task in tasks}


STATISTICS = ("psnr", "best_psnr")  # the final fit's PSNR, the best over the fit


def differences(table: dict, against: str, key: str = "psnr") -> dict:
    """Per activation: `key` (a PSNR) minus `against`'s on each image, and the mean."""
    acts = [a for a in next(iter(table.values())) if a != against]
    out = {}
    for act in acts:
        per = {name: round(row[act][key] - row[against][key], 3) for name, row in table.items()}
        out[act] = {"per_image": per, "mean": round(float(np.mean(list(per.values()))), 3)}
    return out


def summary(section: dict) -> dict:
    """Differences and goals on each statistic, every activation judged on the same one."""
    out = {}
    for key in STATISTICS:
        if "reconstruction" in section:
            rec = section["reconstruction"]
            vs_siren = out[f"reconstruction_vs_siren_db_{key}"] = differences(rec, "siren", key)
            wins = sum(g >= 1.0 for g in vs_siren["cosmo"]["per_image"].values())
            out[f"goal_cosmo_siren_plus_1db_{key}"] = {"images_met": wins, "of": len(rec),
                                                        "met": wins >= min(4, len(rec))}
        if "super_resolution" in section:
            vs_bicubic = out[f"sr_vs_bicubic_db_{key}"] = differences(section["super_resolution"], "bicubic", key)
            cosmo = vs_bicubic.get("cosmo", {}).get("mean", float("nan"))
            out[f"goal_sr_above_bicubic_{key}"] = {
                "cosmo_mean_db": cosmo, "met": cosmo > 0,
                "best": max(vs_bicubic.items(), key=lambda kv: kv[1]["mean"])[0]}
    if "denoising" in section:
        out["denoise_vs_noisy_db"] = differences(section["denoising"], "noisy")
    return out


def table(title: str, rows: dict, columns: list[str]) -> str:
    """Markdown: final PSNR / SSIM per cell, then the best PSNR over the fit for the fitted columns (not for a
    baseline such as bicubic), and a row of the networks' parameter counts."""
    first = next(iter(rows.values()))
    fitted_columns = {c for c in columns if "best_step" in first[c]}

    def cell(c: str, psnr_db: float, ssim_value: float, best: float) -> str:
        return f"{psnr_db:.2f} / {ssim_value:.3f}" + (f" / {best:.2f}" if c in fitted_columns else "")

    lines = [f"{title}", "| image | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in rows.items():
        cells = [cell(c, row[c]["psnr"], row[c]["ssim"], row[c]["best_psnr"]) for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    means = [cell(c, *(float(np.mean([r[c][k] for r in rows.values()])) for k in ("psnr", "ssim", "best_psnr")))
             for c in columns]
    lines.append("| mean | " + " | ".join(means) + " |")
    sizes = [f"{first[c]['parameters']:,} (width {first[c]['width']})" if c in fitted_columns else "-"
             for c in columns]
    lines.append("| parameters | " + " | ".join(sizes) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128])
    ap.add_argument("--images", type=int, default=5, help="the first N of the bundled photos")
    ap.add_argument("--photos", nargs="+", choices=PHOTOS, default=None,
                    help="these bundled photos instead of the first --images (e.g. to finish an interrupted run)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=2048, help="pixels per step (0: all)")
    ap.add_argument("--budget", type=int, default=13_000, help="parameters of every network")
    ap.add_argument("--width", type=int, default=None,
                    help="hidden width of every network instead of --budget (the equal-width comparison)")
    ap.add_argument("--watch-every", type=int, default=10,
                    help="steps between the scorings behind the best PSNR over the fit")
    ap.add_argument("--lr", type=float, default=None, help="Adam's rate for all (default: each activation's own)")
    ap.add_argument("--band-start", type=float, default=None,
                    help="COSMO's raw band start for every layer (default: the library's; 0.312 is the official "
                         "prior's starting output)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--activations", nargs="+", default=activation_names(), choices=activation_names())
    ap.add_argument("--no-sr", action="store_true", help="skip super-resolution")
    ap.add_argument("--smoothness", type=float, default=restore.SR_SMOOTHNESS,
                    help="super-resolution's total-variation weight (0: none)")
    ap.add_argument("--denoise", type=float, default=0.0, help="also denoise at this noise sigma (0: skip)")
    ap.add_argument("--workers", type=int, default=1, help="images measured in parallel processes")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    args.batch = args.batch or None
    if args.watch_every < 1:
        ap.error(f"--watch-every must be 1 or more, got {args.watch_every}")
    if args.width is not None and args.width < 1:
        ap.error(f"--width must be 1 or more, got {args.width}")
    if "siren" not in args.activations or "cosmo" not in args.activations:
        ap.error("--activations must include cosmo and siren (the comparison this benchmark makes)")
    out = {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "sizes": {}}
    for size in args.sizes:
        images = photos(args.photos or args.images, size)
        section = measure_all(images, args)
        section["summary"] = summary(section)
        out["sizes"][str(size)] = section
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for size, section in out["sizes"].items():
        print(table(f"\n{size}x{size} reconstruction, final PSNR dB / SSIM / best PSNR dB over the fit",
                    section["reconstruction"], args.activations))
        if "super_resolution" in section:
            print(table(f"\n{size}x{size} {SR_SCALE}x super-resolution, final PSNR dB / SSIM / best PSNR dB over the "
                        "fit", section["super_resolution"], ["bicubic", *args.activations]))
        if "denoising" in section:
            print(table(f"\n{size}x{size} denoising (sigma {args.denoise}), PSNR dB / SSIM", section["denoising"],
                        ["noisy", *args.activations]))
        print(json.dumps(section["summary"], indent=1))


if __name__ == "__main__":
    main()
