"""What the `classic` reconstruction backend can be told: its thresholds and budgets, shared by the two-view
stage (pairs.py) and the incremental reconstruction (classic.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Options:
    max_side: int = 640  # working size: longer side in pixels (SIFT on more pixels is slower, rarely better here)
    max_features: int = 4000
    ratio: float = 0.75  # Lowe's ratio test
    ransac_px: float = 1.0  # essential-matrix inlier threshold (working pixels)
    pnp_px: float = 3.0  # PnP inlier threshold (working pixels)
    inlier_px: float = 2.0  # reprojection that counts as agreeing with the final model (confidence)
    min_pair_inliers: int = 40  # essential-matrix inliers for two views to count as seeing the same scene
    min_pose_inliers: int = 30  # supporting observations a registered view needs, first pair included
    min_evidence: float = 30.0  # how much better a pair's pose must fit than its rivals (see _verify)
    max_spread_deg: float = 5.0  # a pair's pose may wobble this much over half-samples (5× for direction)
    min_angle_deg: float = 1.0  # triangulation angle below which a point's depth is noise
    bundle_adjust: bool = True
    max_ba_points: int = 3000  # points bundle-adjusted (a spread subset): time grows with them, accuracy barely
    affine: str = "never"  # ASIFT features: "never", "always", or "auto" (again with them if a view is left out)
    affine_features: int = 1500  # per simulated tilt
    affine_max_views: int = 6  # the fallback costs about 1–2 s a view; beyond this many views it is skipped
    seed: int = 0


def options_from(given: dict) -> Options:
    """The backend's Options from keyword arguments; a name that is not a field is a TypeError naming the known ones."""
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(f"reconstruct_classic: unknown option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(sorted(known))}")
    return Options(**given)
