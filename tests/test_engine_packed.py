"""A `toolpath compress` folder on the onnxruntime engine: its stored integer codes, zero points and scales become
the export's MatMulNBits weights bit for bit (never de-quantized and rounded again), the engine answers as the
torch backend does with the same folder de-quantized, and a layout MatMulNBits cannot run is refused at load in
one line naming the bits and engine torch."""

import sys
from pathlib import Path

import pytest

from toolpath.spec import ModelSpec
from toolpath.state import Message

pytest.importorskip("onnxruntime_genai")
sys.path.insert(0, str(Path(__file__).parent))

MESSAGES = [Message(role="system", content="You answer briefly."), Message(role="user", content="the model reads")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_lm import save_tiny_byte_llama

    # attention heads of 16 dimensions (the engine's CPU kernel needs a multiple of 16); weights wide enough that
    # greedy text varies token to token
    return save_tiny_byte_llama(tmp_path_factory.mktemp("tiny") / "model")


def compressed(tiny, out, bits, group=32):
    from toolpath.cli import main

    # group 32 over 64 and 96 input columns: an odd number of groups in some rows (zero points pack in pairs)
    assert main(["compress", f"hf:{tiny}", "--method", "rtn", "--bits", str(bits), "--option",
                 f"group_size={group}", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def packed4(tiny, tmp_path_factory):
    return compressed(tiny, tmp_path_factory.mktemp("packed") / "rtn4", 4)


@pytest.fixture(scope="module")
def engine_home(tmp_path_factory):
    return tmp_path_factory.mktemp("engine-home")


def _load(folder, monkeypatch, home, **options):
    from toolpath.policies.hf import HFPolicy

    monkeypatch.setenv("TOOLPATH_HOME", str(home))
    return HFPolicy.from_path(str(folder), ModelSpec(name=f"hf:{folder}", max_new_tokens=16, options=options))


def _stored(folder):
    from toolpath.policies.engines.packed_codes import _matrices

    return dict(_matrices(folder))


def _unpacked_nodes(export):
    """{MatMulNBits node: (codes [N, K], zeros [N, blocks], scales [N, blocks], bits, group)} read back from the
    export's initializers with MatMulNBits' own layout (low bits first)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(export / "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        b, scales, zeros = (inits[name] for name in node.input[1:4])
        bits, n, k = attrs["bits"], attrs["N"], attrs["K"]
        blocks = scales.shape[-1]
        if bits == 4:
            b = np.stack([b & 15, b >> 4], axis=-1)
            zeros = np.stack([zeros & 15, zeros >> 4], axis=-1).reshape(n, -1)
        out[node.name] = (b.reshape(n, -1)[:, :k], zeros[:, :blocks], scales.reshape(n, blocks), bits,
                          attrs["block_size"])
    return out


def test_codes_are_the_engine_weights_exactly(packed4, engine_home, monkeypatch):
    import numpy as np

    policy = _load(packed4, monkeypatch, engine_home, engine="onnxruntime")
    assert policy.weights == "int4"
    nodes = list(_unpacked_nodes(policy.export).values())
    stored = _stored(packed4)
    assert len(nodes) == len(stored) == 14  # every linear layer of both decoder layers, each its own MatMulNBits
    for q in stored.values():
        # each stored weight is one node's integers, as stored: codes, zero points, and scales (float16 -> float32)
        assert sum(codes.shape == tuple(q.shape) and np.array_equal(codes, q.codes.numpy())
                   and np.array_equal(zeros, q.zeros.numpy()) and np.array_equal(scales, q.scales.numpy())
                   and (bits, group) == (4, 32) for codes, zeros, scales, bits, group in nodes) == 1


def test_engine_answers_as_torch_does_on_the_same_folder(packed4, engine_home, monkeypatch):
    torch_policy = _load(packed4, monkeypatch, engine_home)
    engine_policy = _load(packed4, monkeypatch, engine_home, engine="onnxruntime")
    a, b = torch_policy.respond(MESSAGES, []), engine_policy.respond(MESSAGES, [])
    assert len(set(a.raw)) > 2, "the tiny model should write varied text for the comparison to mean something"
    assert (b.raw, b.tokens_in, b.tokens_out) == (a.raw, a.tokens_in, a.tokens_out)


def test_eight_bits_run_as_stored(tiny, tmp_path, monkeypatch):
    import numpy as np

    folder = compressed(tiny, tmp_path / "rtn8", 8)
    policy = _load(folder, monkeypatch, tmp_path / "home", engine="onnxruntime")
    assert policy.weights == "int8"
    nodes = _unpacked_nodes(policy.export)
    stored = _stored(folder)
    assert len(nodes) == len(stored)
    assert all(any(np.array_equal(codes, q.codes.numpy()) for codes, *_ in nodes.values()) for q in stored.values())
    assert policy.respond(MESSAGES, []).tokens_out > 0


def test_other_bit_widths_are_refused_at_load(tiny, tmp_path, monkeypatch, bits=3):
    from toolpath.policies.base import PolicyError

    folder = compressed(tiny, tmp_path / f"rtn{bits}", bits)
    with pytest.raises(PolicyError) as err:
        _load(folder, monkeypatch, tmp_path / "home", engine="onnxruntime")
    message = str(err.value)
    assert f"packed at {bits} bits" in message and "use engine torch" in message and "\n" not in message
    assert not (tmp_path / "home" / "models").exists()  # refused before any export


def test_a_weights_setting_cannot_round_the_codes_again(packed4, tmp_path, monkeypatch):
    from toolpath.policies.base import PolicyError

    with pytest.raises(PolicyError, match="weights: int8 does not apply .* packed as int4"):
        _load(packed4, monkeypatch, tmp_path, engine="onnxruntime", weights="int8")
