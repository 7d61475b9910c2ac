"""The tiny graph-LM (policies/molm/, train/tiny_molm.py): molecules as graph tensors, the causal encoder and its
next-atom entropy, the patcher's rule, the two connectors at equal size, the RDKit-computed questions, and the
whole build at toy scale (a tiny random LM made here, seconds) writing a folder that loads and answers, by seed.
"""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("rdkit", reason="molecules are read with RDKit (pip install rdkit)")
torch = pytest.importorskip("torch")

from tests.tiny_lm import save_tiny_chat_lm  # noqa: E402
from toolpath.evals.benchmarks import molqa_data as qa  # noqa: E402
from toolpath.policies.molm import connector as mc  # noqa: E402
from toolpath.policies.molm import encoder as me  # noqa: E402
from toolpath.policies.molm import graphs as mg  # noqa: E402
from toolpath.policies.molm import patcher as mp  # noqa: E402

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-lm")
    save_tiny_chat_lm(folder, "What is the molecular weight of this molecule ? How many rings does it have yes no "
                              "Does contain an a 0 1 2 3 4 5 6 7 8 9 .")
    return folder


@pytest.fixture(scope="module")
def pretrained():
    """A small encoder given a hundred steps of next-atom prediction on NCI molecules."""
    from toolpath.train.molm_pretraining import pretrain

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a second thread only waits on the first
    train, heldout = qa.split(qa.nci_smiles(300), 0.1, seed=0)
    encoder, head = me.build_encoder(me.EncoderSize(width=32, layers=2), seed=0)
    heldout = [mg.mol_graph(s) for s in heldout]
    stats = pretrain(encoder, head, [mg.mol_graph(s) for s in train], heldout[:20], steps=100, batch=16, lr=5e-3,
                     seed=0)
    torch.set_num_threads(threads)
    return encoder, head, stats, heldout


# ---- molecules as graphs ---------------------------------------------------------------------------------

def test_a_molecule_becomes_atoms_in_canonical_order_with_their_bonds():
    g = mg.mol_graph("Oc1ccccc1")  # phenol, written the other way round from RDKit's canonical form
    assert g.smiles == "Oc1ccccc1" == mg.mol_graph("c1ccc(O)cc1").smiles and g.size == 7
    assert g.symbols[0] == "O" and g.atoms[0][0] == mg.ELEMENTS.index("O")
    aromatic = [a[4] for a in g.atoms]
    assert aromatic == [0, 1, 1, 1, 1, 1, 1] and [a[5] for a in g.atoms] == aromatic
    assert len(g.edges) == 7 and sum(kind == mg.BOND_TYPES.index("AROMATIC") for *_, kind in g.edges) == 6
    charged = mg.mol_graph("C[N+](C)(C)C.[Cl-]")
    assert sorted(a[2] for a in charged.atoms) == [1, 2, 2, 2, 2, 3]  # -1, 0 x4, +1 shifted by 2


def test_bad_smiles_is_one_clear_error_naming_where():
    with pytest.raises(ValueError, match=r"graph_2: 'C1CC\(' is not a molecule RDKit can read"):
        mg.mol_graph("C1CC(", where="graph_2")
    with pytest.raises(ValueError, match="is not a molecule"):
        mg.mol_graph("")


def test_causal_batches_send_messages_only_forward():
    graphs = [mg.mol_graph("CCO"), mg.mol_graph(ASPIRIN)]
    whole, causal = mg.batch(graphs), mg.batch(graphs, causal=True)
    assert whole.edges.shape[1] == 2 * causal.edges.shape[1] and (causal.edges[0] < causal.edges[1]).all()
    assert whole.sizes == [3, 13] and whole.graph.tolist() == [0] * 3 + [1] * 13


