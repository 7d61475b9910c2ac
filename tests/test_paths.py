"""$TOOLPATH_HOME is resolved in one place (toolpath/paths.py), and everything that keeps files under it follows it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from toolpath import paths

PACKAGE = Path(__file__).resolve().parents[1] / "toolpath"
READERS = {"paths.py"}


def test_home_is_the_variable_else_dot_toolpath(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    assert paths.home() == tmp_path and paths.models_dir() == tmp_path / "models"
    monkeypatch.delenv("TOOLPATH_HOME")
    assert paths.home() == Path.home() / ".toolpath"
    monkeypatch.setenv("TOOLPATH_HOME", "")  # set but empty: the default, as an unset one
    assert paths.home() == Path.home() / ".toolpath"


def test_a_leading_tilde_is_expanded(monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", "~/th")
    assert paths.home() == Path.home() / "th"


def test_home_is_not_created_by_asking(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "absent"))
    paths.home(), paths.models_dir()
    assert not (tmp_path / "absent").exists()


def test_no_other_module_reads_the_variable():
    readers = {str(f.relative_to(PACKAGE)) for f in PACKAGE.rglob("*.py")
               if re.search(r"""environ(\.get\(|\[)\s*["']TOOLPATH_HOME""", f.read_text())}
    assert readers <= READERS, f"resolve $TOOLPATH_HOME with toolpath.paths.home(), not in {sorted(readers - READERS)}"


def test_the_cli_without_home_opens_the_home_paths_resolves(monkeypatch, tmp_path):
    """--home unset is no path of its own: the store opens paths.home(), a leading ~ expanded as everywhere."""
    from toolpath.cli import build_parser
    from toolpath.cli.common import store_from_args

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TOOLPATH_HOME", "~/th")
    args = build_parser().parse_args(["runs", "list"])
    assert args.home is None
    store = store_from_args(args, readonly=True)
    try:
        assert store.home == paths.home() == tmp_path / "th"
    finally:
        store.close()
    given = build_parser().parse_args(["--home", str(tmp_path / "other"), "runs", "list"])
    assert given.home == str(tmp_path / "other")


KEPT = {  # what is kept under the home, found through its module: (module, how to get the folder, expected relative)
    "hf-conversions": ("toolpath.policies.hf", lambda m: m.converted_dir(Path("m.gguf"), digest="ab" * 8).parent,
                       "models"),
    "built-models": ("toolpath.policies.local_models", lambda m: m.BUILT["tiny-vlm"].folder().parent, "models"),
    "edit-priors": ("toolpath.tools.image.priors", lambda m: m.user_table().parents[1], "."),
    "subroutine-library": ("toolpath.planners.subroutines", lambda m: m.default_library_path().parents[1], "."),
    "retrieval-index": ("toolpath.tools.retrieval.index", lambda m: m.index_home().parent, "."),
    "run-store": ("toolpath.runs", lambda m: m.default_home(), "."),
}


@pytest.mark.parametrize("what", sorted(KEPT))
def test_what_is_kept_follows_the_variable(monkeypatch, tmp_path, what):
    module, folder, expected = KEPT[what]
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    assert folder(importlib.import_module(module)) == tmp_path / expected
