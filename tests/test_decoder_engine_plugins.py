"""A decoding method and an engine written outside the package, registered with TOOLPATH_PLUGINS, work exactly as
the built-in ones: their options checked by the spec (a bad one is the spec's error naming the field), the
decoder built for a call, the engine running a whole `toolpath run`, both listed by `toolpath models list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import ROOT  # noqa: E402
from tiny_lm import save_tiny_chat_lm  # noqa: E402

from toolpath import registry  # noqa: E402
from toolpath.cli import main  # noqa: E402
from toolpath.spec import SpecError, parse_spec  # noqa: E402

PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field

from toolpath.policies.base import Response


class NudgeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    weight: float = Field(0.5, gt=0, le=1, description="how hard it nudges")


class Nudge:
    """A decoding method that changes nothing and says what it was given."""

    name = "nudge"
    Options = NudgeOptions

    def build(self, model, processor, inputs, options, home):
        from toolpath.policies.decoding.session import Decoding

        return Decoding(self.name, options, details={"nudged_by": options.weight})


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reply: str = Field("plugged in", min_length=1, description="what every answer says")


class EchoPolicy:
    def __init__(self, reply, name):
        self.reply, self.name = reply, name

    def respond(self, messages, tools, **generation):
        return Response(text=self.reply, answer=self.reply, raw=self.reply)


class Echo:
    """An engine whose model answers one fixed line."""

    name = "echo"
    Options = EchoOptions

    def load(self, folder, spec, name, options):
        return EchoPolicy(options.reply, name)


DECODER, ENGINE = Nudge(), Echo()
'''


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-plugin-engine")
    save_tiny_chat_lm(folder, "the plugged in answer")
    return folder


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    (tmp_path / "outside_kinds.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOOLPATH_PLUGINS", "decoder:nudge=outside_kinds:DECODER,engine:echo=outside_kinds:ENGINE")
    registry.reset()
    yield
    monkeypatch.delenv("TOOLPATH_PLUGINS")
    registry.reset()


def _spec(tmp_path, options: dict, model: str = "local") -> dict:
    return {"id": "plugged", "instruction": "Say something.", "agent": {"name": "react"}, "tools": [],
            "model": {"name": model, "options": options}, "limits": {"max_steps": 2}}


def test_a_plugin_decoder_is_checked_and_built(plugins, tmp_path):
    from toolpath.policies import decoding
    from toolpath.policies.settings import setting, settled

    spec = settled(parse_spec(_spec(tmp_path, {"decoding": {"kind": "nudge", "weight": 0.25}})))
    assert spec.model.options["decoding"] == {"kind": "nudge", "weight": 0.25}
    with pytest.raises((SpecError, ValueError), match=r"decoding\.weight: Input should be less than or equal to 1"):
        settled(parse_spec(_spec(tmp_path, {"decoding": {"kind": "nudge", "weight": 2}})))
    chosen = setting("decoding", {"kind": "nudge"})
    built = decoding.prepare(None, None, {"pixel_values": object()}, chosen, tmp_path)
    assert built.stats()["settings"] == {"weight": 0.5} and built.stats()["nudged_by"] == 0.5
    assert decoding.prepare(None, None, {}, chosen, tmp_path).stats()["skipped"] == "no image"


def test_a_plugin_engine_runs_a_task(plugins, tiny, tmp_path, capsys):
    spec_file = tmp_path / "task.json"
    spec_file.write_text(json.dumps(_spec(tmp_path, {"engine": {"kind": "echo", "reply": "from outside"}},
                                          f"hf:{tiny}")))
    assert main(["--home", str(tmp_path / "home"), "run", str(spec_file), "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["answer"] == "from outside"
    spec_file.write_text(json.dumps(_spec(tmp_path, {"engine": {"kind": "echo", "reply": ""}}, f"hf:{tiny}")))
    assert main(["--home", str(tmp_path / "home"), "run", str(spec_file)]) != 0
    assert "engine.reply: String should have at least 1 character" in capsys.readouterr().err


def test_models_list_names_the_plugins(plugins, capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "nudge" in out and "weight" in out
    assert any(line.startswith("echo") and " yes " in line for line in out.splitlines())


def test_validating_and_describing_decoders_and_engines_imports_no_torch():
    code = ("import sys\nfrom toolpath.policies.settings import described, setting\n"
            "for option, value in (('decoding', 'vcd'), ('decoding', {'kind': 'shield', 'parts': 'inherent'}),\n"
            "                      ('engine', 'torch'), ('engine', {'kind': 'onnxruntime', 'threads': 2})):\n"
            "    setting(option, value)\n"
            "described('decoder'), described('engine')\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
