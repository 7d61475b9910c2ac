"""Hostile model files and compression options. A model folder, a router file and a compressor option may come from
anyone: each must end in one clear error naming the file or the option (and the limit), with no traceback, before
anything is unpickled or allocated, and with nothing left behind; an interrupted compress's temporary folder is
removed by the next compress of the same output."""

import fcntl
import json
import os
import struct

import pytest
from conftest import write

from toolpath import cli

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
          "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64}


def safetensors_bytes(header, data=b"", length=None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


class Evil:
    """Unpickling this runs a shell command that leaves a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


# ---- model folders: each (folder, what the error must name) ----------------------------------------------------

def pickle_bin(folder):
    import pickle

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Evil(folder.parent / "PWNED")}))
    return "pytorch_model.bin"


def header_length_2_62(folder):
    (folder / "model.safetensors").write_bytes(safetensors_bytes(b"{}", length=2**62))
    return "header claims 4,611,686,018,427,387,904 bytes"


def tensor_claiming_2_62_bytes(folder):
    entry = {"dtype": "F32", "shape": [2**31, 2**29], "data_offsets": [0, 2**62]}
    (folder / "model.safetensors").write_bytes(safetensors_bytes({"w": entry}, b"\0" * 16))
    return "lie beyond the file's 16 bytes"


def range_not_matching_shape(folder):
    entry = {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 16]}
    (folder / "model.safetensors").write_bytes(safetensors_bytes({"w": entry}, b"\0" * 16))
    return "needs 4,000,000 bytes"


def header_not_json(folder):
    (folder / "model.safetensors").write_bytes(safetensors_bytes(b"\xff\xfe not json"))
    return "not a JSON object"


def header_nested_deeply(folder):
    (folder / "model.safetensors").write_bytes(safetensors_bytes(b"[" * 100_000 + b"]" * 100_000))
    return "not a JSON object"


def shorter_than_its_length(folder):
    (folder / "model.safetensors").write_bytes(b"\x01\x02")
    return "shorter than its 8-byte header length"


def weights_are_a_fifo(folder):
    os.mkfifo(folder / "model.safetensors")  # reading it would block the load forever
    return "not a regular file"


FOLDERS = [pickle_bin, header_length_2_62, tensor_claiming_2_62_bytes, range_not_matching_shape, header_not_json,
           header_nested_deeply, shorter_than_its_length, weights_are_a_fifo]


def hostile_folder(tmp_path, make):
    folder = tmp_path / "model"
    write(folder / "config.json", json.dumps(CONFIG))
    return folder, make(folder)


@pytest.mark.parametrize("make", FOLDERS, ids=lambda f: f.__name__)
def test_a_hostile_model_folder_is_refused_naming_the_file(make, tmp_path, home, capsys):
    folder, words = hostile_folder(tmp_path, make)
    spec = write(tmp_path / "task.yaml", f"id: t\ninstruction: hi\nmodel: 'hf:{folder}'\n")
    code = cli.main(["run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert str(folder) in err and words in err, err
    assert not (tmp_path / "PWNED").exists()  # never unpickled


def test_compressing_a_pickled_model_is_refused_and_leaves_nothing(tmp_path, home, capsys):
    folder, _ = hostile_folder(tmp_path, pickle_bin)
    out = tmp_path / "out"
    code = cli.main(["compress", f"hf:{folder}", "--method", "rtn", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "pytorch_model.bin" in err and "pickle" in err, err
    assert not (tmp_path / "PWNED").exists()
    assert not out.exists() and not list(tmp_path.glob(".out.tmp-*"))


# ---- compression options and router files: refused before any model loads -------------------------------------

@pytest.fixture
def no_model_loads(monkeypatch):
    from toolpath.compress import source, tailor

    def refuse(*args, **kwargs):
        raise AssertionError("a refused option loaded the model")

    monkeypatch.setattr(source, "load_source", refuse)
    monkeypatch.setattr(tailor, "load_source", refuse)


@pytest.fixture
def source(tmp_path):
    folder = tmp_path / "source"
    write(folder / "config.json", json.dumps(CONFIG))
    return f"hf:{folder}"


def router_file(tmp_path, name, header=None, data=b"", length=None):
    path = tmp_path / name
    path.write_bytes(safetensors_bytes(header if header is not None else {}, data, length))
    return path


def gate(shape, dtype="F32"):
    size = 4 if dtype == "F32" else 2
    count = 1
    for d in shape:
        count *= d
    return {"model.layers.0.mlp.gate.weight": {"dtype": dtype, "shape": shape, "data_offsets": [0, count * size]}}, \
        b"\0" * (count * size)


ROUTER_FILES = {
    "etc_passwd": (lambda t: "/etc/passwd", "expected a .safetensors file"),
    "missing": (lambda t: t / "nowhere.safetensors", "no such file"),
    "fifo": (lambda t: (os.mkfifo(t / "r.safetensors"), t / "r.safetensors")[1], "not a regular file"),
    "header_2_62": (lambda t: router_file(t, "r.safetensors", length=2**62), "header claims"),
    "no_routers": (lambda t: router_file(t, "r.safetensors", {"other.weight": gate([2, 2])[0][
        "model.layers.0.mlp.gate.weight"]}, b"\0" * 16), "no `layers.N.…gate.weight` tensors"),
    "router_not_2d": (lambda t: router_file(t, "r.safetensors", *gate([2, 2, 2])), "not a 2-D float router weight"),
    "router_of_integers": (lambda t: router_file(t, "r.safetensors", *gate([2, 2], "I16")), "not a 2-D float"),
}


@pytest.mark.parametrize("case", sorted(ROUTER_FILES))
def test_a_hostile_router_init_is_refused_before_the_model_loads(case, tmp_path, home, source, capsys,
                                                                 no_model_loads):
    make, words = ROUTER_FILES[case]
    path = make(tmp_path)
    out = tmp_path / "out"
    code = cli.main(["compress", source, "--method", "moe-bits", "--option", f"router_init={path}", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "router_init" in err and str(path) in err and words in err, err
    assert not out.exists() and not list(tmp_path.glob(".out.tmp-*"))


# (method, options, words the error must hold: the method, the option and the limit)
_AT_MOST, _AT_LEAST = "Input should be less than or equal to", "Input should be greater than or equal to"
OPTIONS = [
    ("gptq", ["nsamples=1000000000"], f"gptq --option nsamples: {_AT_MOST} 4096 (got '1000000000')"),
    ("gptq", ["seqlen=100000000"], f"gptq --option seqlen: {_AT_MOST} 8192"),
    ("gptq", ["nsamples=4096", "seqlen=4096"], "gptq: nsamples x seqlen: at most 1,048,576 calibration tokens"),
    ("gptq", ["nsamples=0"], f"gptq --option nsamples: {_AT_LEAST} 1"),
    ("gptq", ["seed=-1"], f"gptq --option seed: {_AT_LEAST} 0"),
    ("gptq", ["seed=99999999999999999999"], f"gptq --option seed: {_AT_MOST} 4294967295"),
    ("gptq", ["group_size=" + "9" * 30], f"gptq --option group_size: {_AT_MOST} 65536"),
    ("gptq", ["nsamples=" + "9" * 5000], "gptq --option nsamples: Unable to parse input string as an integer, "
                                         "exceeded maximum size"),
    ("rtn", ["group_size=0"], f"rtn --option group_size: {_AT_LEAST} 1"),
    ("moe-bits", ["nsamples=1000000000"], f"moe-bits --option nsamples: {_AT_MOST} 4096"),
    ("moe-bits", ["zeta=inf"], "moe-bits --option zeta: Input should be a finite number"),
    ("moe-bits", ["zeta=nan"], "moe-bits --option zeta: Input should be a finite number"),
    ("moe-bits", ["zeta=1e308"], f"moe-bits --option zeta: {_AT_MOST} 1000"),
    ("moe-bits", ["attn_bits=9"], f"moe-bits --option attn_bits: {_AT_MOST} 8"),
    ("moe-bits", ["order_seed=1" + "0" * 20], f"moe-bits --option order_seed: {_AT_MOST}"),
    ("tailor", ["trials=1000000000"], f"tailor --option trials: {_AT_MOST} 2000"),
    ("tailor", ["finetune_steps=1000000000"], f"tailor --option finetune_steps: {_AT_MOST} 10000"),
    ("tailor", ["calib_blocks=1000000000"], f"tailor --option calib_blocks: {_AT_MOST} 512"),
    ("tailor", ["remove=1000000000"], f"tailor --option remove: {_AT_MOST} 10000"),
    ("tailor", ["seed=1" + "0" * 20], f"tailor --option seed: {_AT_MOST}"),
    ("tailor", ["candidates=" + ",".join(["/tmp"] * 9)], "tailor --option candidates: at most 8 folders"),
]


@pytest.mark.parametrize("method,options,words", OPTIONS, ids=[f"{m}-{o[0][:24]}" for m, o, _ in OPTIONS])
def test_an_option_beyond_what_the_machine_can_do_is_refused_naming_the_limit(method, options, words, tmp_path, home,
                                                                             source, capsys, no_model_loads):
    out = tmp_path / "out"
    args = ["compress", source, "--method", method, "--out", str(out)]
    for option in options:
        args += ["--option", option]
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and words in err, err
    assert not out.exists() and not list(tmp_path.glob(".out.tmp-*"))


def test_calibration_that_would_not_fit_in_memory_is_refused_once_the_width_is_known():
    from toolpath.compress.options import calibration_fits

    calibration_fits("gptq", 4096, 256, 896, memory=64 * 2**30)  # Qwen2.5-0.5B's width on a 64 GiB machine
    with pytest.raises(ValueError, match=r"gptq nsamples x seqlen: 4096 x 256 tokens .* more than half"):
        calibration_fits("gptq", 4096, 256, 8192, memory=16 * 2**30)


# ---- an interrupted compress ------------------------------------------------------------------------------------

def test_the_next_compress_removes_what_an_interrupted_one_left_and_keeps_a_running_ones(tiny_source, tmp_path, home,
                                                                                         capsys):
    out = tmp_path / "out"
    killed = write(tmp_path / ".out.tmp-dead0001" / "model.safetensors", "half-written").parent
    running = write(tmp_path / ".out.tmp-live0002" / "model.safetensors", "being written").parent
    other = write(tmp_path / ".elsewhere.tmp-dead0003" / "x", "another output's").parent
    held = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as the compress writing it holds it
    try:
        code = cli.main(["compress", f"hf:{tiny_source}", "--method", "rtn", "--bits", "4", "--out", str(out)])
    finally:
        os.close(held)
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"removed {killed}" in err
    assert not killed.exists() and running.exists() and other.exists()
    assert (out / "compression.json").is_file()


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory):
    from tiny_lm import save_tiny_chat_lm

    folder = tmp_path_factory.mktemp("tiny")
    save_tiny_chat_lm(folder, "the answer is yes")
    return folder


def test_a_packed_folder_whose_config_claims_a_huge_model_is_refused_before_it_is_built(tiny_source, tmp_path, home,
                                                                                       capsys):
    out = tmp_path / "packed"
    assert cli.main(["compress", f"hf:{tiny_source}", "--method", "rtn", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    config.update(hidden_size=2**16, intermediate_size=2**18, num_hidden_layers=4096)  # terabytes in float32
    (out / "config.json").write_text(json.dumps(config))
    spec = write(tmp_path / "task.yaml", f"id: t\ninstruction: hi\nmodel: 'hf:{out}'\n")
    capsys.readouterr()
    code = cli.main(["run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert f"{out}/config.json describes a model of" in err and "model.safetensors" in err, err


# A packed folder's tensor table, edited by hand: each is one clear error naming the folder's file, never a crash.
Q = "model.layers.0.self_attn.q_proj.weight"
PACKED_TABLES = {
    "tensors_a_number": (lambda c: c.update(tensors=5), "toolpath_compression.tensors must be a mapping"),
    "tensors_a_list": (lambda c: c.update(tensors=[Q]), "toolpath_compression.tensors must be a mapping"),
    "layout_a_string": (lambda c: c["tensors"].update({Q: "4 bits"}), f"packed weight '{Q}' does not fit"),
    "bits_99": (lambda c: c["tensors"][Q].update(bits=99), "are not a matrix's layout"),
    "bits_true": (lambda c: c["tensors"][Q].update(bits=True), "are not a matrix's layout"),
    "group_zero": (lambda c: c["tensors"][Q].update(group_size=0), "are not a matrix's layout"),
    "shape_negative": (lambda c: c["tensors"][Q].update(shape=[-1, 64]), "are not a matrix's layout"),
    "shape_beyond_codes": (lambda c: c["tensors"][Q].update(shape=[2**20, 2**20]), "too short"),
    "shape_not_the_model's": (lambda c: c["tensors"][Q].update(c["tensors"][Q.replace("q_proj", "k_proj")]),
                              "does not fit model.safetensors"),  # k_proj's layout over q_proj's codes
    "experts_of_a_number": (lambda c: c["tensors"][Q].update(shape=[10**12, 4, 4], experts=5), "does not fit"),
    "codes_missing": (lambda c: c["tensors"].update({"model.norm.weight": c["tensors"][Q]}),
                      "lacks model.norm.weight.codes"),
    "another_version": (lambda c: c.update(version=2), "toolpath_compression version 2 is not 1"),
}


@pytest.fixture(scope="module")
def packed_source(tiny_source, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed") / "rtn4"
    assert cli.main(["compress", f"hf:{tiny_source}", "--method", "rtn", "--option", "group_size=16",
                     "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("case", sorted(PACKED_TABLES))
def test_a_hand_edited_packed_table_is_refused_naming_the_folder(case, packed_source, tmp_path, home):
    import shutil

    from toolpath.policies.base import PolicyError
    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    edit, words = PACKED_TABLES[case]
    folder = tmp_path / "edited"
    shutil.copytree(packed_source, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config["toolpath_compression"])
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PolicyError) as err:
        HFPolicy.from_spec(ModelSpec(name=f"hf:{folder}", options={"engine": "torch"}))
    assert str(folder) in str(err.value) and words in str(err.value), str(err.value)