def test_an_atoms_causal_state_ignores_the_atoms_after_it(pretrained):
    encoder, head, *_ = pretrained
    a, b = mg.mol_graph("CCCCCCO"), mg.mol_graph("CCCCCCN")  # the same until the last atom
    with torch.no_grad():
        ha, hb = encoder(mg.batch([a], causal=True)), encoder(mg.batch([b], causal=True))
    assert torch.allclose(ha[:-1], hb[:-1]) and not torch.allclose(ha[-1], hb[-1])
    assert me.next_atom_targets([a]).tolist() == [0] * 5 + [mg.ELEMENTS.index("O"), me.END]


def test_pretraining_beats_guessing_the_most_common_next_atom(pretrained):
    held = pretrained[2]["heldout"]
    assert held["atoms"] > 0 and held["accuracy"] > held["majority_accuracy"]


# ---- the patcher and the connectors ----------------------------------------------------------------------

def test_a_patch_closes_where_the_entropy_rises_above_the_molecules_upper_quartile():
    bits = torch.tensor([0.1, 0.2, 3.0, 0.1, 0.2, 0.1, 2.5, 2.8, 0.3, 0.2, 0.1, 0.2])
    assert mp.patch_ids(bits, rule="rise") == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    assert mp.count(mp.patch_ids(bits, rule="rise")) == 3
    for rule in mp.RULES:
        assert mp.patch_ids(torch.tensor([1.0, 1.0, 1.0]), rule=rule) == [0, 0, 0]  # flat: one patch
        assert mp.patch_ids(torch.tensor([0.1, 5.0]), rule=rule) == [0, 0]  # a rise at the end opens nothing
    with pytest.raises(ValueError, match="patch rule 'peak'"):
        mp.patch_ids(bits, rule="peak")


def test_a_high_entropy_that_climbs_again_is_a_second_peak_and_a_falling_one_is_not():
    # atoms 6 and 7 are both in the upper quartile: 7 climbs above 6 (a new peak), 10 falls below 9 (the same one)
    climbing = torch.tensor([0.1, 0.2, 3.0, 0.1, 0.2, 0.1, 2.5, 2.8, 0.3, 0.2, 0.1, 0.2])
    assert mp.patch_ids(climbing) == [0, 0, 0, 1, 1, 1, 1, 2, 3, 3, 3, 3]
    falling = torch.tensor([0.1, 0.2, 3.0, 0.1, 0.2, 0.1, 2.8, 2.5, 0.3, 0.2, 0.1, 0.2])
    assert mp.patch_ids(falling) == mp.patch_ids(falling, rule="rise") == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2]


def test_token_count_grows_with_heavy_atom_count(pretrained):
    from scipy.stats import spearmanr

    encoder, head, _, graphs = pretrained
    counts = [mp.count(ids) for ids in mp.patches(encoder, head, graphs)]
    assert spearmanr([g.size for g in graphs], counts).statistic > 0.5
    small = [c for g, c in zip(graphs, counts) if g.size <= 10]
    large = [c for g, c in zip(graphs, counts) if g.size >= 25]
    assert small and large and max(small) < sum(large) / len(large) + 3 and min(large) > 1


def test_the_dynamic_and_fixed_connectors_are_the_same_size_and_give_their_token_counts(pretrained):
    encoder, head, *_ = pretrained
    graphs = [mg.mol_graph(s) for s in ("CCO", ASPIRIN, "CC(C)Cc1ccc(cc1)C(C)C(=O)O")]
    states, ids = encoder(mg.batch(graphs)), mp.patches(encoder, head, graphs)
    size = mc.ConnectorSize(node_width=32, width=32, heads=2, lm_width=24)
    dynamic, fixed = mc.build_connector("dynamic", size, 0), mc.build_connector("fixed", size, 0)
    edt = mc.build_connector("edt", size, 0)
    assert mc.parameter_count(dynamic) == mc.parameter_count(fixed) == mc.parameter_count(edt)
    assert [p.shape for p in dynamic.parameters()] == [p.shape for p in fixed.parameters()]
    sizes = [g.size for g in graphs]
    assert dynamic(states, sizes, ids).shape == (sum(mp.count(i) for i in ids), 24)
    assert fixed(states, sizes, ids).shape == (3 * mc.FIXED_QUERIES, 24)
    both = edt(states, sizes, ids)  # the fixed queries, then one per patch
    assert both.shape == (3 * mc.FIXED_QUERIES + sum(mp.count(i) for i in ids), 24)
    assert [edt.tokens(i) for i in ids] == [mc.FIXED_QUERIES + mp.count(i) for i in ids]
    with pytest.raises(ValueError, match="connector kind 'mean'"):
        mc.build_connector("mean", size, 0)


