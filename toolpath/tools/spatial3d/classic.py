"""The `classic` reconstruction backend: structure from motion with OpenCV and SciPy, offline, CPU only.

SIFT features (RootSIFT-normalised; optionally affine-simulated, ASIFT), Lowe's ratio test plus a mutual
check, an essential matrix with RANSAC for every pair (geometric verification) checked against the poses a
plane's homography allows and for stability over half-samples, the first pair's pose from it (recoverPose),
further views registered one at a time by PnP + RANSAC on the points already triangulated, triangulation of
what the new view adds, and bundle adjustment (scipy.optimize.least_squares: Rodrigues rotations, an
analytic Jacobian in its sparse structure, Huber loss) after each registration and once more at the end.

Honesty over coverage: a view is registered only when enough inliers support it, and its confidence is the
number of observations that agree with its final pose (reprojection within 2 px at the working size). A view
that cannot be registered keeps NaN extrinsics and confidence 0; nothing is ever guessed.

Gauge: the world is camera 0's frame (extrinsics[0] = identity) whenever camera 0 is registered; otherwise
that of the first registered camera, named in info["world_camera"]. Scale is arbitrary for one moving camera,
so it is fixed by making the distance between the world camera and its best-connected partner 1.

Images are worked on at most `max_side` pixels on their longer side (features, thresholds and the RMSE in
info are in those pixels); the intrinsics returned are for the images as given.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .classic_options import Options, options_from
from .pairs import _normalized, _prepare, _tracks, _verified_pairs, _View
from .scene import Reconstruction

GUESSED_FOCAL = 1.2  # × the longer image side, when no intrinsics are given: COLMAP's default prior (≈ 45° FOV)


@dataclass
class _Model:
    """The growing reconstruction: poses (R, t) of registered views and 3D points, one per track."""

    tracks: list[list[tuple[int, int]]]  # (view, keypoint) observations of each track
    poses: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    points: np.ndarray = field(default=None)  # type: ignore[assignment]  # (T, 3), NaN = not triangulated
    support: dict[int, int] = field(default_factory=dict)  # inliers behind each pose (final: agreeing observations)


def reconstruct_classic(images: list[np.ndarray], intrinsics: list[np.ndarray] | None = None,
                        **options) -> Reconstruction:
    """Reconstruct cameras and a coloured point cloud from RGB images (HxWx3 uint8).

    `intrinsics`: one 3x3 K per image in its own pixels; when None, a pinhole with focal
    GUESSED_FOCAL × the longer side and the principal point at the centre. `options`: fields of
    classic_options.Options."""
    opts = options_from(options)
    started = time.perf_counter()
    images = _check_images(images)
    Ks = _check_intrinsics(intrinsics, images)
    info: dict = {"focal_guessed": intrinsics is None, "declined": {}}
    if len(images) == 1:  # its own frame by definition; no second view, so no depth and no points
        info["seconds"] = round(time.perf_counter() - started, 3)
        return Reconstruction(np.zeros((0, 6)), np.eye(4)[None], np.asarray(Ks), confidence=np.ones(1),
                              image_sizes=_sizes(images), backend="classic", info=info)
    model, views = _attempt(images, Ks, opts, opts.affine == "always", info)
    if opts.affine == "auto" and len(model.poses) < len(images) and len(images) <= opts.affine_max_views:
        # Wide baselines (views 60–90° apart) defeat plain SIFT; affine-simulated SIFT (ASIFT) matches across
        # them at several times the cost, so it is paid only when plain SIFT left a view unregistered.
        info2: dict = {"focal_guessed": info["focal_guessed"], "declined": {}}
        model2, views2 = _attempt(images, Ks, opts, True, info2)
        if len(model2.poses) > len(model.poses):
            info2["plain_sift"] = {k: info[k] for k in ("registered", "declined") if k in info}
            model, views, info = model2, views2, info2
    info["seconds"] = round(time.perf_counter() - started, 3)
    return _result(model, views, Ks, images, info)


def _attempt(images, Ks, opts: Options, affine: bool, info: dict) -> tuple[_Model, list[_View]]:
    """One reconstruction with one kind of feature; `info` collects its statistics."""
    views = [_prepare(img, K, opts, affine) for img, K in zip(images, Ks)]
    info["features_kind"] = "asift" if affine else "sift"
    info["work_size"] = [list(v.rgb.shape[1::-1]) for v in views]
    info["features"] = [len(v.xy) for v in views]
    pairs = _verified_pairs(views, opts, info)
    model = _Model(tracks=_tracks(pairs))
    model.points = np.full((len(model.tracks), 3), np.nan)
    if _initialize(model, views, pairs, opts, info):
        _register_rest(model, views, opts, info)
        _bundle(model, views, opts, info, final=True)
        _final_check(model, views, opts, info)
    info["registered"] = sorted(int(v) for v in model.poses)
    return model, views


# ---------------------------------------------------------------------------------------------- inputs


def _check_images(images) -> list[np.ndarray]:
    if images is None or len(images) == 0:
        raise ValueError("reconstruct_classic: no images given; at least one is needed (two to recover a pose)")
    out = []
    for n, img in enumerate(images):
        a = np.asarray(img)
        if a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"reconstruct_classic: image {n} has shape {a.shape}; expected HxWx3 RGB "
                             "(convert grayscale or RGBA first)")
        if a.dtype != np.uint8:
            raise ValueError(f"reconstruct_classic: image {n} has dtype {a.dtype}; expected uint8 (0..255)")
        if min(a.shape[:2]) < 16:
            raise ValueError(f"reconstruct_classic: image {n} is {a.shape[1]}x{a.shape[0]}; too small to match")
        out.append(np.ascontiguousarray(a))
    return out


def _check_intrinsics(intrinsics, images) -> list[np.ndarray]:
    if intrinsics is None:
        return [_guess_K(img.shape[1], img.shape[0]) for img in images]
    if len(intrinsics) != len(images):
        raise ValueError(f"reconstruct_classic: {len(intrinsics)} intrinsics for {len(images)} images")
    Ks = [np.asarray(K, dtype=np.float64) for K in intrinsics]
    for n, K in enumerate(Ks):
        if K.shape != (3, 3) or not np.isfinite(K).all() or K[0, 0] <= 0 or K[1, 1] <= 0:
            raise ValueError(f"reconstruct_classic: intrinsics {n} must be a finite 3x3 K with positive focals")
    return Ks


def _guess_K(width: int, height: int) -> np.ndarray:
    f = GUESSED_FOCAL * max(width, height)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def _sizes(images) -> list[tuple[int, int]]:
    return [(int(a.shape[1]), int(a.shape[0])) for a in images]


# ------------------------------------------------------------------------------------------ geometry


def _project(K, R, t, X) -> tuple[np.ndarray, np.ndarray]:
    """Pixels and camera depths of world points X (n, 3)."""
    c = X @ R.T + t
    z = c[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = c[:, :2] / z[:, None]
    return uv @ K[:2, :2].T + K[:2, 2], z


def _triangulate(views, model: _Model, opts: Options, only: set[int] | None = None) -> int:
    """Triangulate tracks seen by ≥ 2 registered views and not yet placed (from their first and last
    registered observations); keep a point only if it lies in front of, and reprojects near, every registered
    view that sees it. `only`: restrict to tracks seen by these views. Returns how many points were added."""
    import cv2

    added = 0
    jobs: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for tid, obs in enumerate(model.tracks):
        if np.isfinite(model.points[tid, 0]):
            continue
        reg = [(v, k) for v, k in obs if v in model.poses]
        if len(reg) < 2 or (only is not None and not any(v in only for v, _ in reg)):
            continue
        (va, ka), (vb, kb) = reg[0], reg[-1]
        jobs.setdefault((va, vb), []).append((tid, ka, kb))
    for (va, vb), items in jobs.items():
        tids = np.array([it[0] for it in items])
        ka = np.array([it[1] for it in items])
        kb = np.array([it[2] for it in items])
        Pa = np.hstack([model.poses[va][0], model.poses[va][1][:, None]])
        Pb = np.hstack([model.poses[vb][0], model.poses[vb][1][:, None]])
        Xh = cv2.triangulatePoints(Pa, Pb, _normalized(views[va], ka).T, _normalized(views[vb], kb).T)
        with np.errstate(divide="ignore", invalid="ignore"):
            X = (Xh[:3] / Xh[3]).T
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(X).all(axis=1) & (_angle_deg(model, va, vb, X) >= opts.min_angle_deg)
        ok &= _consistent(views, model, tids, X, opts.pnp_px)
        model.points[tids[ok]] = X[ok]
        added += int(ok.sum())
    return added


def _angle_deg(model: _Model, va: int, vb: int, X: np.ndarray) -> np.ndarray:
    """The angle at each point between the rays to the two camera centres."""
    ca, cb = (-model.poses[v][0].T @ model.poses[v][1] for v in (va, vb))
    ra, rb = ca - X, cb - X
    cos = (ra * rb).sum(axis=1) / (np.linalg.norm(ra, axis=1) * np.linalg.norm(rb, axis=1) + 1e-12)
    return np.degrees(np.arccos(np.clip(cos, -1, 1)))


def _consistent(views, model: _Model, tids: np.ndarray, X: np.ndarray, px: float) -> np.ndarray:
    """Which candidate points lie in front of, and reproject within px of, every registered view seeing them."""
    ok = np.ones(len(tids), bool)
    for v, (R, t) in model.poses.items():
        kv = np.array([next((k for w, k in model.tracks[tid] if w == v), -1) for tid in tids], dtype=np.int64)
        sel = np.flatnonzero((kv >= 0) & ok)
        if len(sel):
            uv, z = _project(views[v].K, R, t, X[sel])
            err = np.linalg.norm(uv - views[v].xy[kv[sel]], axis=1)
            ok[sel[~((z > 0) & (err <= px))]] = False
    return ok


# ------------------------------------------------------------------------------ building the model


def _initialize(model: _Model, views, pairs, opts: Options, info: dict) -> bool:
    """The first two views from a verified pair's essential matrix: camera 0 and its best partner if it
    has one (so the world is camera 0's frame), else the best-connected pair."""
    ranked = sorted((p for p in pairs.values() if p.R is not None), key=lambda p: (0 not in (p.i, p.j), -p.support))
    for p in ranked:
        model.poses = {p.i: (np.eye(3), np.zeros(3)), p.j: (p.R, p.t)}
        model.points[:] = np.nan
        n = _triangulate(views, model, opts)
        if n >= opts.min_pose_inliers:
            model.support = {p.i: len(p.idx), p.j: len(p.idx)}
            info["initial_pair"] = [p.i, p.j]
            info["initial_points"] = n
            _bundle(model, views, opts, info)
            return True
    model.poses = {}
    for v in range(len(views)):
        info["declined"][str(v)] = _why_no_pair(v, info["pairs"], opts)
    return False


def _why_no_pair(v: int, stats: dict, opts: Options) -> str:
    """In words, why view v's best pair could not start a reconstruction."""
    mine = {k: s for k, s in stats.items() if str(v) in k.split("-")}
    if not mine:
        return "no other view to pair with"
    k, s = max(mine.items(), key=lambda kv: (kv[1]["support"], kv[1]["matches"]))
    if s["support"] < opts.min_pair_inliers:
        return (f"no pair shares enough verified matches (best {k}: {s['support']} of {s['matches']} matches "
                f"agree, < {opts.min_pair_inliers})")
    if s["evidence"] < opts.min_evidence:
        return (f"pair {k}: {s['support']} matches fit two different poses about equally (evidence {s['evidence']} < "
                f"{opts.min_evidence}): one plane seen, or no translation")
    if not s["pose"]:
        return (f"pair {k}: its pose is not pinned down (wobbles {s['spread'][0]}° in rotation, {s['spread'][1]}° in "
                f"direction over half-samples): matches clustered, on a line, or too little translation")
    return f"pair {k}: too few points with enough parallax to triangulate (< {opts.min_pose_inliers})"


def _register_rest(model: _Model, views, opts: Options, info: dict) -> None:
    """Add views by PnP, the one seeing most triangulated points first, until none has enough support."""
    failed: set[int] = set()
    while True:
        candidates = [v for v in range(len(views)) if v not in model.poses and v not in failed]
        if not candidates:
            return
        seen = {v: _correspondences(model, v) for v in candidates}
        v = max(candidates, key=lambda c: len(seen[c][0]))
        tids, kps = seen[v]
        if len(tids) < opts.min_pose_inliers:
            for c in candidates:
                info["declined"][str(c)] = f"sees {len(seen[c][0])} reconstructed points (< {opts.min_pose_inliers})"
            return
        pose = _pnp(views[v], model.points[tids], kps, opts)
        if pose is None or pose[2] < opts.min_pose_inliers:
            failed.add(v)
            info["declined"][str(v)] = f"PnP found {0 if pose is None else pose[2]} inliers (< {opts.min_pose_inliers})"
            continue
        model.poses[v] = (pose[0], pose[1])
        model.support[v] = pose[2]
        _triangulate(views, model, opts, only={v})
        _bundle(model, views, opts, info)


def _correspondences(model: _Model, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Tracks with a 3D point that view v observes, and v's keypoint in each."""
    tids, kps = [], []
    for tid, obs in enumerate(model.tracks):
        if np.isfinite(model.points[tid, 0]):
            for w, k in obs:
                if w == v:
                    tids.append(tid)
                    kps.append(k)
    return np.array(tids, dtype=np.int64), np.array(kps, dtype=np.int64)


def _pnp(view: _View, X: np.ndarray, kps: np.ndarray, opts: Options):
    import cv2

    ok, rvec, tvec, inl = cv2.solvePnPRansac(X, view.xy[kps], view.K, None, iterationsCount=2000,
                                             reprojectionError=opts.pnp_px, confidence=0.9999,
                                             flags=cv2.SOLVEPNP_EPNP)
    if not ok or inl is None or len(inl) < 6:
        return None
    inl = inl.ravel()
    rvec, tvec = cv2.solvePnPRefineLM(X[inl], view.xy[kps][inl], view.K, None, rvec, tvec)
    R = cv2.Rodrigues(rvec)[0]
    return R, tvec.ravel(), int(len(inl))


def _final_check(model: _Model, views, opts: Options, info: dict) -> None:
    """Confidence = observations that agree with the final model; a view left with too few loses its pose."""
    obs = _observations(model)
    err = np.linalg.norm(_residuals_all(model, views, obs), axis=1) if len(obs[0]) else np.zeros(0)
    for v in sorted(model.poses):
        agree = int(np.sum((obs[0] == v) & (err <= opts.inlier_px)))
        model.support[v] = agree
        if agree < opts.min_pose_inliers:
            info["declined"][str(v)] = f"only {agree} observations agree with its pose after adjustment"
            del model.poses[v]


# ------------------------------------------------------------------------------- bundle adjustment


def _bundle(model: _Model, views, opts: Options, info: dict, final: bool = False) -> None:
    """Refine every registered pose but the first (which fixes the frame) and the points, on reprojection
    error with a Huber loss; then drop observations the refined model disowns (> pnp_px). Between
    registrations a lighter pass (a third of the points, fewer iterations) is enough to keep PnP honest."""
    obs = _observations(model)
    if len(obs[0]) == 0:
        return
    before = _rmse(model, views, obs)
    entry = {"views": len(model.poses), "observations": int(len(obs[0])), "final": final,
             "rmse_before": round(before, 3)}
    if opts.bundle_adjust:
        _least_squares(model, views, obs, opts, final)
    after = _rmse(model, views, obs)
    entry["rmse_after"] = round(after, 3)
    info.setdefault("ba", []).append(entry)
    _drop_outliers(model, views, opts.pnp_px)


def _observations(model: _Model, limit: int | None = None, seed: int = 0):
    """(view, track, keypoint) arrays for every observation of a placed point by a registered view."""
    placed = np.flatnonzero(np.isfinite(model.points[:, 0]))
    if limit is not None and len(placed) > limit:
        placed = np.sort(np.random.default_rng(seed).choice(placed, limit, replace=False))
    cams, tids, kps = [], [], []
    for tid in placed:
        for v, k in model.tracks[tid]:
            if v in model.poses:
                cams.append(v)
                tids.append(tid)
                kps.append(k)
    return np.array(cams, np.int64), np.array(tids, np.int64), np.array(kps, np.int64)


def _residuals_all(model: _Model, views, obs) -> np.ndarray:
    cams, tids, kps = obs
    res = np.empty((len(cams), 2))
    for v in np.unique(cams):
        sel = cams == v
        uv, z = _project(views[v].K, *model.poses[v], model.points[tids[sel]])
        r = uv - views[v].xy[kps[sel]]
        r[~(z > 0)] = 1e3  # behind the camera: as wrong as can be
        res[sel] = r
    return res


def _rmse(model, views, obs) -> float:
    placed = np.isfinite(model.points[obs[1], 0])  # points dropped since obs was taken do not count
    obs = tuple(a[placed] for a in obs)
    if len(obs[0]) == 0:
        return math.nan
    r = _residuals_all(model, views, obs)
    return float(np.sqrt(np.mean(np.sum(r * r, axis=1))))


def _rotate(rvecs: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Rodrigues' formula, vectorised: rotate each row of X by the matching rotation vector."""
    theta = np.linalg.norm(rvecs, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(theta > 1e-12, rvecs / theta, 0.0)
    cos, sin = np.cos(theta), np.sin(theta)
    return X * cos + np.cross(k, X) * sin + k * (k * X).sum(axis=1, keepdims=True) * (1 - cos)


def _least_squares(model: _Model, views, obs_all, opts: Options, final: bool) -> None:
    """scipy's trust-region least squares over (Rodrigues vector, t) of every free camera and the points, with
    the Jacobian computed analytically into its fixed sparse structure (2 rows per observation: 6 camera
    and 3 point columns), which is what makes a few thousand points take a fraction of a second."""
    import cv2
    from scipy.optimize import least_squares
    from scipy.sparse import csr_matrix

    limit = opts.max_ba_points if final else opts.max_ba_points // 3
    obs = _observations(model, limit, opts.seed) if limit else obs_all
    cams, tids, kps = obs
    ref = min(model.poses)  # the frame-defining camera stays put
    free = [v for v in sorted(model.poses) if v != ref]
    slot = {v: n for n, v in enumerate(free)}
    pts, pt_col = np.unique(tids, return_inverse=True)
    nc, n = 6 * len(free), len(cams)
    x0 = np.concatenate([np.concatenate([cv2.Rodrigues(model.poses[v][0])[0].ravel(), model.poses[v][1]])
                         for v in free] + [model.points[pts].ravel()])
    K = np.stack([views[v].K for v in cams])
    target = np.stack([views[v].xy[k] for v, k in zip(cams, kps)])
    cam = np.array([slot.get(v, -1) for v in cams])
    moves = cam >= 0
    ref_r = cv2.Rodrigues(model.poses[ref][0])[0].ravel()

    def unpack(x):
        cp = np.vstack([x[:nc].reshape(-1, 6), np.concatenate([ref_r, model.poses[ref][1]])[None]])
        return cp[cam], x[nc:].reshape(-1, 3)  # cam = −1 picks the fixed camera appended last

    def project(x):
        cp, X = unpack(x)
        Xo = X[pt_col]
        c = _rotate(cp[:, :3], Xo) + cp[:, 3:]
        z = np.where(np.abs(c[:, 2]) < 1e-9, 1e-9, c[:, 2])
        return cp, Xo, c, z

    def fun(x):
        _, _, c, z = project(x)
        u = K[:, 0, 0] * c[:, 0] / z + K[:, 0, 1] * c[:, 1] / z + K[:, 0, 2]
        v = K[:, 1, 1] * c[:, 1] / z + K[:, 1, 2]
        return np.stack([u - target[:, 0], v - target[:, 1]], axis=1).ravel()

    # Sparse structure, fixed: per observation, rows (2k, 2k+1) × [3 point columns, 6 camera columns if free].
    pcols = nc + 3 * pt_col[:, None] + np.arange(3)
    ccols = 6 * np.maximum(cam, 0)[:, None] + np.arange(6)
    rows = np.concatenate([np.repeat(2 * np.arange(n) + d, 3) for d in (0, 1)] +
                          [np.repeat(2 * np.flatnonzero(moves) + d, 6) for d in (0, 1)])
    cols = np.concatenate([pcols.ravel(), pcols.ravel(), ccols[moves].ravel(), ccols[moves].ravel()])

    def jac(x):
        cp, Xo, c, z = project(x)
        fx, s, fy = K[:, 0, 0], K[:, 0, 1], K[:, 1, 1]
        # d(u, v)/d(camera point): the pinhole's derivative.
        du = np.stack([fx / z, s / z, -(fx * c[:, 0] + s * c[:, 1]) / z**2], axis=1)
        dv = np.stack([np.zeros(n), fy / z, -fy * c[:, 1] / z**2], axis=1)
        R = _rotation_matrices(cp[:, :3])
        dX = R  # d(camera point)/d(world point)
        dr = _drotate(cp[:, :3], R, Xo)  # d(camera point)/d(rotation vector)
        du_dX, dv_dX = np.einsum("ni,nij->nj", du, dX), np.einsum("ni,nij->nj", dv, dX)
        du_c = np.hstack([np.einsum("ni,nij->nj", du, dr), du])[moves]  # t enters with identity
        dv_c = np.hstack([np.einsum("ni,nij->nj", dv, dr), dv])[moves]
        data = np.concatenate([du_dX.ravel(), dv_dX.ravel(), du_c.ravel(), dv_c.ravel()])
        return csr_matrix((data, (rows, cols)), shape=(2 * n, len(x0)))

    sol = least_squares(fun, x0, jac=jac, method="trf", loss="huber", f_scale=1.0, x_scale="jac",
                        ftol=1e-5, xtol=1e-8, max_nfev=50 if final else 15, tr_solver="lsmr")
    cp = sol.x[:nc].reshape(-1, 6)
    for v in free:
        model.poses[v] = (cv2.Rodrigues(cp[slot[v], :3])[0], cp[slot[v], 3:].copy())
    model.points[pts] = sol.x[nc:].reshape(-1, 3)
    if limit and len(obs[0]) < len(obs_all[0]):
        _retriangulate_rest(model, views, pts, opts)


def _rotation_matrices(rvecs: np.ndarray) -> np.ndarray:
    """Rodrigues vectors (n, 3) → rotation matrices (n, 3, 3)."""
    theta = np.linalg.norm(rvecs, axis=1)
    k = np.where(theta[:, None] > 1e-12, rvecs / np.maximum(theta, 1e-12)[:, None], 0.0)
    S = _skew(k)
    c, s = np.cos(theta)[:, None, None], np.sin(theta)[:, None, None]
    return np.eye(3) + s * S + (1 - c) * (S @ S)


def _skew(v: np.ndarray) -> np.ndarray:
    S = np.zeros(v.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2], S[..., 1, 2] = -v[..., 2], v[..., 1], -v[..., 0]
    S[..., 1, 0], S[..., 2, 0], S[..., 2, 1] = v[..., 2], -v[..., 1], v[..., 0]
    return S


def _drotate(rvecs: np.ndarray, R: np.ndarray, X: np.ndarray) -> np.ndarray:
    """d(R(r) X)/dr, (n, 3, 3): −R [X]× (r rᵀ + (Rᵀ − I)[r]×) / |r|² (Gallego & Yezzi 2015); −[X]× at r = 0.
    """
    theta2 = np.sum(rvecs * rvecs, axis=1)
    Sx = _skew(X)
    small = theta2 < 1e-16
    outer = rvecs[:, :, None] * rvecs[:, None, :]
    M = outer + (np.transpose(R, (0, 2, 1)) - np.eye(3)) @ _skew(rvecs)
    J = -R @ Sx @ (M / np.where(small, 1.0, theta2)[:, None, None])
    J[small] = -Sx[small]
    return J


def _retriangulate_rest(model: _Model, views, adjusted: np.ndarray, opts: Options) -> None:
    """Points left out of the adjustment are re-placed from the adjusted cameras."""
    rest = np.setdiff1d(np.flatnonzero(np.isfinite(model.points[:, 0])), adjusted)
    model.points[rest] = np.nan
    _triangulate(views, model, opts)


def _drop_outliers(model: _Model, views, px: float) -> None:
    """Forget points that some registered view sees far from where the model puts them."""
    obs = _observations(model)
    if len(obs[0]) == 0:
        return
    r = np.linalg.norm(_residuals_all(model, views, obs), axis=1)
    bad = np.unique(obs[1][r > 2 * px])
    model.points[bad] = np.nan


# ----------------------------------------------------------------------------------------- output


def _result(model: _Model, views, Ks, images, info: dict) -> Reconstruction:
    n = len(views)
    ext = np.full((n, 4, 4), np.nan)
    conf = np.zeros(n)
    pts = np.zeros((0, 6))
    if model.poses:
        world = 0 if 0 in model.poses else min(model.poses)
        Rw, tw = model.poses[world]
        partner = _partner(model, world)
        scale = 1.0
        if partner is not None:
            Rp, tp = model.poses[partner]
            baseline = np.linalg.norm(-Rp.T @ tp + Rw.T @ tw)
            scale = 1.0 / baseline if baseline > 1e-12 else 1.0
        for v, (R, t) in model.poses.items():
            # E_v · E_w⁻¹ puts the world camera at the origin; scaling t scales the whole scene with it.
            R2 = R @ Rw.T
            t2 = (t - R2 @ tw) * scale
            ext[v] = np.eye(4)
            ext[v][:3, :3], ext[v][:3, 3] = R2, t2
            conf[v] = model.support.get(v, 0)
        ext[world][:3, :3], ext[world][:3, 3] = np.eye(3), 0.0  # exactly, not to rounding
        pts = _coloured_points(model, views, Rw, tw, scale)
        info["world_camera"] = world
        info["scale_partner"] = partner
    info["registered"] = sorted(int(v) for v in model.poses)
    info["confidence"] = conf.tolist()
    ba = info.get("ba") or []
    if ba:
        info["reprojection_rmse_before_ba"] = ba[0]["rmse_before"]
        info["reprojection_rmse_after_ba"] = ba[-1]["rmse_after"]
    return Reconstruction(pts, ext, np.asarray(Ks), confidence=conf, image_sizes=_sizes(images),
                          backend="classic", info=info)


def _partner(model: _Model, world: int) -> int | None:
    """The registered view sharing the most reconstructed points with the world camera."""
    shared: dict[int, int] = {}
    for tid, obs in enumerate(model.tracks):
        if np.isfinite(model.points[tid, 0]):
            vs = {v for v, _ in obs if v in model.poses}
            if world in vs:
                for v in vs - {world}:
                    shared[v] = shared.get(v, 0) + 1
    others = [v for v in model.poses if v != world]
    if not others:
        return None
    return max(others, key=lambda v: shared.get(v, 0))


def _coloured_points(model: _Model, views, Rw, tw, scale) -> np.ndarray:
    placed = np.flatnonzero(np.isfinite(model.points[:, 0]))
    out = np.zeros((len(placed), 6))
    X = model.points[placed]
    out[:, :3] = (X @ Rw.T + tw) * scale
    for n, tid in enumerate(placed):
        v, k = next((v, k) for v, k in model.tracks[tid] if v in model.poses)
        x, y = np.clip(np.round(views[v].xy[k]).astype(int), 0, [views[v].rgb.shape[1] - 1, views[v].rgb.shape[0] - 1])
        out[n, 3:] = views[v].rgb[y, x] / 255.0
    return out
