"""A kv-cache kind written outside the package (docs/examples/plugin_kv_cache.py) works as the built-in ones do:
registered with TOOLPATH_PLUGINS it passes spec validation, runs an episode on the tiny model, is listed by
`toolpath models list` with its options, and a bad option for it is the spec's error, before the model loads.
Also: validating settings and listing kinds import no torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PLUGIN = "kv_cache:plain=plugin_kv_cache:KIND"


@pytest.fixture
def plugin(monkeypatch):
    """The example's kind registered as TOOLPATH_PLUGINS registers it, for this test only."""
    from toolpath import registry

    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("TOOLPATH_PLUGINS", PLUGIN)
    registry.reset()
    yield
    monkeypatch.delenv("TOOLPATH_PLUGINS")
    registry.reset()


def task(kv_cache, name="local"):
    from toolpath.spec import TaskSpec

    return TaskSpec.model_validate({"id": "t", "instruction": "say hi", "model": {
        "name": name, "max_new_tokens": 8, "options": {"kv_cache": kv_cache}},
        "tools": ["final_answer"], "limits": {"max_steps": 1}})


def test_a_plugin_kind_validates_and_a_bad_option_is_the_specs_error(plugin):
    from toolpath.policies.settings import settled

    assert settled(task("plain")).model.options["kv_cache"] == {"kind": "plain"}
    with pytest.raises(ValueError, match=r"^model\.options\.kv_cache\.bits: plain has no option 'bits'; its "
                                         r"options: none$"):
        settled(task({"kind": "plain", "bits": 4}))
    with pytest.raises(ValueError, match=r"^model\.options\.kv_cache: plain takes no value after 'plain:'"):
        settled(task("plain:4"))


def test_a_kind_that_is_not_one_is_named(monkeypatch):
    from toolpath import registry
    from toolpath.policies.settings import settled

    monkeypatch.setenv("TOOLPATH_PLUGINS", "kv_cache:broken=json:dumps")  # a function, not a kind
    registry.reset()
    try:
        with pytest.raises(ValueError, match=r"kv_cache.kind: 'broken' is registered as a kv cache but has no name"):
            settled(task("broken"))
    finally:
        monkeypatch.delenv("TOOLPATH_PLUGINS")
        registry.reset()


def test_models_list_shows_every_kind_with_its_options(plugin, capsys):
    from toolpath import cli

    assert cli.main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["kivi[:BITS]", "bits"] for line in lines)
    assert any(line.split()[:2] == ["quest[:BUDGET]", "budget"] for line in lines)
    assert any(line.split()[:3] == ["plain", "no", "options"] for line in lines)


def test_validating_and_describing_every_kind_imports_no_torch():
    code = ("import sys\nfrom toolpath.policies.settings import described, setting\n"
            "for value in ('kivi:4', 'chanmix:2', 'quest:64', 'icecache:64'):\n    setting('kv_cache', value)\n"
            "described('kv_cache')\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


def test_the_docs_example_runs():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import plugin_kv_cache

        plugin_kv_cache.main()
    finally:
        sys.path.remove(str(EXAMPLES))
        from toolpath import registry

        registry.reset()


@pytest.mark.parametrize("command", ["run", "eval", "serve"])
def test_a_bad_kv_cache_flag_is_refused_naming_the_field_before_anything_loads(command, tmp_path, home, capsys):
    from toolpath import cli

    spec = tmp_path / "task.yaml"
    spec.write_text("id: t\ninstruction: say hi\nmodel: local\n")
    head = {"run": ["run", str(spec)], "eval": ["eval", "arith", "--limit", "1"], "serve": ["serve", "local"]}[command]
    assert cli.main([*head, "--kv-cache", "kivi:3"]) == 2
    err = capsys.readouterr().err
    assert "kv_cache.bits: Input should be 2, 4 or 16 (got 3)" in err and "Traceback" not in err, err
    if command == "run":  # the spec's own error: its file and the field
        assert f"{spec}: model.options.kv_cache.bits" in err