def test_the_global_read_patch_tokens_differ_from_dynamic_only_in_reading_every_atom():
    size = mc.ConnectorSize(node_width=8, width=8, heads=2, lm_width=6)
    dynamic, wide = mc.build_connector("dynamic", size, 0), mc.build_connector("dynamic-global", size, 0)
    fixed = mc.build_connector("fixed", size, 0)
    assert mc.parameter_count(wide) == mc.parameter_count(fixed) == mc.parameter_count(dynamic)
    wide.load_state_dict(dynamic.state_dict())  # the same weights fit: only the mask is the kind's
    sizes, ids = [5, 3], [[0, 0, 1, 1, 2], [0, 1, 1]]
    own, member, learned, counts = dynamic.layout(sizes, ids)
    every, member2, learned2, counts2 = wide.layout(sizes, ids)
    # the same queries (each patch's mean state and position), the same number of them
    assert counts == counts2 == [3, 2] and torch.equal(member, member2) and torch.equal(learned, learned2)
    assert (~own)[0, :3].tolist() == [[True, True, False, False, False], [False, False, True, True, False],
                                      [False, False, False, False, True]]  # a patch reads its own atoms
    assert (~every)[0, :3].all() and (~every)[1, :2, :3].all()  # every patch reads the whole molecule
    assert not (~every)[1, :2, 3:].any()  # and nothing past it (the batch's padding atoms)
    h = torch.randn(8, 8)
    assert wide(h, sizes, ids).shape == dynamic(h, sizes, ids).shape == (5, 6)
    assert not torch.allclose(wide(h, sizes, ids), dynamic(h, sizes, ids))


# ---- questions ---------------------------------------------------------------------------------------------

def test_questions_carry_rdkits_answers_and_their_scorers():
    ethanol = {q.kind: q for q in qa.facts("CCO")}
    assert ethanol["weight"].answer == "46.1" and ethanol["weight"].scorer == "mra"
    assert ethanol["heavy_atoms"].answer == "3" and ethanol["has_ring"].answer == "no"
    assert ethanol["group:hydroxyl"].answer == "yes" and ethanol["group:benzene ring"].answer == "no"
    aspirin = {q.kind: q for q in qa.facts(ASPIRIN)}
    assert [aspirin[k].answer for k in ("group:carboxylic acid", "group:ester", "aromatic_rings", "lipinski",
                                        "donors")] == ["yes", "yes", "1", "yes", "1"]
    assert aspirin["group:ester"].text == "Does this molecule contain an ester?"


def test_group_questions_come_with_yes_and_no_equally_often():
    rng, facts = random.Random(0), qa.facts(ASPIRIN)
    picked = [q for _ in range(300) for q in qa.pick(rng, facts, 4) if q.kind.startswith("group:")]
    yes = sum(q.answer == "yes" for q in picked) / len(picked)
    assert 0.4 < yes < 0.6
    assert len({q.kind for q in qa.pick(rng, facts, 10)}) == 10


def test_the_prior_way_answers_each_kind_with_its_best_training_reply():
    from benchmarks.molqa import prior_figures

    facts = [qa.facts(s) for s in ("CCO", "CCCO", "CCCCO", "c1ccccc1O")]
    sample = [(s, q) for s in ("CCN", "c1ccccc1N") for q in qa.facts(s) if q.kind in ("has_ring", "aromatic")]
    figures = prior_figures(facts, sample, per_molecule=20, seed=0)
    assert figures["replies"]["has_ring"] == "no" and figures["replies"]["aromatic"] == "no"  # 3 of 4 say no
    assert figures["scores"] == [1.0, 1.0, 0.0, 0.0]  # right about the chain, wrong about the ring: it never looks
    assert figures["all"]["questions"] == 4 and figures["yes_no"]["accuracy"] == 0.5


