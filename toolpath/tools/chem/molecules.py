"""A tool's `molecule` argument as an RDKit molecule, its properties, and where a pattern matches it.

Atom indices count the heavy atoms in the order the molecule's canonical SMILES writes them, from 0: the same
SMILES the task text shows a model and every answer here repeats.
"""

from __future__ import annotations

import re

from ...spec_molecules import MOLECULE_SUFFIXES, MoleculeError, canonical, parse_smiles, rdkit_reason
from ..registry import ToolContext, ToolError

# RDKit's own default bound on GetSubstructMatches; a pattern like "*" matches every atom of a large molecule.
MAX_MATCHES = 1000
EPISODE_NAME = re.compile(r"graph_\d+$")


def episode_molecule(ctx: ToolContext, molecule: str, what: str) -> tuple[str, object]:
    """(how to call it, the RDKit molecule) for a `molecule` argument: an episode's molecule by name (graph_1, …)
    or by its file name, or a SMILES string; else a ToolError naming it and the episode's molecules."""
    names = ", ".join(ctx.graphs) or "none"
    found = ctx.graphs.get(molecule)
    if found is None:
        by_file = [m for m in ctx.graphs.values() if m.file == molecule]
        if len(by_file) > 1:
            raise ToolError(f"{what}: {molecule} holds {len(by_file)} molecules: "
                            f"{', '.join(m.name for m in by_file)}; name one of them")
        found = by_file[0] if by_file else None
    try:
        if found is not None:
            return found.name, parse_smiles(found.smiles)  # its atoms already in its SMILES' order
        if EPISODE_NAME.match(molecule) or molecule.lower().endswith(MOLECULE_SUFFIXES):
            raise ToolError(f"{what}: unknown molecule {molecule!r}; molecules in this episode: {names}")
        return "", canonical(parse_smiles(molecule))
    except MoleculeError as err:
        raise ToolError(f"{what}: {molecule[:200]!r} is neither a molecule of this episode ({names}) nor a "
                        f"SMILES RDKit can read: {err}") from None


def properties(mol) -> dict:
    """What RDKit computes of a molecule: formula, weights, Crippen logP, TPSA, H-bond donors and acceptors,
    rotatable bonds, rings, heavy atoms, charge, and the rule-of-five violations."""
    from rdkit import Chem
    from rdkit.Chem import Crippen, Descriptors
    from rdkit.Chem import rdMolDescriptors as rd

    weight, logp = Descriptors.MolWt(mol), Crippen.MolLogP(mol)
    # Lipinski's rule of five counts N-H and O-H as donors and N and O as acceptors (his definitions, not RDKit's
    # pharmacophore counts reported as h_bond_donors / h_bond_acceptors).
    violations = sum((weight > 500, logp > 5, rd.CalcNumLipinskiHBD(mol) > 5, rd.CalcNumLipinskiHBA(mol) > 10))
    return {
        "smiles": Chem.MolToSmiles(mol),
        "formula": rd.CalcMolFormula(mol),
        "molecular_weight": round(weight, 3),
        "exact_mass": round(Descriptors.ExactMolWt(mol), 4),
        "logp": round(logp, 3),
        "tpsa": round(rd.CalcTPSA(mol), 2),
        "h_bond_donors": rd.CalcNumHBD(mol),
        "h_bond_acceptors": rd.CalcNumHBA(mol),
        "rotatable_bonds": rd.CalcNumRotatableBonds(mol),
        "rings": rd.CalcNumRings(mol),
        "aromatic_rings": rd.CalcNumAromaticRings(mol),
        "heavy_atoms": mol.GetNumHeavyAtoms(),
        "aromatic": any(atom.GetIsAromatic() for atom in mol.GetAtoms()),
        "formal_charge": Chem.GetFormalCharge(mol),
        "fragments": len(Chem.GetMolFrags(mol)),
        "lipinski_violations": violations,
    }


def read_pattern(pattern: str, what: str, read_as: str = "auto") -> tuple[object, str]:
    """(the query, "SMARTS" or "SMILES") for a pattern, read as `read_as` says. auto: SMARTS first, since a SMILES
    read as a query pins the hydrogens its brackets write ([CH3] would match only a methyl radical); but a ring
    written in Kekulé form (C1=CC=CC=C1) is read as SMILES, so it matches the aromatic ring RDKit perceives, as a
    chemist means it."""
    from rdkit import Chem, rdBase

    smarts, reason = None, ""
    if read_as != "SMILES":
        with rdBase.BlockLogs(), rdBase.CaptureErrorLog() as log:
            smarts = Chem.MolFromSmarts(pattern)
        reason = rdkit_reason(log.messages, pattern) if smarts is None else "no atoms"
        if smarts is not None and smarts.GetNumAtoms() == 0:
            smarts = None
    smiles = None
    if read_as != "SMARTS":
        try:
            smiles = parse_smiles(pattern)
        except MoleculeError as err:
            reason = reason or err.reason
    if smiles is not None:
        with rdBase.BlockLogs():
            written = Chem.MolFromSmiles(pattern, sanitize=False)
        kekule = any(a.GetIsAromatic() for a in smiles.GetAtoms()) and not any(a.GetIsAromatic()
                                                                               for a in written.GetAtoms())
        if read_as == "SMILES" or smarts is None or kekule:
            return smiles, "SMILES"
    if smarts is None:
        kinds = {"auto": "neither SMARTS nor SMILES", "SMARTS": "not SMARTS", "SMILES": "not SMILES"}[read_as]
        raise ToolError(f"{what}: pattern {pattern[:200]!r} is {kinds} RDKit can read ({reason})")
    return smarts, "SMARTS"


def matches(mol, query) -> list[list[int]]:
    """Each distinct place the query matches, as the molecule's atom indices (the query's atom order)."""
    return [list(m) for m in mol.GetSubstructMatches(query, uniquify=True, maxMatches=MAX_MATCHES)]


def matched_bonds(mol, query, found: list[list[int]]) -> set[int]:
    """The molecule's bonds that the query's bonds matched, in any of the matches (what a drawing highlights)."""
    bonds = set()
    for match in found:
        for bond in query.GetBonds():
            hit = mol.GetBondBetweenAtoms(match[bond.GetBeginAtomIdx()], match[bond.GetEndAtomIdx()])
            if hit is not None:
                bonds.add(hit.GetIdx())
    return bonds
