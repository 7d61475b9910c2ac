"""Features, matching and two-view verification for the classic backend: RootSIFT (or ASIFT) keypoints,
ratio + mutual matching, an essential matrix per pair checked against its homography rivals and over
half-samples, and the tracks that chain matches across views."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .classic_options import Options


@dataclass
class _View:
    K: np.ndarray  # working-size intrinsics
    rgb: np.ndarray
    xy: np.ndarray  # (n, 2) keypoints, working pixels
    desc: np.ndarray  # (n, 128) RootSIFT


@dataclass
class _Pair:
    i: int
    j: int
    matches: int  # after ratio + mutual tests
    idx: np.ndarray  # (m, 2) keypoint indices (in i, in j) of the essential-matrix inliers
    R: np.ndarray | None = None  # j's rotation relative to i (None: the pair's pose is ambiguous)
    t: np.ndarray | None = None
    support: int = 0  # matches consistent with the best pose
    evidence: float = 0.0  # how much better it fits than the best distinct rival (log-likelihood ratio, ×2)
    spread: tuple[float, float] = (math.inf, math.inf)  # pose's wobble over half-samples (rotation, direction)


def _prepare(img: np.ndarray, K: np.ndarray, opts: Options, affine: bool = False) -> _View:
    import cv2

    h, w = img.shape[:2]
    s = min(1.0, opts.max_side / max(h, w))
    work = cv2.resize(img, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA) if s < 1 else img
    sx, sy = work.shape[1] / w, work.shape[0] / h
    # Pixel centres map as x' = sx (x + 0.5) − 0.5, so the principal point moves by that, not just × sx.
    Kw = np.array([[K[0, 0] * sx, K[0, 1] * sx, sx * (K[0, 2] + 0.5) - 0.5],
                   [0.0, K[1, 1] * sy, sy * (K[1, 2] + 0.5) - 0.5], [0.0, 0.0, 1.0]])
    gray = cv2.cvtColor(work, cv2.COLOR_RGB2GRAY)
    sift = cv2.SIFT_create(nfeatures=opts.max_features)
    if affine:
        sift = cv2.AffineFeature_create(cv2.SIFT_create(nfeatures=opts.affine_features))
    kps, desc = sift.detectAndCompute(gray, None)
    if desc is not None and len(kps) > opts.max_features:  # ASIFT: the strongest over all tilts, so matching
        keep = np.argsort([-k.response for k in kps], kind="stable")[:opts.max_features]  # stays bounded
        kps, desc = [kps[i] for i in keep], desc[keep]
    if desc is None or len(kps) == 0:
        return _View(Kw, work, np.zeros((0, 2)), np.zeros((0, 128), np.float32))
    # RootSIFT (Arandjelović & Zisserman): Hellinger distance on SIFT histograms matches better, for free.
    desc = np.sqrt(desc / (np.abs(desc).sum(axis=1, keepdims=True) + 1e-7)).astype(np.float32)
    return _View(Kw, work, np.array([k.pt for k in kps], dtype=np.float64), desc)


def _match(a: _View, b: _View, ratio: float) -> np.ndarray:
    """Keypoint index pairs that pass the ratio test both ways and agree (mutual nearest neighbours).

    The runner-up in the ratio test is the nearest descriptor at another place (> 3 px away): SIFT puts
    several orientations, and the affine variant several tilts, on one spot, and comparing a match with its
    own duplicate would reject every distinctive point. RootSIFT descriptors have unit length, so one
    matrix product gives every distance both ways (exact, and deterministic, unlike FLANN)."""
    if len(a.desc) < 2 or len(b.desc) < 2:
        return np.zeros((0, 2), np.int64)
    S = a.desc @ b.desc.T  # cosine similarity; squared distance = 2 − 2 S
    ab, ba = _one_way(S, b.xy, ratio), _one_way(S.T, a.xy, ratio)
    i = np.flatnonzero(ab >= 0)
    j = ab[i]
    back = ba[j]
    same = (back >= 0) & (np.linalg.norm(a.xy[np.maximum(back, 0)] - a.xy[i], axis=1) <= 3.0)
    return np.stack([i[same], j[same]], axis=1).astype(np.int64)


def _one_way(S: np.ndarray, xy_b: np.ndarray, ratio: float, radius: float = 3.0) -> np.ndarray:
    """For each row of S (similarities to b's descriptors), its match in b, or −1 if it fails the ratio test
    against the best descriptor more than `radius` px from the match."""
    from scipy.spatial import cKDTree

    best = np.argmax(S, axis=1)
    near = cKDTree(xy_b).query_ball_point(xy_b, radius)  # b's keypoints near each of b's keypoints
    counts = np.array([len(near[j]) for j in best])
    rows = np.repeat(np.arange(len(S)), counts)
    cols = np.concatenate([near[j] for j in best]).astype(np.int64)
    best_sim = S[np.arange(len(S)), best]
    kept = S[rows, cols]
    S[rows, cols] = -np.inf  # mask the match's own spot, take the runner-up, then put S back as it was
    second = S.max(axis=1)
    S[rows, cols] = kept
    d1 = np.sqrt(np.maximum(0.0, 2 - 2 * best_sim))
    d2 = np.sqrt(np.maximum(0.0, 2 - 2 * second))
    return np.where(d1 < ratio * d2, best, -1)


def _normalized(view: _View, idx: np.ndarray) -> np.ndarray:
    """Keypoints as normalised image coordinates K⁻¹x, so pairs with different cameras share one threshold."""
    xy = view.xy[idx]
    K = view.K
    y = (xy[:, 1] - K[1, 2]) / K[1, 1]
    x = (xy[:, 0] - K[0, 2] - K[0, 1] * y) / K[0, 0]
    return np.stack([x, y], axis=1)


def _verify(a: _View, b: _View, i: int, j: int, opts: Options) -> _Pair:
    """Matches, then the essential matrix by RANSAC: the pair's inliers (cheirality included) and pose.

    A pose is kept only when (1) no distinctly different pose explains the matches about as well, which fails
    when what the views share is one plane (its homography allows two poses), and (2) re-estimating it from
    random halves of the inliers barely moves it, which fails for matches bunched in a patch or along a line,
    and for pure rotation (any translation fits). Otherwise the pair still links tracks but gives no pose
    (pair.R None): picking one of the candidates would be a guess."""
    m = _match(a, b, opts.ratio)
    pair = _Pair(i, j, len(m), np.zeros((0, 2), np.int64))
    if len(m) < max(opts.min_pair_inliers, 8):
        return pair
    p1, p2 = _normalized(a, m[:, 0]), _normalized(b, m[:, 1])
    thr = 1.0 / (0.5 * (a.K[0, 0] + b.K[0, 0]))  # one working pixel in normalised units
    best = _best_pose(p1, p2, thr, opts)
    if best is None:
        return pair
    pose, inl, pair.evidence = best
    pair.support, pair.idx = int(inl.sum()), m[inl]
    if pair.support < opts.min_pair_inliers or pair.evidence < opts.min_evidence:
        return pair  # the matches are real and still link tracks; the two-view pose is not known
    pair.spread = _spread(p1[inl], p2[inl], pose, thr, opts)
    if pair.spread[0] > opts.max_spread_deg or pair.spread[1] > 5 * opts.max_spread_deg:
        return pair
    pair.R, pair.t = pose
    return pair


def _best_pose(p1, p2, thr: float, opts: Options, prob: float = 0.9999):
    """The pose that fits the matches best among the essential matrix's (RANSAC + recoverPose) and those a
    plane-induced homography allows, with its inliers and the evidence against the best distinct rival.
    None when no essential matrix is found."""
    import cv2

    try:
        E, mask = cv2.findEssentialMat(p1, p2, np.eye(3), method=cv2.RANSAC, prob=prob,
                                       threshold=opts.ransac_px * thr, maxIters=5000)
    except cv2.error:  # degenerate samples (e.g. all matches on one spot) can trip the 5-point solver
        return None
    if E is None:
        return None
    _, R, t, _ = cv2.recoverPose(E[:3], p1, p2, np.eye(3), mask=mask)  # stacked solutions: the first is best
    candidates = [(R, t.ravel())] + _homography_poses(p1, p2, 2 * opts.ransac_px * thr)
    errors = [_sampson_px(Rc, tc, p1, p2, thr) for Rc, tc in candidates]
    cost = [float(np.sum(np.minimum(e, opts.ransac_px) ** 2)) for e in errors]  # MSAC: outliers cost the cap
    best = int(np.argmin(cost))
    inl = errors[best] < opts.ransac_px
    # Which pose wins is a likelihood-ratio question: how much worse the best distinct rival fits, in units of
    # the noise the winner leaves (robust σ). Twins of one plane fit its points alike; only off-plane points
    # (or one twin putting points behind a camera) tell them apart, and without those the pose is a coin flip.
    sigma2 = max((1.4826 * float(np.median(errors[best][inl]))) ** 2, 1e-4) if inl.any() else 1.0
    rivals = [c for k, c in enumerate(cost) if not _same_pose(candidates[best], candidates[k])]
    evidence = round((min(rivals) - cost[best]) / sigma2, 1) if rivals else math.inf
    return candidates[best], inl, evidence


def _spread(p1, p2, pose, thr, opts: Options, rounds: int = 8) -> tuple[float, float]:
    """How far the pose moves when it is chosen again, the same way, from random halves of its inliers (median
    degrees of rotation, of translation direction). Matches bunched in a patch or along a line, or a camera
    that only turned, give poses that fit yet are not determined, and this is where that shows."""
    rng = np.random.default_rng(opts.seed)
    rot, tra = [], []
    for _ in range(rounds):
        sel = rng.random(len(p1)) < 0.5
        found = _best_pose(p1[sel], p2[sel], thr, opts, prob=0.999) if sel.sum() >= 8 else None
        if found is None:
            rot.append(180.0)
            tra.append(180.0)
            continue
        (R, t), _, _ = found
        rot.append(_angle_between(R, pose[0]))
        cos = float(t @ pose[1] / (np.linalg.norm(t) * np.linalg.norm(pose[1]) + 1e-12))
        tra.append(math.degrees(math.acos(max(-1.0, min(1.0, cos)))))
    return round(float(np.median(rot)), 2), round(float(np.median(tra)), 2)


def _angle_between(Ra, Rb) -> float:
    return math.degrees(math.acos(float(np.clip((np.trace(Ra @ Rb.T) - 1) / 2, -1, 1))))


def _homography_poses(p1, p2, thr) -> list[tuple[np.ndarray, np.ndarray]]:
    """The poses a plane-induced homography allows (up to four, from its decomposition): the rivals that a
    scene dominated by one plane leaves to the essential matrix's pose."""
    import cv2

    H, hmask = cv2.findHomography(p1, p2, cv2.RANSAC, thr)
    if H is None or hmask.sum() < 8:
        return []
    _, Rs, ts, _ = cv2.decomposeHomographyMat(H, np.eye(3))
    out = []
    for R, t in zip(Rs, ts):
        n = np.linalg.norm(t)
        if n > 1e-9:  # t = 0 (pure rotation) says nothing about direction: no candidate to rival E's
            out.append((R, t.ravel() / n))
    return out


def _sampson_px(R, t, p1, p2, thr) -> np.ndarray:
    """Each match's Sampson distance to pose (R, t)'s epipolar geometry, in working pixels (thr = 1 px in
    normalised units sets the conversion); inf where the point would lie behind either camera."""
    tx = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]])
    E = tx @ R
    x1 = np.hstack([p1, np.ones((len(p1), 1))])
    x2 = np.hstack([p2, np.ones((len(p2), 1))])
    Ex1, Etx2 = x1 @ E.T, x2 @ E
    num = np.sum(x2 * Ex1, axis=1) ** 2
    den = Ex1[:, 0] ** 2 + Ex1[:, 1] ** 2 + Etx2[:, 0] ** 2 + Etx2[:, 1] ** 2
    err = np.sqrt(num / np.maximum(den, 1e-18)) / thr
    # Depths from λ2 x2 = λ1 R x1 + t, solved by least squares per match.
    a = x1 @ R.T
    aa, bb, ab = np.sum(a * a, 1), np.sum(x2 * x2, 1), np.sum(a * x2, 1)
    at, bt = a @ t, x2 @ t
    det = aa * bb - ab * ab
    with np.errstate(divide="ignore", invalid="ignore"):
        l1 = (-at * bb + ab * bt) / det
        l2 = (aa * bt - ab * at) / det
    return np.where((l1 > 0) & (l2 > 0), err, np.inf)


