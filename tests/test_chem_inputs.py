"""Molecules as task inputs (`inputs.graphs`) and the chemistry tools molecule_info and substructure."""

import json
import subprocess
import sys
import urllib.request

import pytest
from conftest import ROOT

from toolpath.spec import SpecError, parse_spec
from toolpath.tools.registry import ToolContext, ToolError, get_tool

Chem = pytest.importorskip("rdkit.Chem", reason="the chem extra is not installed: pip install 'toolpath[chem]'")
from rdkit.Chem import Crippen, Descriptors, rdMolDescriptors  # noqa: E402

from toolpath.spec_molecules import MAX_GRAPHS, molecules_in_text, read_graphs  # noqa: E402

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
CAFFEINE = "Cn1c(=O)c2c(ncn2C)n(C)c1=O"


def mol_file(path, smiles, three_d=False):
    """`smiles` written as a MOL file, with 3D coordinates (explicit hydrogens written, as tools do) or 2D."""
    from rdkit.Chem import AllChem

    mol = Chem.MolFromSmiles(smiles)
    if three_d:
        mol = Chem.AddHs(mol)
        AllChem.EmbedMolecule(mol, randomSeed=7)
    Chem.MolToMolFile(mol, str(path))
    return path


def spec(tmp_path, graphs, **extra):
    return parse_spec({"id": "t", "instruction": "Describe", "inputs": {"graphs": graphs}, **extra},
                      base_dir=tmp_path)


def test_spec_takes_smiles_and_molecule_files_and_makes_files_absolute(tmp_path):
    mol_file(tmp_path / "caffeine.mol", CAFFEINE, three_d=True)
    # a byte-order mark, a header, "SMILES title" and "ID<tab>SMILES" lines
    (tmp_path / "two.smi").write_text("\ufeffsmiles name\nc1ccccc1 benzene\n\nZINC0001\tOCC\n")
    s = spec(tmp_path, [ASPIRIN, "caffeine.mol", "two.smi"])
    assert s.inputs.graphs == [ASPIRIN, str((tmp_path / "caffeine.mol").resolve()), str(tmp_path / "two.smi")]
    names = {m.name: (m.smiles, m.source) for m in read_graphs(s.inputs.graphs)}
    assert names == {"graph_1": (ASPIRIN, ""), "graph_2": (CAFFEINE, "caffeine.mol"),
                     "graph_3": ("c1ccccc1", "two.smi"), "graph_4": ("CCO", "two.smi, molecule 2")}


@pytest.mark.parametrize("item, file_text, says", [
    ("C1CC", None, "'C1CC' is not a SMILES RDKit can read (unclosed ring"),
    ("CN(C)(C)(C)C", None, "Explicit valence for atom # 1 N"),
    ("mol.txt", None, "'mol.txt' is not a SMILES RDKit can read (syntax error while parsing: mol.txt; check for "
                      "mistakes around position 1); a molecule file's name ends in .smi, .sdf, .mol"),
    ("bad.sdf", "not a molecule\n\n\n", "bad.sdf: molecule 1 is not one RDKit can read (Counts line too short"),
    ("bad.smi", "CCO\nC(C first\n", "bad.smi: line 2: 'C(C' is not a SMILES RDKit can read"),
    ("gone.mol", None, "file not found"),
    ("../outside.mol", None, "is outside the spec's folder"),
    ("many.smi", "C\n" * (MAX_GRAPHS + 1), f"more than {MAX_GRAPHS} molecules in all"),
])
def test_spec_refuses_a_bad_molecule_naming_the_item_and_why(tmp_path, item, file_text, says):
    base = tmp_path / "task"
    base.mkdir()
    if file_text is not None:
        (base / item).write_text(file_text)
    mol_file(tmp_path / "outside.mol", "CCO")
    with pytest.raises(SpecError) as err:
        spec(base, ["CCO", item])
    assert "inputs.graphs[1]: " in str(err.value) and says in str(err.value), str(err.value)
    assert "inputs.graphs[0]" not in str(err.value)


