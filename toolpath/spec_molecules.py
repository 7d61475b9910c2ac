"""Molecules as task inputs (`inputs.graphs`): each item a SMILES string or a molecule file (.smi, .sdf, .mol), read
with RDKit when a spec loads and again where an episode starts.

Every molecule is numbered in the order of its canonical SMILES (atom i is the i-th atom that SMILES writes), so
the SMILES a model is shown, the atom indices the chemistry tools answer with and the stored MOL block agree.
Nothing here imports the rest of toolpath; RDKit is imported when a molecule is read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MOLECULE_SUFFIXES = (".smi", ".sdf", ".mol")
# A molecule file is read whole by RDKit at spec load; 16 MiB holds thousands of SDF records.
MAX_MOLECULE_FILE_BYTES = 16 * 1024 * 1024
# Each molecule's SMILES is written into the task text, so a task holds a handful, not a library.
MAX_GRAPHS = 64
MOL_MIME = "chemical/x-mdl-molfile"
NEEDS_RDKIT = "reading molecules needs RDKit: pip install 'toolpath[chem]'"
# How the task text lists a molecule: "graph_1: CC(=O)O (from acid.mol)". A SMILES holds no space.
LISTED = re.compile(r"^(graph_\d+): (\S+)", re.M)


class MoleculeError(ValueError):
    """A SMILES or molecule file RDKit cannot read; the message says which and why, `reason` the why alone."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class Molecule:
    name: str  # graph_1, graph_2, … in the order of inputs.graphs (a file's molecules in the file's order)
    smiles: str  # canonical isomeric SMILES
    molblock: str  # the same molecule, atoms in the SMILES' order, with coordinates (a file's own, else 2D)
    file: str = ""  # the file's name ("" for a SMILES written in the spec)
    record: int = 0  # which molecule of its file (1-based); 0 for a SMILES written in the spec

    @property
    def source(self) -> str:
        """Where it came from, for people: "acid.mol", "set.sdf, molecule 2", or "" for a SMILES in the spec."""
        return f"{self.file}, molecule {self.record}" if self.file and self.record > 1 else self.file


def is_molecule_file(item: str | Path) -> bool:
    """Is an inputs.graphs item a file (by its suffix)? No SMILES ends so: 'm' and 'd' are no SMILES atoms."""
    return str(item).lower().endswith(MOLECULE_SUFFIXES)


def graph_files(items: Sequence[str | Path]) -> list[Path]:
    """The inputs.graphs items that are files (the others are SMILES strings)."""
    return [Path(item) for item in items if is_molecule_file(item)]


def _rdkit():
    try:
        from rdkit import Chem, rdBase
    except ImportError:
        raise MoleculeError(NEEDS_RDKIT) from None
    return Chem, rdBase


def rdkit_reason(messages: str, text: str = "") -> str:
    """RDKit's logged errors in one line: times, prefixes and the echo of the input `text` dropped."""
    lines = [re.sub(r"^\[[0-9:]+\]\s*(ERROR:\s*)?(SMILES |SMARTS )?(Parse Error:\s*)?", "", line).strip()
             for line in messages.splitlines()]
    kept = [line.rstrip(":") for line in lines if line and line != text.strip() and line.strip("~^ ")
            and not line.startswith(("Failed parsing", "moving to the beginning", "ERROR: moving"))]
    return "; ".join(dict.fromkeys(kept[:3])) or "no reason given"


def canonical(mol):
    """The molecule with its atoms renumbered into its canonical SMILES' order (hydrogens stay implicit)."""
    Chem, _ = _rdkit()
    Chem.MolToSmiles(mol)  # records the order it writes the atoms in
    order = [int(i) for i in mol.GetProp("_smilesAtomOutputOrder").strip("[]").split(",") if i]
    return Chem.RenumberAtoms(mol, order)


def parse_smiles(text: str):
    """An RDKit molecule from a SMILES string; MoleculeError with RDKit's reason when it is not one."""
    Chem, rdBase = _rdkit()
    with rdBase.BlockLogs(), rdBase.CaptureErrorLog() as log:
        mol = Chem.MolFromSmiles(text)
    if mol is None:
        why = rdkit_reason(log.messages, text)
        raise MoleculeError(f"{text[:200]!r} is not a SMILES RDKit can read ({why})", why)
    if mol.GetNumAtoms() == 0:
        raise MoleculeError(f"{text[:200]!r} holds no atoms", "no atoms")
    return mol


def _smiles_lines(text: str, name: str, limit: int) -> list:
    """A .smi file's molecules: one per line, the SMILES and an optional title (either first: both orders are
    common), blank lines and # comments skipped, a first line that names its columns ("smiles name") a header."""
    mols = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if not mols and any("smiles" in f.lower() for f in fields[:2]):
            continue  # a header row
        if len(mols) == limit:
            break
        mol, first = None, None
        for field in fields[:2]:  # "SMILES ID", else "ID SMILES"
            try:
                mol = parse_smiles(field)
                break
            except MoleculeError as err:
                first = first or err
        if mol is None:
            raise MoleculeError(f"{name}: line {number}: {first}")
        mols.append(mol)
    return mols