def _same_pose(A, B, deg: float = 2.0) -> bool:
    (Ra, ta), (Rb, tb) = A, B
    rot = _angle_between(Ra, Rb)
    cos = float(ta @ tb / (np.linalg.norm(ta) * np.linalg.norm(tb) + 1e-12))
    return rot < deg and cos > math.cos(math.radians(5 * deg))


def _verified_pairs(views: list[_View], opts: Options, info: dict) -> dict[tuple[int, int], _Pair]:
    pairs, stats = {}, {}
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            p = _verify(views[i], views[j], i, j, opts)
            stats[f"{i}-{j}"] = {"matches": p.matches, "inliers": len(p.idx), "support": p.support,
                                 "evidence": p.evidence, "spread": list(p.spread), "pose": p.R is not None}
            if len(p.idx) >= opts.min_pair_inliers:
                pairs[(i, j)] = p
    info["pairs"] = stats
    return pairs


def _tracks(pairs: dict[tuple[int, int], _Pair]) -> list[list[tuple[int, int]]]:
    """Join verified matches into tracks (union–find over (view, keypoint)); a track that meets one view
    twice is contradictory, and dropped."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x):
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for (i, j), p in pairs.items():
        for a, b in p.idx:
            ra, rb = find((i, int(a))), find((j, int(b)))
            if ra != rb:
                parent[ra] = rb
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    out = []
    for obs in groups.values():
        if len({v for v, _ in obs}) == len(obs):
            out.append(sorted(obs))
    return out
