"""--select: which scored items are kept.

    top:K        the K best scores
    fraction:F   the best share F of them (0 < F <= 1)
    density:F    a share F drawn by inverse-propensity sampling over the texts' kernel density (density.py):
                 coverage of the corpus rather than its best scores
"""

from __future__ import annotations

from .items import CurateError

FORMS = "top:K, fraction:F or density:F"


def parse_select(text: str) -> tuple[str, float]:
    kind, sep, raw = text.partition(":")
    if kind not in ("top", "fraction", "density") or not sep:
        raise CurateError(f"--select {text!r}: expected {FORMS}")
    try:
        value = int(raw) if kind == "top" else float(raw)
    except ValueError:
        raise CurateError(f"--select {text!r}: {'K is a whole number' if kind == 'top' else 'F is a number'}") from None
    if kind == "top" and value < 1:
        raise CurateError(f"--select {text!r}: K must be at least 1")
    if kind != "top" and not 0 < value <= 1:
        raise CurateError(f"--select {text!r}: F is a share, above 0 and at most 1")
    return kind, value


def count(kind: str, value: float, n: int) -> int:
    return min(n, int(value)) if kind == "top" else max(1, round(value * n))


def select(scores: list[float], kind: str, value: float, density=None, seed: int = 0) -> list[int]:
    """The kept items' indices, best score first (a density sample in the order it was drawn)."""
    k = count(kind, value, len(scores))
    if kind == "density":
        from .density import inverse_propensity_sample

        if density is None:
            raise CurateError("--select density:F needs the texts' densities")
        return inverse_propensity_sample(density, k, seed)
    return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
