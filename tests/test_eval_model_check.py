"""An eval whose local model cannot load stops before its first sample, saying why once."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import toolpath_cli

from toolpath.evals.runner import run_eval
from toolpath.policies import local_models
from toolpath.runs import Store


def test_an_unbuilt_model_stops_the_eval_before_any_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    with Store(tmp_path) as store:
        with pytest.raises(ValueError, match=r"^local:tiny-vlm .*not built .*`toolpath models build tiny-vlm`"):
            run_eval("arith", store, model="local:tiny-vlm", limit=2)
        assert store.list_evals() == []  # nothing half-made to resume or to list


def test_missing_part_packages_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))  # no joined file there, so the packages are looked for
    name = local_models.names()[0]
    lacking = dataclasses.replace(local_models.CATALOG[name], packages=("toolpath-no-such-package",))
    monkeypatch.setitem(local_models.CATALOG, name, lacking)
    assert "toolpath-no-such-package" in local_models.unavailable(name)


def test_models_that_can_load_or_are_not_local_catalog_names_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    assert local_models.unavailable("no-such-model") is None  # loading names the known models


def test_the_cli_says_it_once_with_the_build_command(tmp_path):
    out = toolpath_cli("eval", "arith", "--model", "local:tiny-molm", "--limit", "3", home=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "toolpath models build tiny-molm" in out.stderr
    assert out.stderr.count("not built") == 1
