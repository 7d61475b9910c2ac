"""Hostile and careless decoding and engine settings, beside test_hostile_kind_options.py's kv-cache ones. Each
must make the CLI exit 2 naming the file and the field, with no traceback, before anything starts (no run stored,
no sandbox opened, no model loaded), as the other hostile specs (test_hostile_specs.py, whose checks these reuse)."""

import os

import pytest

from security.test_hostile_specs import assert_refused, nothing_starts, spec  # noqa: F401  (the fixture)
from toolpath import cli, registry

SCRIPTED = "id: hostile\ninstruction: What is 2 + 3?\nmodel:\n  name: scripted:r.yaml\n  options: "


def decoding_alpha_nan(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: vcd, alpha: .nan}}\n"), "model.options.decoding.alpha"


def decoding_steps_huge_float(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: shield, steps: 1.0e+12}}\n"), "model.options.decoding.steps"


def decoding_number_as_text(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: vcd, beta: '0.5'}}\n"), "model.options.decoding.beta"


def decoding_kind_a_path(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: ../../etc/passwd}}\n"), "decoding.kind: unknown kind"


def decoding_kind_a_list(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: [vcd, shield]}}\n"), "decoding.kind: expected a kind's name"


def decoding_clip_path_too_long(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: shield, clip: " + "c" * 4100 + "}}\n"), \
        "model.options.decoding.clip"


def decoding_parts_and_booleans(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: shield, parts: [inherent], inherent: false}}\n"), \
        "model.options.decoding.inherent"


def decoding_no_part_on(tmp_path):
    return spec(tmp_path, SCRIPTED + "{decoding: {kind: shield, parts: []}}\n"), "model.options.decoding.parts"


def engine_threads_huge(tmp_path):
    return spec(tmp_path, SCRIPTED + "{engine: {kind: onnxruntime, threads: 100000}}\n"), \
        "model.options.engine.threads"


def engine_option_misspelt(tmp_path):
    return spec(tmp_path, SCRIPTED + "{engine: {kind: onnxruntime, thread: 2}}\n"), \
        "model.options.engine.thread: onnxruntime has no option"


def engine_with_decoding(tmp_path):
    return spec(tmp_path, SCRIPTED + "{engine: onnxruntime, decoding: vcd}\n"), \
        "options.decoding needs options.engine torch"


CASES = {f.__name__: f for f in (
    decoding_alpha_nan, decoding_steps_huge_float, decoding_number_as_text, decoding_kind_a_path,
    decoding_kind_a_list, decoding_clip_path_too_long, decoding_parts_and_booleans, decoding_no_part_on,
    engine_threads_huge, engine_option_misspelt, engine_with_decoding)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_kind_option_exits_2_naming_file_and_field(case, tmp_path, home, capsys, nothing_starts):  # noqa: F811
    spec_path, field = CASES[case](tmp_path)
    code = cli.main(["run", str(spec_path)])
    out, err = capsys.readouterr()
    assert_refused(code, err, home, spec_path, field)
    assert out == "" and nothing_starts["sandboxes"] == [] and nothing_starts["models"] == []


@pytest.mark.parametrize("family, option", [("decoder", "decoding"), ("engine", "engine")])
def test_a_plugin_entry_naming_any_callable_is_not_called(family, option, tmp_path, home, capsys, monkeypatch,
                                                          nothing_starts):  # noqa: F811
    """A plugin line may name any object; one that is not a kind of its family (here os.system) is refused
    by name, and nothing of it is called while the spec is checked."""
    called = []
    monkeypatch.setattr(os, "system", lambda *a, **k: called.append(a) or 0)
    monkeypatch.setenv("TOOLPATH_PLUGINS", f"{family}:evil=os:system")
    registry.reset()
    try:
        spec_path = spec(tmp_path, SCRIPTED + "{" + option + ": {kind: evil, command: 'touch pwned'}}\n")
        code = cli.main(["run", str(spec_path)])
        _, err = capsys.readouterr()
    finally:
        monkeypatch.delenv("TOOLPATH_PLUGINS")
        registry.reset()
    assert_refused(code, err, home, spec_path, f"model.options.{option}.kind: 'evil' is registered as")
    assert called == [] and not (tmp_path / "pwned").exists()
