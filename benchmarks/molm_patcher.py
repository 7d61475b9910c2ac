"""How the tiny graph-LM's patch count follows molecule size, by patch rule (toolpath/policies/molm/patcher.py),
on the build's held-out NCI molecules and on molecule sets RDKit ships that the encoder never saw (drug-like
ChEMBL and ZINC sets under rdkit/Contrib), from one encoder pretrained as the build pretrains it.

    python benchmarks/molm_patcher.py [--pretrain-steps N] [--seed S] [--max-molecules M] [--encoder FILE] [--json]

--encoder FILE: the pretrained encoder read from FILE when it exists (benchmarks/molqa.py --encoder writes one),
else pretrained and written there.

Per set and rule: molecules, mean heavy atoms, mean patches, Spearman's rho of patches against heavy atoms, and
the rule's rho as a ratio against the reference code's rule ("rise") on the same entropies.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# RDKit's Contrib SMILES files of drug-like molecules: (name, path under Contrib)
OTHER_SETS = (("zinc_cdk2", "Fastcluster/cdk2.smi"), ("chembl_actives", "fraggle/data/ChEMBL_11265_actives.smi"))


def read_smi(path: Path, limit: int) -> list:
    """The molecules of a .smi file whose lines hold a SMILES somewhere among their fields (name first or last)."""
    from toolpath.policies.molm import graphs as mg

    graphs = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        for field in line.split():
            try:
                graphs.append(mg.mol_graph(field))
                break
            except ValueError:
                continue
        if len(graphs) >= limit:
            break
    return graphs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pretrain-steps", type=int, help="encoder pretraining steps (default: the build's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-molecules", type=int, default=600, help="at most this many of each other set")
    ap.add_argument("--encoder", type=Path, help="a file for the pretrained encoder: read if it exists, else written")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch
    from rdkit import RDConfig, RDLogger

    from toolpath.train import molm_pretraining as mpt
    from toolpath.train import tiny_molm as tm

    RDLogger.DisableLog("rdApp.*")  # the drug-like sets hold a few lines RDKit rejects; they are skipped
    started = time.monotonic()
    cfg = tm.BuildConfig()
    if args.pretrain_steps is not None:
        cfg = dataclasses.replace(cfg, pretrain_steps=args.pretrain_steps)
    torch.set_num_threads(cfg.threads)
    train, heldout, _, _ = tm.data(cfg, args.seed)
    try:
        encoder, head, held = mpt.pretrained(cfg, args.seed, train, heldout, args.encoder)
    except ValueError as err:
        raise SystemExit(f"--encoder {err}") from None
    sets = {"nci_heldout": heldout}
    for name, rel in OTHER_SETS:
        path = Path(RDConfig.RDContribDir) / rel
        if path.exists():
            sets[name] = read_smi(path, args.max_molecules)
    out = {"encoder": held, "sets": {}}
    for name, graphs in sets.items():
        figures = tm.patch_figures(encoder, head, graphs)
        base = figures["by_rule"]["rise"]["spearman_tokens_heavy_atoms"]
        for rule in figures["by_rule"].values():
            rho = rule["spearman_tokens_heavy_atoms"]
            rule["ratio_to_rise"] = round(rho / base, 3) if rho is not None and base else None
        out["sets"][name] = figures
    out |= {"seed": args.seed, "pretrain_steps": cfg.pretrain_steps, "seconds": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"encoder: held-out next-atom accuracy {held['accuracy']}")
        for name, f in out["sets"].items():
            for rule, r in f["by_rule"].items():
                print(f"{name:15} {rule:6} {f['molecules']:4} molecules, {f['mean_heavy_atoms']:5} heavy atoms, "
                      f"{r['mean_tokens']:5} patches, rho {r['spearman_tokens_heavy_atoms']} "
                      f"(x{r['ratio_to_rise']} of rise)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
