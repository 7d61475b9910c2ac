"""Model libraries' loading bars and advice are silenced by one helper (toolpath/quiet.py), which every loader
calls."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from toolpath.quiet import quiet_model_loading

PACKAGE = Path(__file__).resolve().parents[1] / "toolpath"


@pytest.fixture
def hf_logging():
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_warning()
    logging.enable_progress_bar()
    yield logging
    logging.set_verbosity(verbosity)
    (logging.enable_progress_bar if bars else logging.disable_progress_bar)()


def test_transformers_says_only_errors_and_draws_no_bars(hf_logging):
    quiet_model_loading()
    assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert not hf_logging.is_progress_bar_enabled()


def test_diffusers_is_quieted_only_when_asked(hf_logging, monkeypatch):
    calls = []
    fake = types.ModuleType("diffusers.utils.logging")
    fake.set_verbosity_error = lambda: calls.append("errors only")
    fake.disable_progress_bar = lambda: calls.append("no bars")
    utils = types.ModuleType("diffusers.utils")
    utils.logging = fake
    package = types.ModuleType("diffusers")
    package.utils = utils
    package.__spec__ = types.SimpleNamespace(name="diffusers")
    for name, module in {"diffusers": package, "diffusers.utils": utils, "diffusers.utils.logging": fake}.items():
        monkeypatch.setitem(sys.modules, name, module)
    quiet_model_loading()
    assert calls == []  # importing diffusers is slow; a transformers-only loader never pays for it
    quiet_model_loading(diffusers=True)
    assert calls == ["errors only", "no bars"]


def test_no_other_module_quiets_the_libraries_itself():
    pattern = re.compile(r"\b(disable_progress_bar|set_verbosity_error)\(")
    others = sorted(str(f.relative_to(PACKAGE)) for f in PACKAGE.rglob("*.py")
                    if f.name != "quiet.py" and pattern.search(f.read_text()))
    assert not others, f"quiet model libraries with toolpath.quiet.quiet_model_loading(), not in {others}"
