"""The default engine (policies/engines): with model.options.engine unset, a local text model runs on onnxruntime
when it is installed, nothing torch-only is asked and the engine can run the folder; torch otherwise, and the load
says which in one line. TOOLPATH_ENGINE sets the default for a process (tests/conftest.py pins torch, so the suite
exports no model). Where a test is about the choice, the engine's load is stubbed: tests/test_engine.py exports and
runs a real model."""

import sys
from pathlib import Path

import pytest

from toolpath.policies.base import PolicyError
from toolpath.spec import ModelSpec

sys.path.insert(0, str(Path(__file__).parent))

WORDS = "the lazy dog asks the calculator for an answer"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama whose attention heads have 8 dimensions: a folder onnxruntime's CPU kernel cannot run."""
    from tiny_lm import save_tiny_chat_lm

    folder = tmp_path_factory.mktemp("tiny-default")
    save_tiny_chat_lm(folder, WORDS)
    return folder


@pytest.fixture
def auto(monkeypatch, tmp_path):
    """The default unpinned, the engine installed, and a stub in place of its load: what it was asked to run."""
    from toolpath.policies.engines import ort_kind as ort

    monkeypatch.delenv("TOOLPATH_ENGINE", raising=False)
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ort.KIND, "missing", lambda: "")
    loads = []

    def load(folder, spec, name, options):
        loads.append(name)
        return "engine policy"

    monkeypatch.setattr(ort.KIND, "load", load)
    return loads


def _load(folder, **options):
    from toolpath.policies.hf import HFPolicy

    return HFPolicy.from_path(str(folder), ModelSpec(name=f"hf:{folder}", max_new_tokens=4, options=options))


def test_unset_engine_runs_on_the_engine_and_says_so(tiny, auto, capsys):
    assert _load(tiny) == "engine policy" and auto == [f"hf:{tiny}"]
    assert f"hf:{tiny} runs on engine onnxruntime (the default; --engine torch for transformers)" in \
        capsys.readouterr().err


@pytest.mark.parametrize("options, why", [({"kv_cache": "kivi:4"}, "model.options.kv_cache needs it"),
                                          ({"weights": "int4", "lm_head": "float"}, "model.options.lm_head needs it")])
def test_what_only_torch_does_keeps_the_default_on_torch(tiny, auto, capsys, options, why):
    policy = _load(tiny, **options)
    assert policy.engine == "torch" and auto == []
    assert f"hf:{tiny} runs on engine torch: {why} (engine onnxruntime otherwise)" in capsys.readouterr().err


def test_a_folder_the_engine_refuses_runs_on_torch_with_the_reason(tiny, monkeypatch, tmp_path, capsys):
    """The engine's real refusal (no stub): the tiny model's 8-dimension heads."""
    from toolpath.policies.engines import ort_kind as ort

    monkeypatch.delenv("TOOLPATH_ENGINE", raising=False)
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ort.KIND, "missing", lambda: "")
    assert _load(tiny).engine == "torch"
    err = capsys.readouterr().err
    assert f"runs on engine torch: onnxruntime cannot run hf:{tiny}: its attention heads have 8 dimensions" in err
    assert "use engine torch" not in err
    assert not (tmp_path / "home" / "models").exists()  # refused before any export


def test_a_failed_export_runs_on_torch(tiny, auto, monkeypatch, capsys):
    from toolpath.policies.engines import ort_kind as ort

    def fails(folder, spec, name, options):
        raise PolicyError(f"engine onnxruntime cannot export {folder}: NotImplementedError: no such architecture")

    monkeypatch.setattr(ort.KIND, "load", fails)
    assert _load(tiny).engine == "torch"
    assert "runs on engine torch: engine onnxruntime cannot export" in capsys.readouterr().err


def test_torch_when_the_engine_is_not_installed_or_the_default_is_pinned(tiny, auto, monkeypatch, capsys):
    from toolpath.policies.engines import ort_kind as ort

    monkeypatch.setattr(ort.KIND, "missing", lambda: "missing: onnxruntime_genai")
    assert _load(tiny).engine == "torch"
    monkeypatch.setattr(ort.KIND, "missing", lambda: "")
    monkeypatch.setenv("TOOLPATH_ENGINE", "torch")
    assert _load(tiny).engine == "torch"
    assert auto == [] and "runs on engine" not in capsys.readouterr().err


def test_a_named_engine_still_refuses_what_it_cannot_run(tiny, monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    with pytest.raises(PolicyError) as err:
        _load(tiny, engine="onnxruntime")
    assert "\n" not in str(err.value) and "8 dimensions" in str(err.value)


def test_a_bad_default_is_named(tiny, monkeypatch):
    from toolpath.policies.engines import default_choice

    monkeypatch.setenv("TOOLPATH_ENGINE", "tensorrt")
    with pytest.raises(PolicyError, match="TOOLPATH_ENGINE='tensorrt': expected auto or one of torch, onnxruntime"):
        _load(tiny)
    assert "TOOLPATH_ENGINE='tensorrt'" in default_choice()


def test_models_list_says_what_runs_when_none_is_named(monkeypatch):
    from toolpath.policies.engines import default_choice
    from toolpath.policies.engines import ort_kind as ort

    monkeypatch.setattr(ort.KIND, "missing", lambda: "")
    assert default_choice().startswith("torch (TOOLPATH_ENGINE=torch")
    monkeypatch.delenv("TOOLPATH_ENGINE")
    assert default_choice().startswith("onnxruntime for a text model it can run")
    assert "--engine torch" in default_choice()


@pytest.mark.parametrize("beside", [{"kv_cache": "kivi:4"}, {"decoding": "vcd"}])
def test_an_eval_naming_the_engine_and_a_torch_option_is_refused_before_any_sample(beside):
    from toolpath.evals.runner import model_option

    (option,) = beside
    with pytest.raises(ValueError, match=f"--engine: options.{option} needs options.engine torch; "
                                         "options.engine is onnxruntime"):
        model_option("engine", "onnxruntime", **beside)


def test_serves_model_card_names_the_engine_that_runs_it():
    pytest.importorskip("starlette")
    from toolpath.serve.app import ChatServer
    from toolpath.serve.engine import Engine

    class Chosen:  # what the default chose, as a loaded local policy says it
        engine = "onnxruntime"
        spec = ModelSpec(name="local", options={"weights": "int4"})

    server = ChatServer(Engine(Chosen(), "local"), port=0)
    try:
        card = server._card()
    finally:
        server.engine.close()
        server.socket.close()
    assert card["engine"] == "onnxruntime" and card["options"] == {"weights": "int4"}
