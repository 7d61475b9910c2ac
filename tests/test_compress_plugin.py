"""A compressor written outside the package, registered with TOOLPATH_PLUGINS, run by `toolpath compress` exactly
as a built-in method: its typed options checked first, its folder written, recorded and loadable."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_lm import save_tiny_byte_llama  # noqa: E402

from toolpath import registry  # noqa: E402
from toolpath.cli import main  # noqa: E402

PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bits: int = Field(3, ge=2, le=4)
    skip_mlp: bool = False


class Coarse:
    """Round-to-nearest at 2-4 bits, optionally leaving the MLPs in float."""

    name = "coarse"
    packs = True
    Options = Options

    def compress(self, source, out, *, options, log):
        from toolpath.compress.gptq import quantize_model_rtn
        from toolpath.compress.source import load_source
        from toolpath.policies.packed_weights import save_packed

        model, tokenizer = load_source(source)
        plan = lambda name, expert: None if options.skip_mlp and ".mlp." in name else options.bits
        quantized = quantize_model_rtn(model, plan, 32)
        log(f"coarse: {len(quantized)} weights")
        save_packed(model, tokenizer, quantized, out, {"method": self.name, "bits": options.bits})
        return {"quantized_tensors": len(quantized)}


KIND = Coarse()
NOT_A_KIND = object()
'''


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_byte_llama(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "coarse_plugin.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOOLPATH_PLUGINS", "compressor:coarse=coarse_plugin:KIND,"
                                           "compressor:hollow=coarse_plugin:NOT_A_KIND")
    registry.reset()
    yield
    monkeypatch.delenv("TOOLPATH_PLUGINS")
    registry.reset()


def test_a_plugin_compressor_runs_end_to_end(plugin, tiny_model, tmp_path, capsys):
    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    out = tmp_path / "out"
    rc = main(["compress", f"hf:{tiny_model}", "--method", "coarse", "--bits", "2", "--option", "skip_mlp=true",
               "--out", str(out), "--json"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads((out / "compression.json").read_text())
    assert record["method"] == "coarse" and record["bits"] == 2
    assert record["options"] == {"bits": 2, "skip_mlp": True} and record["quantized_tensors"] == 8  # attention only
    policy = HFPolicy.from_spec(ModelSpec(name=f"hf:{out}", max_new_tokens=3))
    q = policy.model.model.layers[0].self_attn.q_proj.weight
    assert len(torch.unique(q[0, :32])) <= 4  # one group of one row at 2 bits
    assert policy.model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False).shape == (1, 6)


@pytest.mark.parametrize("argv,message", [
    (["--method", "coarse", "--bits", "8"], "coarse --bits: Input should be less than or equal to 4 (got '8')"),
    (["--method", "coarse", "--option", "skip_mlp=maybe"], "coarse --option skip_mlp: Input should be a valid "
                                                            "boolean"),
    (["--method", "coarse", "--option", "colour=red"], "coarse --option colour: coarse has no option 'colour'; "
                                                        "its options: bits, skip_mlp"),
    (["--method", "hollow"], "--method hollow: compress.kind: 'hollow' is registered as a compressor but has no "
                             "name, no Options (a pydantic model), no compress"),
])
def test_a_plugin_compressor_is_checked_before_any_work(plugin, tiny_model, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["compress", f"hf:{tiny_model}", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out.tmp-*"))
