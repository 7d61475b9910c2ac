"""The spatial tools as a tool-calling model meets them (Tool.call on named images), against baselines in the run.

    python benchmarks/spatial_tools.py [--pairs 20] [--scenes 10] [--json]

A. camera_motion on synthetic room pairs (toolpath.tools.spatial3d.synthetic, 480x360, camera 1 turned 10-60°
   either way and moved): turn side right (of the pairs whose true turn is 15° or more), declined pairs, median
   |yaw error|, without the camera's field of view (the focal guessed) against with `fov_deg` given (the
   baseline: the same tool told the truth). A declined pair counts as a wrong side.
B. locate and trace on the pybullet tabletop's renders (seeds 0..--scenes-1): locate's point on the object named
   (the simulator's segmentation), and trace's first point on the cube to pick and last on the plate; against
   the blind baseline of the image centre (what a model that cannot see would point at).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _ctx(paths):
    from toolpath.tools.registry import ToolContext

    return ToolContext(images={f"image_{i}": p for i, p in enumerate(paths, 1)})


def camera_motion(pairs: int, tmp: Path) -> dict:
    from PIL import Image

    from toolpath.tools.registry import ToolError, get_tool
    from toolpath.tools.spatial3d import synthetic
    from toolpath.tools.spatial3d.poses import yaw_between

    tool = get_tool("camera_motion")
    rows = {"focal guessed": [], "fov_deg given": []}
    seconds = []
    for seed in range(100, 100 + pairs):
        p = synthetic.random_pair(seed, width=480, height=360)
        paths = [tmp / f"{seed}_{i}.png" for i in range(2)]
        for path, im in zip(paths, p.images):
            Image.fromarray(im).save(path)
        truth = yaw_between(p.extrinsics[0], p.extrinsics[1])
        for name, extra in (("focal guessed", {}), ("fov_deg given", {"fov_deg": 75.0})):
            t = time.perf_counter()
            try:
                d = tool.call({"image_a": "image_1", "image_b": "image_2", **extra}, _ctx(paths)).data
                rows[name].append((truth, d["yaw_deg"]))
            except ToolError:
                rows[name].append((truth, None))
            seconds.append(time.perf_counter() - t)
    out = {}
    for name, r in rows.items():
        turned = [(t, y) for t, y in r if abs(t) >= 15]
        out[name] = {"side_right": sum(y is not None and np.sign(y) == np.sign(t) for t, y in turned) / len(turned),
                     "declined": sum(y is None for _, y in r) / len(r),
                     "median_yaw_error_deg": statistics.median(abs(y - t) for t, y in r if y is not None)}
    out["pairs"] = pairs
    out["median_s_per_call"] = statistics.median(seconds)
    out["yaw_error_ratio_guessed_over_given"] = (out["focal guessed"]["median_yaw_error_deg"]
                                                 / max(1e-9, out["fov_deg given"]["median_yaw_error_deg"]))
    return out


def tabletop(scenes: int, tmp: Path) -> dict:
    from PIL import Image

    from toolpath.sandboxes.robot_sim import TabletopSandbox
    from toolpath.tools.registry import get_tool

    locate, trace = get_tool("locate"), get_tool("trace")
    hits = {"locate": [], "centre (locate)": [], "trace": [], "centre (trace)": []}
    for seed in range(scenes):
        with TabletopSandbox(seed=seed) as sb:
            obs = sb.observe()
            truth, seg = sb.objects_truth(), sb.segmentation()
        h, w = seg.shape
        path = tmp / f"table{seed}.png"
        Image.fromarray(obs.rgb).save(path)
        ctx = _ctx([path])

        def on(point, index, w=w, h=h, seg=seg):
            u, v = min(int(point[0] * w / 1000), w - 1), min(int(point[1] * h / 1000), h - 1)
            return bool(seg[v, u] == index)

        for i, t in enumerate(truth):
            if (seg == i).sum() < 50:
                continue  # hidden: nothing to point at
            d = locate.call({"image": "image_1", "object": t["name"]}, ctx).data
            hits["locate"].append(bool(d["found"]) and on(d["point"], i))
            hits["centre (locate)"].append(on([500, 500], i))
        cube = next((i for i, t in enumerate(truth) if t["kind"] == "cube" and (seg == i).sum() >= 50), None)
        plate = next((i for i, t in enumerate(truth) if t["kind"] == "plate" and (seg == i).sum() >= 50), None)
        if cube is None or plate is None:
            continue
        d = trace.call({"image": "image_1", "instruction": f"put the {truth[cube]['name']} on the "
                                                           f"{truth[plate]['name']}"}, ctx).data
        hits["trace"].append(bool(d["found"]) and on(d["trace"][0], cube) and on(d["trace"][-1], plate))
        hits["centre (trace)"].append(on([500, 500], cube) and on([500, 500], plate))
    return {k: {"right": sum(v) / max(1, len(v)), "n": len(v)} for k, v in hits.items()} | {"scenes": scenes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--scenes", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["TOOLPATH_HOME"] = str(Path(tmp) / "home")  # a cold reconstruction cache: every pair is solved
        result = {"camera_motion": camera_motion(args.pairs, Path(tmp)), "tabletop": tabletop(args.scenes, Path(tmp))}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    cm = result["camera_motion"]
    print(f"A. camera_motion on {cm['pairs']} synthetic pairs ({cm['median_s_per_call']:.2f} s per call, median)")
    for name in ("focal guessed", "fov_deg given"):
        r = cm[name]
        print(f"   {name:<14} turn side right {r['side_right']:.0%}, declined {r['declined']:.0%}, "
              f"median |yaw error| {r['median_yaw_error_deg']:.2f}°")
    print(f"   yaw error, guessed / given: {cm['yaw_error_ratio_guessed_over_given']:.1f}x")
    tt = result["tabletop"]
    print(f"B. tabletop, {tt['scenes']} scenes")
    for k in ("locate", "centre (locate)", "trace", "centre (trace)"):
        print(f"   {k:<16} {tt[k]['right']:.0%} of {tt[k]['n']}")


if __name__ == "__main__":
    main()
