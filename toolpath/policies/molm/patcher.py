"""The entropy-guided patcher: a molecule's atoms (in canonical SMILES order) cut into patches where the
next-atom predictor's entropy peaks, EDT-Former's rule. Per molecule, an atom is "high" when its entropy is above
the molecule's `quantile` of entropies; an atom where the entropy rises to high (the atom before it was not high)
closes its patch, and the next atom opens a new one. Where the predictor is unsure what follows is where one
substructure ends and another begins, so patches follow the molecule's parts, and their number grows with its
size instead of being fixed.
"""

from __future__ import annotations

from . import encoder as me
from . import graphs as mg

QUANTILE = 0.75  # EDT-Former's default threshold: the upper quarter of a molecule's entropies is "high"


def patch_ids(bits, quantile: float = QUANTILE) -> list[int]:
    """One patch index per atom (0, 0, 1, 1, 1, 2, ...) from the atoms' next-atom entropies (a 1-D tensor)."""
    import torch

    values = bits.detach().float()
    if values.numel() == 0:
        return []
    threshold = torch.quantile(values, quantile)
    ids, patch, previous_high = [], 0, False
    for v in values.tolist():
        ids.append(patch)
        high = v > float(threshold)
        if high and not previous_high:
            patch += 1
        previous_high = high
    return ids  # a rise at the last atom opens no patch: only patches with atoms are numbered


def patches(encoder, head, graphs: list[mg.MolGraph], quantile: float = QUANTILE) -> list[list[int]]:
    """Each graph's patch index per atom."""
    return [patch_ids(bits, quantile) for bits in me.entropies(encoder, head, graphs)]


def count(ids: list[int]) -> int:
    return ids[-1] + 1 if ids else 0
