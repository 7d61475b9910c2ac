"""Questions about a molecule whose answers RDKit computes (the tiny graph-LM's training dialogs and its held-out
evaluation), and the molecules they are asked about: RDKit's bundled NCI set, split by molecule. Each question
names the scorer of toolpath/evals/scorers.py that grades a reply to it: `integer` for counts, `mra` (mean
relative accuracy) for measured quantities, `short_answer` for yes/no.

Substructure questions are asked about named groups (SMARTS below) and sampled so that yes and no come equally
often; otherwise "no" alone would answer most of them.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from ...policies.molm import graphs as mg

# name -> SMARTS: common functional groups and rings.
GROUPS = {
    "carboxylic acid": "[CX3](=O)[OX2H1,OX1-]",
    "hydroxyl": "[OX2H][#6]",
    "primary amine": "[NX3;H2][#6]",
    "amide": "[NX3][CX3](=[OX1])[#6]",
    "ester": "[#6][CX3](=O)[OX2H0][#6]",
    "ketone": "[#6][CX3](=O)[#6]",
    "aldehyde": "[CX3H1](=O)[#6]",
    "nitro": "[$([NX3](=O)=O),$([NX3+](=O)[O-])]",
    "nitrile": "[NX1]#[CX2]",
    "benzene ring": "c1ccccc1",
    "halogen": "[F,Cl,Br,I]",
    "sulfonamide": "[SX4](=[OX1])(=[OX1])[NX3]",
    "ether": "[OD2]([#6])[#6]",
    "pyridine ring": "n1ccccc1",
}


@dataclass(frozen=True)
class Question:
    kind: str  # what is asked: "weight", "rings", "group:ester", ...
    text: str
    answer: str
    scorer: str  # integer | mra | short_answer


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def facts(smiles: str) -> list[Question]:
    """Every question about the molecule, group questions included (one per group)."""
    from rdkit import Chem
    from rdkit.Chem import Crippen, Descriptors, Lipinski, rdMolDescriptors

    mol = mg.parse(smiles)
    weight, logp = Descriptors.MolWt(mol), Crippen.MolLogP(mol)
    donors, acceptors = Lipinski.NumHDonors(mol), Lipinski.NumHAcceptors(mol)
    violations = (weight > 500) + (logp > 5) + (donors > 5) + (acceptors > 10)
    rings = rdMolDescriptors.CalcNumRings(mol)
    out = [
        Question("weight", "What is the molecular weight of this molecule?", f"{weight:.1f}", "mra"),
        Question("logp", "What is the Crippen logP of this molecule?", f"{logp:.1f}", "mra"),
        Question("tpsa", "What is the topological polar surface area (TPSA) of this molecule?",
                 f"{rdMolDescriptors.CalcTPSA(mol):.1f}", "mra"),
        Question("heavy_atoms", "How many heavy atoms does this molecule have?", str(mol.GetNumHeavyAtoms()),
                 "integer"),
        Question("rings", "How many rings does this molecule have?", str(rings), "integer"),
        Question("aromatic_rings", "How many aromatic rings does this molecule have?",
                 str(rdMolDescriptors.CalcNumAromaticRings(mol)), "integer"),
        Question("donors", "How many hydrogen-bond donors does this molecule have?", str(donors), "integer"),
        Question("acceptors", "How many hydrogen-bond acceptors does this molecule have?", str(acceptors), "integer"),
        Question("rotatable", "How many rotatable bonds does this molecule have?",
                 str(rdMolDescriptors.CalcNumRotatableBonds(mol)), "integer"),
        Question("aromatic", "Is this molecule aromatic?", _yes(any(a.GetIsAromatic() for a in mol.GetAtoms())),
                 "short_answer"),
        Question("has_ring", "Does this molecule have a ring?", _yes(rings > 0), "short_answer"),
        Question("lipinski", "Does this molecule pass Lipinski's rule of five (at most one violation)?",
                 _yes(violations <= 1), "short_answer"),
    ]
    for name, smarts in GROUPS.items():
        found = mol.HasSubstructMatch(Chem.MolFromSmarts(smarts))
        article = "an" if name[0] in "aeiou" else "a"
        out.append(Question(f"group:{name}", f"Does this molecule contain {article} {name}?", _yes(found),
                            "short_answer"))
    return out


def pick(rng: random.Random, questions: list[Question], k: int) -> list[Question]:
    """k distinct questions of one molecule; each group question drawn with a yes or a no answer at even odds
    (when the molecule has both kinds), so a model cannot learn "no" for groups."""
    plain = [q for q in questions if not q.kind.startswith("group:")]
    groups = {a: [q for q in questions if q.kind.startswith("group:") and q.answer == a] for a in ("yes", "no")}
    chosen: list[Question] = []
    while len(chosen) < k:
        if rng.random() < 1 / 3 and (groups["yes"] or groups["no"]):
            side = rng.choice([a for a in ("yes", "no") if groups[a]])
            chosen.append(groups[side].pop(rng.randrange(len(groups[side]))))
        elif plain:
            chosen.append(plain.pop(rng.randrange(len(plain))))
        elif not (groups["yes"] or groups["no"]):
            break
    return chosen


def heldout_questions(smiles: list[str], per_molecule: int, seed: int) -> list[tuple[str, Question]]:
    """A fixed evaluation sample: `per_molecule` questions of each held-out molecule, drawn like training's."""
    rng = random.Random(seed)
    return [(s, q) for s in smiles for q in pick(rng, facts(s), per_molecule)]


def nci_smiles(limit: int | None = None) -> list[str]:
    """The first `limit` (default all 5,000) NCI molecules RDKit ships (Data/NCI/first_5K.smi), as written there;
    the ones RDKit cannot read left out."""
    from rdkit import Chem, RDConfig, RDLogger

    RDLogger.DisableLog("rdApp.*")
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts and Chem.MolFromSmiles(parts[0]) is not None:
                out.append(parts[0])
            if limit is not None and len(out) >= limit:
                break
    return out


def split(smiles: list[str], heldout: float, seed: int) -> tuple[list[str], list[str]]:
    """(train, held out) by molecule: canonical duplicates and single-atom molecules dropped, then a seeded
    shuffle; the held-out share is `heldout`."""
    seen, unique = set(), []
    for s in smiles:
        c = mg.canonical(s)
        if c not in seen and mg.parse(c).GetNumAtoms() > 1:
            seen.add(c)
            unique.append(c)
    random.Random(seed).shuffle(unique)
    n = int(round(len(unique) * heldout))
    return unique[n:], unique[:n]