def test_molecules_split_by_molecule_and_seed():
    smiles = qa.nci_smiles(200) + ["OCC"]  # a duplicate of ethanol's canonical form, written differently
    train, held = qa.split(smiles + ["CCO"], 0.2, seed=1)
    assert not set(train) & set(held) and len(train) + len(held) == len(set(train) | set(held))
    assert (train, held) == qa.split(smiles + ["CCO"], 0.2, seed=1) != qa.split(smiles + ["CCO"], 0.2, seed=2)


# ---- the build at toy scale --------------------------------------------------------------------------------

def _build(tmp_path, lm, seed=0):
    from toolpath.train import tiny_molm

    return tiny_molm.build(seed, home=tmp_path, config=tiny_molm.toy_config(), lm_folder=lm)


@pytest.fixture(scope="module")
def toy_home(tmp_path_factory, tiny_lm):
    """A home with the toy build of seed 0 in it, and its report."""
    home = tmp_path_factory.mktemp("toy-home")
    return home, _build(home, tiny_lm)


def test_a_dialog_about_a_molecule_has_its_graph_tokens_and_loss_only_on_answers(tiny_lm):
    from toolpath.policies.molm.model import PLACEHOLDER, graph_tokenizer
    from toolpath.train.connector_training import encode_dialog

    tok = graph_tokenizer(tiny_lm)
    ids, labels = encode_dialog(tok, [("How many rings does it have?", "1"), ("Does it contain an ester?", "yes")],
                                5, placeholder=PLACEHOLDER, item="graph")
    assert ids.count(tok.convert_tokens_to_ids(PLACEHOLDER)) == 5
    assert tok.decode([t for t in labels if t != -100]) == "1<|im_end|>yes<|im_end|>"
    text_ids, _ = encode_dialog(tok, [(f"{ASPIRIN}\nHow many rings does it have?", "1")], 0,
                                placeholder=PLACEHOLDER, item=None)  # the SMILES-as-text baseline's dialog
    assert tok.convert_tokens_to_ids(PLACEHOLDER) not in text_ids
    assert tok.decode(text_ids).startswith(f"<|im_start|>user\n{ASPIRIN}\nHow many")


def test_packed_dialogs_give_the_padded_batchs_loss(tiny_lm):
    from toolpath.policies.molm.model import PLACEHOLDER, graph_tokenizer, grown_lm
    from toolpath.train import connector_training as ct

    tok = graph_tokenizer(tiny_lm)
    lm = grown_lm(tiny_lm, tok)
    enc = [ct.encode_dialog(tok, turns, n, placeholder=PLACEHOLDER, item="graph") for turns, n in
           (([("How many rings does it have?", "1")], 2),
            ([("Does it contain an ester?", "yes"), ("How many rings does it have?", "2")], 5),
            ([("What is the molecular weight of this molecule?", "9")], 1))]
    vectors = torch.randn(8, lm.config.hidden_size, generator=torch.Generator().manual_seed(0))
    chat = ct.ChatLM(lm.get_input_embeddings(), lm.model, lm.lm_head)
    place = tok.convert_tokens_to_ids(PLACEHOLDER)
    ids, labels, positions = ct.pack(enc)
    assert ids.shape == (1, sum(len(x) for x, _ in enc)) and positions[0, len(enc[0][0])] == 0
    with torch.no_grad():
        padded, n_padded = ct.answer_loss(chat, *ct.collate(enc, tok.pad_token_id), place, vectors)
        packed, n_packed = ct.answer_loss(chat, ids, labels, None, place, vectors, positions)
    assert n_packed == n_padded and abs(float(packed) - float(padded)) < 1e-5  # no dialog reads another


