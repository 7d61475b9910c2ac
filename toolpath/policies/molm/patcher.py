"""The entropy-guided patcher: a molecule's atoms (in canonical SMILES order) cut into patches where the
next-atom predictor's entropy peaks, EDT-Former's rule. Per molecule, an atom is "high" when its entropy is above
the molecule's `quantile` of entropies, and a high atom closes its patch (the next atom opens a new one):

- "rise" (the EDT-Former reference code's rule): only where the entropy rises to high (the atom before it was not
  high), so a run of high atoms is one cut;
- "climb" (the default): also where the entropy, already high, climbs again (above the atom before it): a new
  peak inside the run, as entropy patching's approximate-monotonic constraint (BLT's) cuts at a rise. Adjacent
  uncertain atoms (a branch point next to a ring closure, say) are separate peaks; counting a run once makes the
  token count depend on how a molecule's uncertain atoms happen to bunch up rather than on how many there are.

Where the predictor is unsure what follows is where one substructure ends and another begins, so patches follow
the molecule's parts, and their number grows with its size instead of being fixed.
"""

from __future__ import annotations

from . import encoder as me
from . import graphs as mg

QUANTILE = 0.75  # EDT-Former's default threshold: the upper quarter of a molecule's entropies is "high"
RULES = ("climb", "rise")
RULE = "climb"
LEGACY_RULE = "rise"  # what folders written before the rule was a setting were trained with


def patch_ids(bits, quantile: float = QUANTILE, rule: str = RULE) -> list[int]:
    """One patch index per atom (0, 0, 1, 1, 1, 2, ...) from the atoms' next-atom entropies (a 1-D tensor)."""
    import torch

    if rule not in RULES:
        raise ValueError(f"patch rule {rule!r}: expected one of {', '.join(RULES)}")
    values = bits.detach().float()
    if values.numel() == 0:
        return []
    threshold = float(torch.quantile(values, quantile))
    ids, patch, previous = [], 0, None
    for v in values.tolist():
        ids.append(patch)
        high = v > threshold
        rises = previous is None or previous <= threshold
        if high and (rises or (rule == "climb" and v > previous)):
            patch += 1
        previous = v
    return ids  # a cut at the last atom opens no patch: only patches with atoms are numbered


def patches(encoder, head, graphs: list[mg.MolGraph], quantile: float = QUANTILE,
            rule: str = RULE) -> list[list[int]]:
    """Each graph's patch index per atom."""
    return [patch_ids(bits, quantile, rule) for bits in me.entropies(encoder, head, graphs)]


def count(ids: list[int]) -> int:
    return ids[-1] + 1 if ids else 0
