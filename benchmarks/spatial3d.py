"""The classic reconstruction backend (toolpath.tools.spatial3d.classic) against baselines measured in the run.

    python benchmarks/spatial3d.py [--pairs 50] [--skip-mindcube]

A. Synthetic pairs (toolpath.tools.spatial3d.synthetic: a textured room with boxes, ray-cast at 640x480 from
   known cameras, camera 1 turned 10–60° and moved 0.6–1.0 units; draws whose views do not share two
   differently oriented surfaces (≥ 15 % each) are redrawn, since one plane can leave the pose ambiguous for
   any two-view method; A′ keeps every draw). Median rotation error, median
   translation-direction error, and describe_camera_motion right (same movement bin, same turn side, angle
   within 5°) out of --pairs, for reconstruct_classic and for the plain OpenCV two-view recipe on the same
   matches (essential matrix by RANSAC + recoverPose: no rival check, no bundle adjustment); descriptions also
   against "no motion" (identity pose). A declined pair counts as wrong (and as an infinite error).
B. MindCube `among` scenes (../shared/data/mindcube): front/left/back/right views of one arrangement, the
   camera going round it. Expected yaw from view i to view j: yaw(j) − yaw(i) with front 0, left −90 (the camera
   moved to the arrangement's front-left and turned right: spatial.json says "front → left: moved left-front",
   and the front view's right side is what the left view looks at), back 180, right +90; a recovered pair is
   right within 30°. Per pair of registered views for reconstruct_classic (no intrinsics given; default
   options, and with the ASIFT fallback), against the two-view recipe on every pair (which claims whenever
   RANSAC returns anything); plus pairs of images from different scenes, which share nothing: how many poses
   each claims there.
C. Seconds for reconstruct_classic on 4 synthetic views of 640x480 (warm: imports and first-call costs paid;
   median of 3; the cold first call also shown), against the features + matching it starts with (the floor any
   feature-based method pays). Goal ≤ 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MINDCUBE = ROOT.parent / "shared" / "data" / "mindcube"
YAW = {"front": 0.0, "left": -90.0, "back": 180.0, "right": 90.0}


def two_view(images, Ks):
    """The plain OpenCV recipe on classic's own features and matches: essential matrix + recoverPose."""
    import cv2

    from toolpath.tools.spatial3d import classic as C
    from toolpath.tools.spatial3d import pairs as P

    opts = C.Options()
    a, b = (P._prepare(img, K, opts) for img, K in zip(images, Ks))
    m = P._match(a, b, opts.ratio)
    E_out = np.full((2, 4, 4), np.nan)
    E_out[0] = np.eye(4)
    if len(m) < 5:
        return E_out
    p1, p2 = C._normalized(a, m[:, 0]), C._normalized(b, m[:, 1])
    E, mask = cv2.findEssentialMat(p1, p2, np.eye(3), method=cv2.RANSAC, prob=0.999, threshold=1.0 / a.K[0, 0])
    if E is None:
        return E_out
    _, R, t, _ = cv2.recoverPose(E[:3], p1, p2, np.eye(3), mask=mask)
    E_out[1] = np.eye(4)
    E_out[1][:3, :3], E_out[1][:3, 3] = R, t.ravel()
    return E_out