def test_the_toy_build_writes_a_folder_that_loads_and_answers(toy_home, tiny_lm):
    from toolpath.policies.molm.model import is_graph_lm, load

    home, report = toy_home
    folder = home / "models" / "tiny-molm"
    assert report["folder"] == str(folder) and is_graph_lm(folder)
    assert not list((home / "models").glob(".tiny-molm.*"))
    saved = json.loads((folder / "tiny_molm.json").read_text())
    assert saved["data"]["heldout_molecules"] > 0 and saved["encoder"]["heldout"]["atoms"] > 0
    assert saved["connector"]["kind"] == "dynamic" and saved["figures"]["all"]["questions"] == 3
    model = load(folder)
    assert isinstance(model.answer(ASPIRIN, "Does this molecule have a ring?", max_new_tokens=3), str)
    with pytest.raises(ValueError, match="not a graph-LM folder"):
        load(tiny_lm)
    assert model.config.patch_rule == mp.RULE == json.loads((folder / "graph_lm.json").read_text())["patch_rule"]


def test_a_folder_keeps_the_patch_rule_it_was_trained_with(toy_home, tmp_path):
    import shutil

    from toolpath.policies.molm.model import load

    folder = shutil.copytree(toy_home[0] / "models" / "tiny-molm", tmp_path / "old")
    config = json.loads((folder / "graph_lm.json").read_text())
    del config["patch_rule"]  # written before the rule was a setting: trained with the rising-edge rule
    (folder / "graph_lm.json").write_text(json.dumps(config))
    assert load(folder).config.patch_rule == mp.LEGACY_RULE
    (folder / "graph_lm.json").write_text(json.dumps(config | {"patch_rule": "peak"}))
    with pytest.raises(ValueError, match=r"graph_lm.json: patch_rule 'peak' is not one of climb, rise"):
        load(folder)


def test_the_same_seed_gives_the_same_weights(tmp_path, tiny_lm, toy_home):
    from safetensors.torch import load_file

    def weights(home, seed=None):
        if seed is not None:
            _build(home, tiny_lm, seed)
        folder = home / "models" / "tiny-molm"
        return load_file(folder / "graph.safetensors") | load_file(folder / "model.safetensors")

    a, b, c = weights(toy_home[0]), weights(tmp_path / "b", 0), weights(tmp_path / "c", 1)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if k.startswith("connector."))


def test_models_list_and_build_know_tiny_molm(home, monkeypatch, capsys):
    from toolpath.cli import main
    from toolpath.policies.local_models import variants
    from toolpath.train import tiny_molm

    row = next(r for r in variants() if r["model"] == "local:tiny-molm")
    assert not row["installed"] and "toolpath models build tiny-molm" in row["install"]
    assert row["prompt"] == "chat, molecules (inputs.graphs)"
    seeds = []

    def fake_build(seed):
        seeds.append(seed)
        return {"folder": str(home / "models" / "tiny-molm"), "seconds": {"total": 3.0},
                "figures": {"all": {"accuracy": 0.5}, "yes_no": {"accuracy": 0.75}, "numeric": {"accuracy": 0.25}}}

    monkeypatch.setattr(tiny_molm, "build", fake_build)
    assert main(["models", "build", "tiny-molm", "--seed", "4"]) == 0
    assert seeds == [4] and "held-out molecules: 0.500 (yes/no 0.750, numeric 0.250)" in capsys.readouterr().out


# ---- the policy ------------------------------------------------------------------------------------------

def test_the_policy_reads_the_listed_molecules_out_of_the_task_text():
    from toolpath.policies.graph_lm import prompt_content
    from toolpath.spec_molecules import listed, read_graphs

    text = "How many rings does it have?\n\nMolecules (tools take them by these names), as canonical SMILES:\n" + \
        listed(read_graphs([ASPIRIN]))
    assert prompt_content(text) == [{"type": "graph", "smiles": ASPIRIN, "name": "graph_1"},
                                    {"type": "text", "text": "How many rings does it have?"}]
    two = prompt_content("Compare them.\ngraph_1: CCO\ngraph_2: CCN")
    assert [i.get("text") or i["smiles"] for i in two] == ["graph_1:", "CCO", "graph_2:", "CCN", "Compare them."]


