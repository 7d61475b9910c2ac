"""A `toolpath compress` folder on the onnxruntime engine, its stored integer codes used as they are.

The folder (policies/packed_weights.py) keeps each quantized weight as codes, integer zero points and float16 scales in
groups of input columns, w = scale * (code - zero): exactly what ONNX Runtime's MatMulNBits kernel computes from
its B, zero_points and scales inputs. So the export is the model builder's float32 graph of the folder, with every
packed weight's MatMul replaced by a MatMulNBits whose initializers are the folder's own codes, zero points and
scales, repacked bit for bit and never rounded again. Everything the folder keeps in floats (embeddings, norms,
the output head) stays as it is.

MatMulNBits runs 4- and 8-bit codes in power-of-two groups of at least 16; any other layout is refused at load,
naming what the folder has and that engine torch runs it (de-quantized).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .. import packed_weights
from ..base import PolicyError

BITS = (4, 8)
# The float graph keeps q/k/v and gate/up as separate MatMuls, so each packed weight has a MatMul of its own.
SEPARATE = ["fuse_qkv=false", "fuse_mlp_gate_up=false"]


def layout(folder: Path) -> dict | None:
    """The folder's packed-weights entry (config.json toolpath_compression), or None for float weights."""
    return packed_weights.packing(folder)


def refusal(entry: dict) -> str:
    """Why the engine cannot run these packed weights as they are, or ""."""
    tensors = entry.get("tensors")
    if not isinstance(tensors, dict) or not tensors:
        return "its toolpath_compression lists no packed tensors"
    for name, spec in tensors.items():
        if not isinstance(spec, dict) or "experts" in spec:
            return f"its weight {str(name)[:120]} is packed per expert (the engine runs dense models)"
        bits, group = spec.get("bits"), spec.get("group_size")
        if bits not in BITS:
            return (f"its weights are packed at {bits} bits ({str(name)[:120]}); the engine's MatMulNBits runs "
                    f"{' or '.join(map(str, BITS))} bits")
        if not isinstance(group, int) or group < 16 or group & (group - 1):
            return (f"its weights are packed in groups of {group} ({str(name)[:120]}); the engine's MatMulNBits "
                    "needs a power of two from 16")
    return ""


def bits_of(entry: dict) -> str:
    """The folder's weights setting as the engine names it: int4, int8, or int4+int8 for a mix."""
    return "+".join(f"int{b}" for b in sorted({spec["bits"] for spec in entry["tensors"].values()}))


def export_packed(folder: Path, out: Path, build, accuracy_level: int) -> int:
    """Write the engine's export of the packed `folder` into `out`: `build(source, precision, out, extra)` makes the
    builder's float32 graph of the folder's model, then each packed weight's MatMul becomes a MatMulNBits over
    its codes. Returns how many weights were placed."""
    import onnx

    work = out / ".packed"
    source = work / "float-source"
    _float_source(folder, source)
    graph_dir = work / "float"
    build(source, "fp32", graph_dir, SEPARATE)
    model = onnx.load(str(graph_dir / "model.onnx"))  # with its external data: the float weights are replaced below
    placed = _replace(model, folder, accuracy_level)
    for f in graph_dir.iterdir():
        if f.is_file() and not f.name.startswith("model.onnx"):
            shutil.copy2(f, out / f.name)
    onnx.save_model(model, str(out / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=1024)
    shutil.rmtree(work, ignore_errors=True)
    return placed


def _float_source(folder: Path, source: Path) -> None:
    """The folder as an ordinary float model folder (what the builder reads): its tokenizer and other files, and
    the packed weights' float values written as the torch backend loads them."""
    source.mkdir(parents=True)
    for f in folder.iterdir():
        if f.is_file() and not f.name.endswith(".safetensors"):
            shutil.copy2(f, source / f.name)
    model = packed_weights.load_packed(folder)
    model.save_pretrained(str(source))  # config.json without toolpath_compression, float32 weights


def _matrices(folder: Path):
    """(name, Quantized) for each packed weight, read from the folder's codes (not from the floats)."""
    from safetensors.torch import load_file

    entry = packed_weights.packing(folder)
    stored = load_file(str(folder / packed_weights.WEIGHTS))
    for name, spec in entry["tensors"].items():
        parts = {k: stored[f"{name}.{k}"] for k in ("codes", "zeros", "scales")}
        yield name, packed_weights.Quantized.unpack(parts, tuple(spec["shape"]), int(spec["bits"]),
                                                    int(spec["group_size"]))


def _digest(array) -> str:
    return hashlib.sha256(array.tobytes()).hexdigest() + str(array.shape)


def _replace(model, folder: Path, accuracy_level: int) -> int:
    """Each packed weight's MatMul in `model` replaced by a MatMulNBits over its codes. The MatMul is found by
    its weight's value: the float graph holds each packed weight as its de-quantized values, transposed, so an
    exact match is the weight itself, whatever the builder named it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    by_value = {}
    for init in graph.initializer:
        if len(init.dims) == 2 and init.data_type == TensorProto.FLOAT:
            by_value.setdefault(_digest(numpy_helper.to_array(init)), init.name)
    users: dict[str, list] = {}
    for node in graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2:
            users.setdefault(node.input[1], []).append(node)
    placed, dropped, added = 0, set(), []
    for name, q in _matrices(folder):
        weight = by_value.get(_digest(np.ascontiguousarray(q.dequantize().numpy().T)))
        nodes = users.get(weight or "", [])
        if not nodes:
            raise PolicyError(f"engine onnxruntime cannot place the packed weight {name} of {folder}: its graph "
                              "has no MatMul with that weight; use engine torch")
        b, scales, zeros = _matmulnbits_inputs(q)
        stem = weight.removesuffix(".weight")
        added += [numpy_helper.from_array(b, f"{stem}.codes"), numpy_helper.from_array(scales, f"{stem}.scales"),
                  numpy_helper.from_array(zeros, f"{stem}.zeros")]
        for node in nodes:
            rows, cols = q.shape
            fused = helper.make_node("MatMulNBits", [node.input[0], f"{stem}.codes", f"{stem}.scales", f"{stem}.zeros"],
                                     list(node.output), name=f"{node.name}_Q{q.bits}", domain="com.microsoft",
                                     K=cols, N=rows, bits=q.bits, block_size=q.group_size,
                                     accuracy_level=accuracy_level)
            node.CopyFrom(fused)
        dropped.add(weight)
        placed += 1
    kept = [init for init in graph.initializer if init.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    return placed


def _matmulnbits_inputs(q):
    """MatMulNBits' B [N, blocks, group*bits/8], scales [N, blocks] and zero_points [N, ceil(blocks*bits/8)] from a
    Quantized's codes [N, K], scales and zeros [N, blocks]: the same integers, packed low bits first (bitpack.py's
    layout is the kernel's)."""
    import numpy as np
    import torch

    from ..bitpack import pack

    rows, cols = q.shape
    g, blocks = q.group_size, q.scales.shape[1]
    codes = torch.zeros(rows, blocks * g, dtype=torch.uint8)
    codes[:, :cols] = q.codes  # the last group's padding columns meet no input and are never read
    b = pack(codes.reshape(rows, blocks, g), q.bits)
    zeros = pack(q.zeros.to(torch.uint8), q.bits)
    return (np.ascontiguousarray(b.numpy()), q.scales.numpy().astype(np.float32).reshape(rows, blocks),
            np.ascontiguousarray(zeros.numpy()))