def synthetic_rows(n: int, relief: bool = True) -> None:
    from toolpath.tools.spatial3d.classic import reconstruct_classic
    from toolpath.tools.spatial3d.poses import describe_camera_motion
    from toolpath.tools.spatial3d.scene import Reconstruction
    from toolpath.tools.spatial3d.synthetic import (
        direction_error_deg,
        random_pair,
        rotation_error_deg,
        same_description,
    )

    rows = {"classic": [], "two-view": [], "identity": []}
    redrawn = 0
    for seed in range(n):
        p = random_pair(seed, relief=relief)
        redrawn += p.redrawn
        said = describe_camera_motion(Reconstruction(p.points, p.extrinsics, np.stack([p.K] * 2)))
        r = reconstruct_classic(p.images, [p.K, p.K])
        candidates = (("classic", r.extrinsics, r), ("two-view", two_view(p.images, [p.K, p.K]), None),
                      ("identity", np.stack([np.eye(4)] * 2), None))
        for name, E, recon in candidates:
            if not np.isfinite(E[1]).all():
                rows[name].append((math.inf, math.inf, False))
                continue
            # The baselines have no points, so their movement threshold is taken from the truth's scene extent
            # scaled to their own baseline of 1 (what a unit-baseline reconstruction of this scene would hold).
            rec = recon or Reconstruction(_scaled_points(p, E), E, np.stack([p.K] * 2))
            rows[name].append((rotation_error_deg(E[1], p.extrinsics[1]),
                               direction_error_deg(E[1], p.extrinsics[1]) if name != "identity" else math.nan,
                               same_description(describe_camera_motion(rec), said)))
    kind = f"draws sharing < 2 surfaces redrawn: {redrawn}" if relief else "every draw kept, single-plane ones too"
    print(f"A{'' if relief else '′'}. synthetic pairs: {n} ({kind})")
    print(f"   {'':10} {'median rot err':>15} {'median dir err':>15} {'descriptions':>13} {'declined':>9} "
          f"{'wrong claims':>13}")
    for name, vals in rows.items():
        rot = statistics.median(v[0] for v in vals)
        dirs = [v[1] for v in vals if not math.isnan(v[1])]
        d = f"{statistics.median(dirs):.3f}°" if dirs else "—"
        right = sum(v[2] for v in vals)
        declined = sum(math.isinf(v[0]) for v in vals)
        wrong = sum(not math.isinf(v[0]) and not v[2] for v in vals)  # a pose claimed, and its description wrong
        print(f"   {name:10} {rot:14.3f}° {d:>15} {right:>8} / {n} {declined:>9} {wrong:>13}")
    med = {name: (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
           for name, vals in rows.items() if name != "identity"}
    print(f"   ratio two-view / classic: rotation error {med['two-view'][0] / med['classic'][0]:.2f}x, direction "
          f"error {med['two-view'][1] / med['classic'][1]:.2f}x  (goals: rotation ≤ 2°, direction ≤ 5°, "
          f"descriptions {n} of {n})")


def _scaled_points(p, E) -> np.ndarray:
    """The true visible points, in the units of a reconstruction whose camera baseline is 1."""
    true_baseline = np.linalg.norm(-p.extrinsics[1][:3, :3].T @ p.extrinsics[1][:3, 3])
    return p.points / max(true_baseline, 1e-9)


def mindcube_rows() -> None:
    from PIL import Image

    manifest = json.loads((MINDCUBE / "manifest.json").read_text())
    scenes = []
    for s in manifest:
        if s["setting"] == "among":
            names = [Path(f).name.split("_")[0] for f in s["images"]]
            scenes.append((names, [np.asarray(Image.open(MINDCUBE / f).convert("RGB")) for f in s["images"]]))
    if not scenes:
        print("B. MindCube among: no scenes under ../shared/data/mindcube; not measured")
        return
    n_pairs = sum(len(n) * (len(n) - 1) // 2 for n, _ in scenes)
    print(f"B. MindCube among: {len(scenes)} scenes, {n_pairs} view pairs "
          "(right = yaw within 30° of the expected step)")
    base = _two_view_among(scenes)
    for label, options in (("classic", {}), ("classic, ASIFT fallback (affine='auto')", {"affine": "auto"})):
        ours = _classic_among(scenes, **options)
        print(f"   {label}: poses claimed for {ours['claimed']} pairs in {ours['scenes']} scenes, "
              f"right {ours['right']} ({_pct(ours['right'], ours['claimed'])}); "
              f"declined {n_pairs - ours['claimed']} pairs, {len(scenes) - ours['scenes']} scenes entirely; "
              f"{ours['seconds']:.1f} s median per scene")
        if ours["claimed"] and base["right"]:
            ratio = (ours["right"] / ours["claimed"]) / (base["right"] / base["claimed"])
            print(f"     precision ratio to two-view: {ratio:.2f}x (goal: ≥ 80% right where claimed)")
        else:
            print("     precision ratio to two-view: n/a (nothing claimed; goal: ≥ 80% right where claimed)")
    print(f"   two-view on every pair: poses claimed for {base['claimed']} pairs, right {base['right']} "
          f"({_pct(base['right'], base['claimed'])})")
    fp_ours, fp_base, n_cross = _cross_scene(manifest)
    print(f"   images from different scenes: classic claims {fp_ours} of {n_cross} pairs, two-view claims {fp_base}")


def _classic_among(scenes, **options) -> dict:
    from toolpath.tools.spatial3d.classic import reconstruct_classic
    from toolpath.tools.spatial3d.poses import yaw_between

    out = {"claimed": 0, "right": 0, "scenes": 0}
    seconds = []
    for names, images in scenes:
        t = time.perf_counter()
        r = reconstruct_classic(images, **options)
        seconds.append(time.perf_counter() - t)
        here = [(i, j) for i in range(len(images)) for j in range(i + 1, len(images))
                if r.registered[i] and r.registered[j]]
        out["claimed"] += len(here)
        out["scenes"] += bool(here)
        out["right"] += sum(_within(yaw_between(r.extrinsics[i], r.extrinsics[j]), YAW[names[j]] - YAW[names[i]])
                            for i, j in here)
    out["seconds"] = statistics.median(seconds)
    return out


def _two_view_among(scenes) -> dict:
    from toolpath.tools.spatial3d.poses import yaw_between

    out = {"claimed": 0, "right": 0}
    for names, images in scenes:
        for i in range(len(images)):
            for j in range(i + 1, len(images)):
                E = two_view([images[i], images[j]], [_guess(images[i]), _guess(images[j])])
                if np.isfinite(E[1]).all():
                    out["claimed"] += 1
                    out["right"] += _within(yaw_between(E[0], E[1]), YAW[names[j]] - YAW[names[i]])
    return out


def _cross_scene(manifest) -> tuple[int, int, int]:
    from PIL import Image

    from toolpath.tools.spatial3d.classic import reconstruct_classic

    scenes = [s for s in manifest if s["setting"] in ("among", "around")]
    ours = base = 0
    for k, s in enumerate(scenes):
        other = scenes[(k + 1) % len(scenes)]
        images = [np.asarray(Image.open(MINDCUBE / f).convert("RGB")) for f in (s["images"][0], other["images"][-1])]
        ours += int(reconstruct_classic(images).registered.all())
        base += int(np.isfinite(two_view(images, [_guess(im) for im in images])[1]).all())
    return ours, base, len(scenes)


def _guess(image) -> np.ndarray:
    from toolpath.tools.spatial3d.classic import _guess_K

    return _guess_K(image.shape[1], image.shape[0])


def _within(yaw: float, expected: float, tol: float = 30.0) -> bool:
    return abs((yaw - expected + 180.0) % 360.0 - 180.0) <= tol


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "n/a"


def timing_rows() -> None:
    from toolpath.tools.spatial3d import classic as C
    from toolpath.tools.spatial3d import pairs as P
    from toolpath.tools.spatial3d.synthetic import random_views

    v = random_views(0, n=4)
    Ks = [v.K] * 4
    t = time.perf_counter()
    r = C.reconstruct_classic(v.images, Ks)
    cold = time.perf_counter() - t
    warm = []
    for _ in range(3):
        t = time.perf_counter()
        r = C.reconstruct_classic(v.images, Ks)
        warm.append(time.perf_counter() - t)
    floor = []
    for _ in range(3):
        t = time.perf_counter()
        views = [P._prepare(img, K, C.Options()) for img, K in zip(v.images, Ks)]
        for i in range(4):
            for j in range(i + 1, 4):
                P._match(views[i], views[j], 0.75)
        floor.append(time.perf_counter() - t)
    w, f = statistics.median(warm), statistics.median(floor)
    print(f"C. 4 views of 640x480: reconstruct_classic {w:.2f} s warm (cold first call {cold:.2f} s), "
          f"registered {int(r.registered.sum())}/4, reprojection RMSE {r.info.get('reprojection_rmse_after_ba')} px")
    print(f"   features + matching alone {f:.2f} s; ratio {w / f:.2f}x (goal: ≤ 5 s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--skip-mindcube", action="store_true")
    args = ap.parse_args()
    synthetic_rows(args.pairs)
    synthetic_rows(args.pairs, relief=False)
    if not args.skip_mindcube:
        mindcube_rows()
    timing_rows()


if __name__ == "__main__":
    main()