@pytest.mark.parametrize("smiles, formula", [(ASPIRIN, "C9H8O4"), (CAFFEINE, "C8H10N4O2"), ("c1ccccc1", "C6H6")])
def test_molecule_info_gives_what_rdkit_computes(smiles, formula):
    info = get_tool("molecule_info").call({"molecule": smiles}, ToolContext()).data
    mol = Chem.MolFromSmiles(smiles)
    assert info["formula"] == formula and info["smiles"] == Chem.MolToSmiles(mol)
    assert info["molecular_weight"] == pytest.approx(Descriptors.MolWt(mol), abs=1e-3)
    assert info["logp"] == pytest.approx(Crippen.MolLogP(mol), abs=1e-3)
    assert info["tpsa"] == pytest.approx(rdMolDescriptors.CalcTPSA(mol), abs=1e-2)
    assert (info["h_bond_donors"], info["h_bond_acceptors"]) == (rdMolDescriptors.CalcNumHBD(mol),
                                                                  rdMolDescriptors.CalcNumHBA(mol))
    assert info["heavy_atoms"] == mol.GetNumHeavyAtoms() and info["aromatic"] is True
    assert info["lipinski_violations"] == 0


def test_molecule_info_known_values():
    tool = get_tool("molecule_info")
    aspirin, caffeine, benzene = (tool.call({"molecule": s}, ToolContext()).data
                                  for s in (ASPIRIN, CAFFEINE, "C1=CC=CC=C1"))
    assert aspirin["molecular_weight"] == pytest.approx(180.16, abs=0.01)
    assert (aspirin["h_bond_donors"], aspirin["rotatable_bonds"], aspirin["rings"]) == (1, 2, 1)
    assert caffeine["molecular_weight"] == pytest.approx(194.19, abs=0.01) and caffeine["rings"] == 2
    assert caffeine["h_bond_donors"] == 0 and caffeine["aromatic_rings"] == 2
    assert benzene["smiles"] == "c1ccccc1" and benzene["tpsa"] == 0 and benzene["heavy_atoms"] == 6


def test_substructure_counts_matches_in_the_canonical_smiles_atom_order():
    tool = get_tool("substructure")
    acid = tool.call({"molecule": ASPIRIN, "pattern": "[CX3](=O)[OX2H1]"}, ToolContext()).data
    assert acid["read_as"] == "SMARTS" and acid["matches"] and acid["count"] == 1
    atoms = Chem.MolFromSmiles(acid["smiles"]).GetAtoms()  # indices count the atoms of the SMILES it answers with
    assert [atoms[i].GetSymbol() for i in acid["atoms"][0]] == ["C", "O", "O"]
    assert tool.call({"molecule": ASPIRIN, "pattern": "C(=O)O"}, ToolContext()).data["count"] == 2  # acid, ester
    kekule = tool.call({"molecule": ASPIRIN, "pattern": "C1=CC=CC=C1"}, ToolContext()).data
    assert kekule["read_as"] == "SMILES" and kekule["count"] == 1 and len(kekule["atoms"][0]) == 6
    forced = [tool.call({"molecule": ASPIRIN, "pattern": p, "read_as": how}, ToolContext()).data["count"]
              for p, how in (("[CH3]", "auto"), ("[CH3]", "SMILES"), ("C1=CC=CC=C1", "SMARTS"))]
    assert forced == [1, 0, 0]  # SMARTS counts the methyl's hydrogens; a SMILES radical, an aliphatic ring: none
    none = tool.call({"molecule": "c1ccccc1", "pattern": "[#7]"}, ToolContext()).data
    assert (none["matches"], none["count"], none["atoms"]) == (False, 0, [])