def _sd_records(path: Path, limit: int) -> list:
    """An .sdf or .mol file's molecules (a .mol file is one SD record), coordinates and stereo as written."""
    Chem, rdBase = _rdkit()
    mols = []
    with open(path, "rb") as f, rdBase.BlockLogs(), rdBase.CaptureErrorLog() as log:
        for number, mol in enumerate(Chem.ForwardSDMolSupplier(f, removeHs=True), 1):
            if number > limit:
                break
            if mol is None:
                raise MoleculeError(f"{path.name}: molecule {number} is not one RDKit can read "
                                    f"({rdkit_reason(log.messages)})")
            mols.append(mol)
    return mols


def read_file(path: Path, limit: int = MAX_GRAPHS + 1) -> list:
    """The first `limit` molecules of a .smi, .sdf or .mol file, in order (more than a task may hold are not read);
    MoleculeError naming the line or record that fails."""
    _rdkit()
    try:
        if path.suffix.lower() == ".smi":
            # utf-8-sig: a byte-order mark some editors write is not part of the first SMILES
            mols = _smiles_lines(path.read_text(encoding="utf-8-sig", errors="replace"), path.name, limit)
        else:
            mols = _sd_records(path, limit)
    except OSError as err:
        raise MoleculeError(f"cannot read {path}: {err.strerror or err}") from None
    if not mols:
        raise MoleculeError(f"{path.name} holds no molecule")
    empty = next((i for i, m in enumerate(mols, 1) if m.GetNumAtoms() == 0), None)
    if empty is not None:
        raise MoleculeError(f"{path.name}: molecule {empty} holds no atoms")
    return mols


def _molecule(mol, name: str, file: str = "", record: int = 0) -> Molecule:
    Chem, _ = _rdkit()
    mol = canonical(mol)
    if mol.GetNumConformers() == 0:
        from rdkit.Chem import rdDepictor

        rdDepictor.Compute2DCoords(mol)  # so the stored MOL block draws as it is anywhere
    return Molecule(name=name, smiles=Chem.MolToSmiles(mol), molblock=Chem.MolToMolBlock(mol), file=file,
                    record=record)


def _item_molecules(item: str | Path) -> list[tuple[object, str, int]]:
    """(RDKit molecule, file name, which of the file's molecules) for each molecule of one inputs.graphs item."""
    if not is_molecule_file(item):
        try:
            return [(parse_smiles(str(item)), "", 0)]
        except MoleculeError as err:
            if re.search(r"\.[A-Za-z]{2,4}$", str(item)):  # a file name, but not of a kind read here
                raise MoleculeError(f"{err}; a molecule file's name ends in {', '.join(MOLECULE_SUFFIXES)}") from None
            raise
    path = Path(item)
    return [(m, path.name, n) for n, m in enumerate(read_file(path), 1)]


TOO_MANY = (f"more than {MAX_GRAPHS} molecules in all; a task's molecules are listed in its text, so give it at most "
            f"{MAX_GRAPHS} (split a larger file)")


def read_graphs(items: Sequence[str | Path], field: str = "inputs.graphs") -> list[Molecule]:
    """The molecules of inputs.graphs items (SMILES strings, or files already checked to be within reach), named
    graph_1, graph_2, …; MoleculeError naming the item (as `field`[i]; "" names the file alone) when one cannot be
    read."""
    found: list[tuple[object, str, int]] = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]: " if field else ""
        try:
            found += _item_molecules(item)
        except MoleculeError as err:
            raise MoleculeError(f"{where}{err}") from None
        if len(found) > MAX_GRAPHS:
            raise MoleculeError(f"{where}{TOO_MANY}")
    return [_molecule(m, f"graph_{k}", file, n) for k, (m, file, n) in enumerate(found, 1)]


def molecule_problems(items: Sequence[str | Path], refused: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(field path, why) for each inputs.graphs item RDKit cannot read, and for the item that takes the count of
    molecules past MAX_GRAPHS; items whose field path is in `refused` (files out of reach, too big) are not read."""
    problems, count = [], 0
    for i, item in enumerate(items):
        where = f"inputs.graphs[{i}]"
        if where in refused:
            continue
        try:
            count += len(_item_molecules(item))
        except MoleculeError as err:
            problems.append((where, str(err)))
            if str(err) == NEEDS_RDKIT:
                break  # said once is enough
            continue
        if count > MAX_GRAPHS:
            problems.append((where, TOO_MANY))
            break
    return problems


def listed(molecules: Sequence[Molecule]) -> str:
    """The lines of the task text that give a model the molecules: "graph_1: SMILES (from FILE)" each."""
    return "\n".join(f"{m.name}: {m.smiles}" + (f" (from {m.source})" if m.source else "") for m in molecules)


def molecules_in_text(text: str) -> dict[str, str]:
    """{graph_1: SMILES, …} as `listed` wrote them into a task's text (what a graph-reading model takes)."""
    return dict(LISTED.findall(text))
