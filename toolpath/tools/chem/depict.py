"""RDKit's depiction of a molecule as PNG bytes: the viewer's picture of a task's molecules, a match's highlight."""

from __future__ import annotations

from collections.abc import Iterable

from ...spec_molecules import MoleculeError, rdkit_reason

SIZE = (400, 300)


def png(mol, atoms: Iterable[int] = (), bonds: Iterable[int] = (), size: tuple[int, int] = SIZE) -> bytes:
    """The molecule drawn flat (a 3D conformer is laid out in 2D first, as chemists draw it), `atoms` and `bonds`
    (indices) highlighted, each atom's index shown, so a drawing and a tool's atom indices can be read together."""
    from rdkit import Chem
    from rdkit.Chem import rdDepictor
    from rdkit.Chem.Draw import rdMolDraw2D

    mol = Chem.Mol(mol)
    if mol.GetNumConformers() == 0 or mol.GetConformer().Is3D():
        rdDepictor.Compute2DCoords(mol)
    drawer = rdMolDraw2D.MolDraw2DCairo(*size)
    drawer.drawOptions().addAtomIndices = True
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol, highlightAtoms=list(atoms), highlightBonds=list(bonds))
    drawer.FinishDrawing()
    return drawer.GetDrawingText()


def molblock_png(molblock: str) -> bytes:
    """The drawing of a stored MOL block; MoleculeError when RDKit cannot read it."""
    try:
        from rdkit import Chem, rdBase
    except ImportError:
        from ...spec_molecules import NEEDS_RDKIT

        raise MoleculeError(NEEDS_RDKIT) from None
    with rdBase.BlockLogs(), rdBase.CaptureErrorLog() as log:
        mol = Chem.MolFromMolBlock(molblock)
    if mol is None:
        raise MoleculeError(f"not a MOL block RDKit can read ({rdkit_reason(log.messages)})")
    return png(mol)
