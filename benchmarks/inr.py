"""Images as INRs: every activation (COSMO, SIREN, WIRE, Gauss, FINER) at one parameter budget and one number
of steps, on the same photos, in one run; super-resolution against bicubic interpolation.

    python benchmarks/inr.py [--sizes 128 256] [--steps N] [--batch N] [--budget N] [--images N] [--workers N]
                             [--smoothness W] [--no-sr] [--json]

Images: scikit-image's bundled photos (astronaut, camera, coffee, chelsea, rocket, ...), centre-cropped to a
square and resized (Lanczos) to each size. Reconstruction: fit the image, render it on its own grid. 4x
super-resolution: downscale by 4 (area averaging), fit a network whose averages over the small image's pixels
match them (restore.super_resolve, with --smoothness as its total-variation weight), render it at the full
size, compare with the original; bicubic upscaling of the same small image is the baseline. Denoising with
--denoise SIGMA. Reported: PSNR (dB) and SSIM per image and activation, each activation's difference from
SIREN, SR's difference from bicubic, and the goals (COSMO >= SIREN + 1 dB on at least 4 of 5 images for
reconstruction; SR 4x above bicubic), each met or not.
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


def photos(n: int, size: int) -> dict[str, np.ndarray]:
    """The first n bundled photos as size x size RGB floats (grey ones repeated to three channels)."""
    from PIL import Image
    from skimage import data

    out = {}
    for name in PHOTOS[:n]:
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


def reconstruct(image: np.ndarray, args) -> dict:
    out = {}
    for act in args.activations:
        f = fit(image, act, args.steps, args.seed, budget=args.budget, batch=args.batch, lr=args.lr)
        out[act] = {**scores(f.render(*image.shape[:2]), image), "seconds": round(f.seconds, 1),
                    "parameters": count_parameters(f.model), "width": f.model.width}
    return out


def super_resolve(image: np.ndarray, args) -> dict:
    small = downscale(image, SR_SCALE)
    out = {"bicubic": scores(bicubic(small, SR_SCALE), image)}
    for act in args.activations:
        up, f = restore.super_resolve(small, SR_SCALE, act, args.steps, args.seed, budget=args.budget,
                                      batch=args.batch, lr=args.lr, smoothness=args.smoothness)
        out[act] = {**scores(up, image), "seconds": round(f.seconds, 1)}
    return out


def denoise(image: np.ndarray, args) -> dict:
    rng = np.random.default_rng(args.seed)
    noisy = np.clip(image + rng.normal(0, args.denoise, image.shape), 0, 1).astype(np.float32)
    out = {"noisy": scores(noisy, image)}
    for act in args.activations:
        clean, f = restore.denoise(noisy, act, args.steps, args.seed, budget=args.budget, lr=args.lr)
        out[act] = {**scores(clean, image), "steps": f.steps, "stopped": f.stopped}
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


def differences(table: dict, against: str) -> dict:
    """Per activation: PSNR minus `against`'s on each image, and the mean."""
    acts = [a for a in next(iter(table.values())) if a != against]
    out = {}
    for act in acts:
        per = {name: round(row[act]["psnr"] - row[against]["psnr"], 3) for name, row in table.items()}
        out[act] = {"per_image": per, "mean": round(float(np.mean(list(per.values()))), 3)}
    return out


def summary(section: dict) -> dict:
    out = {}
    if "reconstruction" in section:
        rec = section["reconstruction"]
        out["reconstruction_vs_siren_db"] = differences(rec, "siren")
        gains = out["reconstruction_vs_siren_db"]["cosmo"]["per_image"].values()
        wins = sum(g >= 1.0 for g in gains)
        out["goal_cosmo_siren_plus_1db"] = {"images_met": wins, "of": len(rec), "met": wins >= min(4, len(rec))}
    if "super_resolution" in section:
        sr = section["super_resolution"]
        out["sr_vs_bicubic_db"] = differences(sr, "bicubic")
        cosmo = out["sr_vs_bicubic_db"].get("cosmo", {}).get("mean", float("nan"))
        out["goal_sr_above_bicubic"] = {"cosmo_mean_db": cosmo, "met": cosmo > 0,
                                        "best": max(out["sr_vs_bicubic_db"].items(), key=lambda kv: kv[1]["mean"])[0]}
    if "denoising" in section:
        out["denoise_vs_noisy_db"] = differences(section["denoising"], "noisy")
    return out


def table(title: str, rows: dict, columns: list[str]) -> str:
    lines = [f"{title}", "| image | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in rows.items():
        cells = [f"{row[c]['psnr']:.2f} / {row[c]['ssim']:.3f}" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    means = [f"{np.mean([r[c]['psnr'] for r in rows.values()]):.2f} / "
             f"{np.mean([r[c]['ssim'] for r in rows.values()]):.3f}" for c in columns]
    lines.append("| mean | " + " | ".join(means) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128])
    ap.add_argument("--images", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=2048, help="pixels per step (0: all)")
    ap.add_argument("--budget", type=int, default=13_000, help="parameters of every network")
    ap.add_argument("--lr", type=float, default=None, help="Adam's rate for all (default: each activation's own)")
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
    if "siren" not in args.activations or "cosmo" not in args.activations:
        ap.error("--activations must include cosmo and siren (the comparison this benchmark makes)")
    out = {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "sizes": {}}
    for size in args.sizes:
        images = photos(args.images, size)
        section = measure_all(images, args)
        section["summary"] = summary(section)
        out["sizes"][str(size)] = section
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for size, section in out["sizes"].items():
        print(table(f"\n{size}x{size} reconstruction, PSNR dB / SSIM", section["reconstruction"], args.activations))
        if "super_resolution" in section:
            print(table(f"\n{size}x{size} {SR_SCALE}x super-resolution, PSNR dB / SSIM", section["super_resolution"],
                        ["bicubic", *args.activations]))
        if "denoising" in section:
            print(table(f"\n{size}x{size} denoising (sigma {args.denoise}), PSNR dB / SSIM", section["denoising"],
                        ["noisy", *args.activations]))
        print(json.dumps(section["summary"], indent=1))


if __name__ == "__main__":
    main()