def test_bad_molecules_and_patterns_are_tool_errors_naming_them():
    ctx = ToolContext(graphs={m.name: m for m in read_graphs(["CCO"])})
    with pytest.raises(ToolError, match=r"substructure: pattern '\[C' is neither SMARTS nor SMILES RDKit can read"):
        get_tool("substructure").call({"molecule": "graph_1", "pattern": "[C"}, ctx)
    with pytest.raises(ToolError, match=r"molecule_info: 'C1CC' is neither a molecule of this episode \(graph_1\) "
                                        r"nor a SMILES RDKit can read: .*unclosed ring"):
        get_tool("molecule_info").call({"molecule": "C1CC"}, ctx)
    with pytest.raises(ToolError, match=r"unknown molecule 'graph_9'; molecules in this episode: graph_1"):
        get_tool("molecule_info").call({"molecule": "graph_9"}, ctx)


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    """One run with two molecules (a SMILES and a 3D MOL file) whose policy asks molecule_info about the file by
    its name, then answers with what it read; the store's home is left for the viewer."""
    import os

    from toolpath.agents.episode import run_episode
    from toolpath.policies.base import Response
    from toolpath.runs import Store
    from toolpath.state import ToolCall

    tmp = tmp_path_factory.mktemp("chem")
    mol_file(tmp / "caffeine.mol", CAFFEINE, three_d=True)
    s = spec(tmp, [ASPIRIN, "caffeine.mol"], model="scripted:x", tools=["molecule_info", "final_answer"])
    seen = {}

    class Chemist:
        name = "chemist"

        def respond(self, messages, tools, **gen):
            seen.setdefault("task", messages[1])
            if len(messages) == 2:
                return Response(text="", tool_calls=[ToolCall(id="c1", name="molecule_info",
                                                              arguments={"molecule": "caffeine.mol"})])
            return Response(text=messages[-1].content)

    old = os.environ.get("TOOLPATH_HOME")
    os.environ["TOOLPATH_HOME"] = str(tmp / "home")
    store = Store(tmp / "home")
    try:
        result = run_episode(s, store, policy=Chemist())
    finally:
        store.close()
        os.environ.pop("TOOLPATH_HOME") if old is None else os.environ.__setitem__("TOOLPATH_HOME", old)
    return tmp / "home", result, seen["task"]


def test_episode_stores_the_molecules_and_lists_them_by_name(episode):
    home, result, task = episode
    assert [(r.name, r.mime) for r in task.graphs] == [("graph_1.mol", "chemical/x-mdl-molfile")] * 1 + \
        [("graph_2.mol", "chemical/x-mdl-molfile")]
    assert molecules_in_text(task.content) == {"graph_1": ASPIRIN, "graph_2": CAFFEINE}
    assert f"graph_2: {CAFFEINE} (from caffeine.mol)" in task.content
    stored = Chem.MolFromMolFile(task.graphs[1].path)  # the file's own 3D coordinates, hydrogens implicit
    assert stored.GetConformer().Is3D() and Chem.MolToSmiles(stored) == CAFFEINE
    assert json.loads(result.answer)["formula"] == "C8H10N4O2"  # the tool found the molecule by its file name


def test_viewer_draws_a_runs_molecules(episode):
    from toolpath.viewer.server import serve

    home, _, task = episode
    server, url = serve(home, port=0)
    try:
        with urllib.request.urlopen(url + "depictions/" + task.graphs[0].sha256) as r:
            assert r.headers["Content-Type"] == "image/png" and r.read().startswith(b"\x89PNG")
        for missing in ("0" * 64, "nope"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(url + "depictions/" + missing)
            assert err.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_tools_call_names_molecule_files_and_refuses_a_bad_one(home, tmp_path, capsys):
    from toolpath.cli import main

    assert main(["tools", "call", "substructure", "--input", str(mol_file(tmp_path / "caf.mol", CAFFEINE)),
                 "--arg", "molecule=graph_1", "--arg", "pattern=[#6](=O)", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert json.loads(out["content"])["count"] == 2 and out["artifacts"][0]["mime"] == "image/png"
    (tmp_path / "bad.smi").write_text("C1CC\n")
    assert main(["tools", "call", "molecule_info", "--input", str(tmp_path / "bad.smi"),
                 "--arg", "molecule=graph_1"]) == 2
    assert "--input: bad.smi: line 1: 'C1CC' is not a SMILES RDKit can read" in capsys.readouterr().err


def test_tools_list_names_the_chemistry_tools_without_importing_rdkit(home):
    code = ("import sys; from toolpath.cli import main\nmain(['tools', 'list'])\n"
            "print('RDKIT', 'rdkit' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={"TOOLPATH_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert "molecule_info" in r.stdout and "substructure" in r.stdout and "RDKIT False" in r.stdout, r.stderr
