"""`molecule_info` and `substructure`: the chemistry tools, each taking a molecule by name (graph_1, …) or SMILES."""

from __future__ import annotations

import json
from typing import Literal

from ..registry import ToolContext, ToolResult, tool
from .molecules import MAX_MATCHES, episode_molecule, matched_bonds, matches, properties, read_pattern


@tool(timeout=30.0, cost=0.05, quality=1.0, tags=("chemistry",), pure=True)
def molecule_info(molecule: str, ctx: ToolContext) -> ToolResult:
    """Describe a molecule with RDKit: canonical SMILES, formula, molecular weight, logP, TPSA, H-bond donors and
    acceptors, rotatable bonds, rings, aromatic rings, heavy atoms, whether it is aromatic, rule-of-five violations.

    Args:
        molecule: a molecule of the task by name, e.g. graph_1 (or its file name), or a SMILES string
    """
    name, mol = episode_molecule(ctx, molecule, "molecule_info")
    result = {**({"molecule": name} if name else {}), **properties(mol)}
    return ToolResult(content=json.dumps(result), data=result)


@tool(timeout=30.0, cost=0.05, quality=1.0, tags=("chemistry",), pure=True)
def substructure(molecule: str, pattern: str, ctx: ToolContext,
                 read_as: Literal["auto", "SMARTS", "SMILES"] = "auto") -> ToolResult:
    """Find a substructure in a molecule: whether the pattern matches, how many times, and which atoms (indices in
    the order the molecule's canonical SMILES writes its atoms, from 0).

    Args:
        molecule: a molecule of the task by name, e.g. graph_1 (or its file name), or a SMILES string
        pattern: SMARTS (e.g. "[#6]=O", a carbonyl on any carbon, aromatic or not) or SMILES (e.g. "c1ccccc1")
        read_as: how to read the pattern; auto: SMARTS, but a Kekulé ring (C1=CC=CC=C1) as SMILES
    """
    from rdkit import Chem

    name, mol = episode_molecule(ctx, molecule, "substructure")
    query, read_as = read_pattern(pattern, "substructure", read_as)
    found = matches(mol, query)
    result = {**({"molecule": name} if name else {}), "smiles": Chem.MolToSmiles(mol), "pattern": pattern,
              "read_as": read_as, "matches": bool(found), "count": len(found), "atoms": found,
              **({"truncated": True} if len(found) == MAX_MATCHES else {})}
    artifacts = []
    if found and ctx.save_artifact is not None:  # the match drawn, for the viewer (and a person reading the run)
        from .depict import png

        picture = png(mol, atoms={i for match in found for i in match}, bonds=matched_bonds(mol, query, found))
        artifacts.append(ctx.artifact(picture, name=f"{name or 'molecule'}_substructure.png", mime="image/png"))
    return ToolResult(content=json.dumps(result), data=result, artifacts=artifacts)