def test_local_tiny_molm_answers_an_episode_about_its_molecule(home, toy_home):
    import shutil

    from toolpath.agents.episode import run_episode
    from toolpath.policies.base import PolicyError
    from toolpath.policies.graph_lm import GraphLMPolicy
    from toolpath.policies.local import load_local
    from toolpath.runs import Store
    from toolpath.spec import ModelSpec, parse_spec
    from toolpath.state import Message

    with pytest.raises(PolicyError, match=r"local:tiny-molm .* is not built .*`toolpath models build tiny-molm`"):
        load_local(ModelSpec(name="local:tiny-molm"))
    shutil.copytree(toy_home[0] / "models", home / "models")
    policy = load_local(ModelSpec(name="local:tiny-molm"))
    assert isinstance(policy, GraphLMPolicy)
    from toolpath.policies.base import load

    assert isinstance(load(ModelSpec(name=f"hf:{home / 'models' / 'tiny-molm'}")), GraphLMPolicy)  # the folder itself
    spec = parse_spec({"id": "t", "instruction": "Does this molecule have a ring?", "inputs": {"graphs": [ASPIRIN]},
                       "model": "local:tiny-molm", "tools": ["final_answer"], "limits": {"max_steps": 1}},
                      base_dir=home)
    asked, reply = [], policy.model.reply

    def recorded(content, max_new_tokens):  # the toy model's words are random: the answer is fixed, the rest real
        asked.append(content)
        return "yes", *reply(content, max_new_tokens)[1:]

    policy.model.reply = recorded
    store = Store(home)
    try:
        result = run_episode(spec, store, policy=policy)
    finally:
        store.close()
    assert asked == [[{"type": "graph", "smiles": ASPIRIN, "name": "graph_1"},
                      {"type": "text", "text": "Does this molecule have a ring?"}]]
    assert result.status == "finished" and result.answer == "yes"
    policy.model.reply = reply
    with pytest.raises(PolicyError, match="graph_1: 'C1CC' is not a molecule"):
        policy.respond([Message(role="user", content="Rings?\ngraph_1: C1CC")], [])


# ---- `toolpath eval molqa` -----------------------------------------------------------------------------------

def test_molqa_asks_about_molecules_the_build_held_out_and_scores_with_each_questions_scorer(monkeypatch):
    from toolpath.evals.benchmarks import get_benchmark, molqa
    from toolpath.spec_molecules import read_graphs
    from toolpath.train.tiny_molm import BuildConfig

    assert (molqa.HELDOUT, molqa.SPLIT_SEED) == (BuildConfig().heldout, 0)
    few = qa.split(qa.nci_smiles(200), molqa.HELDOUT, molqa.SPLIT_SEED)  # the same split of fewer molecules
    monkeypatch.setattr(molqa, "split", lambda: few)
    bench = get_benchmark("molqa")
    records = list(bench.records(limit=6))
    assert records == list(bench.records(limit=6)) and len(records) == 6
    assert {r.data["smiles"] for r in records} <= set(few[1])
    spec = bench.to_task(records[0])
    assert spec.instruction == records[0].data["question"] and spec.evaluator.name == records[0].data["scorer"]
    assert spec.model.name == "local:tiny-molm" and bench.to_task(records[0], "local").model.name == "local"
    assert read_graphs(spec.inputs.graphs)[0].smiles == records[0].data["smiles"]
    numeric = next(r for r in records if r.category == "numeric")
    assert bench.score(numeric, f"It is {numeric.data['answer']}.") == 1.0
    assert bench.score(numeric, "no idea") == 0.0
