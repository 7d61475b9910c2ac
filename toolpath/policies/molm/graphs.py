"""Molecules as graph tensors for the tiny graph-LM: RDKit parses a SMILES string, the heavy atoms are put in the
order they are written in RDKit's canonical SMILES (a connected walk, so each atom mostly bonds to one before
it: what the next-atom predictor needs), and each atom and bond becomes a few small categorical features.

Atom features: element, degree, formal charge, attached hydrogens, aromatic, in a ring; bond feature: its type.
A batch is the graphs side by side (node rows concatenated, edge indices offset), the layout message passing
with `index_add_` works on.
"""

from __future__ import annotations

from dataclasses import dataclass

# Elements of drug-like and NCI molecules; anything else is "other" (the last index).
ELEMENTS = ("C", "N", "O", "S", "F", "Cl", "Br", "I", "P", "B", "Si", "Se", "Na", "K", "Sn", "As", "Hg")
OTHER = len(ELEMENTS)
# The number of values of each atom feature: element (+ other), degree 0-5+, charge -2..+2, hydrogens 0-4+,
# aromatic, in a ring.
ATOM_CARDINALITIES = (len(ELEMENTS) + 1, 6, 5, 5, 2, 2)
BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")


@dataclass(frozen=True)
class MolGraph:
    smiles: str  # canonical
    atoms: list[tuple[int, ...]]  # one row of ATOM_CARDINALITIES-indexed features per heavy atom
    edges: list[tuple[int, int, int]]  # (atom, atom, bond type) once per bond, lower index first
    symbols: list[str]

    @property
    def size(self) -> int:
        return len(self.atoms)


def parse(smiles: str, where: str = "SMILES"):
    """The RDKit molecule of `smiles`, or a ValueError naming `where` and the string."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")  # RDKit's own parse complaints go to stderr; ours is the error below
    mol = Chem.MolFromSmiles(smiles) if isinstance(smiles, str) and smiles.strip() else None
    if mol is None or mol.GetNumAtoms() == 0:
        raise ValueError(f"{where}: {smiles!r} is not a molecule RDKit can read (a SMILES string such as 'CCO')")
    return mol


def canonical(smiles: str, where: str = "SMILES") -> str:
    from rdkit import Chem

    return Chem.MolToSmiles(parse(smiles, where))


def mol_graph(smiles: str, where: str = "SMILES") -> MolGraph:
    """The graph of one molecule, atoms in canonical SMILES order."""
    from rdkit import Chem

    text = canonical(smiles, where)
    mol = Chem.MolFromSmiles(text)  # re-read: atom indices now follow the canonical string
    atoms = [(_element(a.GetSymbol()), min(a.GetDegree(), 5), min(max(a.GetFormalCharge(), -2), 2) + 2,
              min(a.GetTotalNumHs(), 4), int(a.GetIsAromatic()), int(a.IsInRing())) for a in mol.GetAtoms()]
    edges = []
    for b in mol.GetBonds():
        i, j = sorted((b.GetBeginAtomIdx(), b.GetEndAtomIdx()))
        kind = str(b.GetBondType())
        edges.append((i, j, BOND_TYPES.index(kind) if kind in BOND_TYPES else 0))
    return MolGraph(text, atoms, sorted(edges), [a.GetSymbol() for a in mol.GetAtoms()])


def _element(symbol: str) -> int:
    return ELEMENTS.index(symbol) if symbol in ELEMENTS else OTHER


@dataclass
class GraphBatch:
    """Graphs side by side: `atoms` [N, features], `edges` [2, E] (both directions unless causal), `bonds` [E],
    `graph` [N] (which graph each node is in), `sizes` (nodes per graph, in order)."""

    atoms: object
    edges: object
    bonds: object
    graph: object
    sizes: list[int]


def batch(graphs: list[MolGraph], *, causal: bool = False) -> GraphBatch:
    """Side by side; `causal`: each bond carries messages only from the earlier atom to the later one, so an
    atom's state depends only on the atoms written before it (the next-atom predictor's view)."""
    import torch

    atoms, src, dst, bonds, graph, sizes, offset = [], [], [], [], [], [], 0
    for g_index, g in enumerate(graphs):
        atoms += g.atoms
        for i, j, kind in g.edges:
            src.append(offset + i), dst.append(offset + j), bonds.append(kind)
            if not causal:
                src.append(offset + j), dst.append(offset + i), bonds.append(kind)
        graph += [g_index] * g.size
        sizes.append(g.size)
        offset += g.size
    return GraphBatch(torch.tensor(atoms, dtype=torch.long).reshape(-1, len(ATOM_CARDINALITIES)),
                      torch.tensor([src, dst], dtype=torch.long).reshape(2, -1), torch.tensor(bonds, dtype=torch.long),
                      torch.tensor(graph, dtype=torch.long), sizes)
