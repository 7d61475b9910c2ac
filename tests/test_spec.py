import json

import pytest

from conftest import toolpath_cli, write
from toolpath.spec import SpecError, load_spec, parse_spec

GOOD = {"id": "t1", "instruction": "What is 2+3?"}


def problems(data, tmp_path=None):
    with pytest.raises(SpecError) as ei:
        parse_spec(data, "task.yaml", base_dir=tmp_path)
    return dict(ei.value.problems), str(ei.value)


def test_minimal_spec_gets_defaults():
    spec = parse_spec(GOOD)
    assert spec.model.name == "local" and spec.agent.name == "react"
    assert spec.limits.max_steps > 0 and spec.tools is None


def test_shorthand_strings_for_model_agent_sandbox():
    spec = parse_spec({**GOOD, "model": "openai:gpt-4.1-mini", "agent": "react", "sandbox": "process"})
    assert spec.model.name == "openai:gpt-4.1-mini" and spec.sandbox.kind == "process"


@pytest.mark.parametrize("data, field, words", [
    ({"instruction": "x"}, "id", "required field is missing"),
    ({"id": "has space", "instruction": "x"}, "id", "letters, digits"),
    ({**GOOD, "instruction": ""}, "instruction", "at least 1 character"),
    ({**GOOD, "limits": {"max_steps": "ten"}}, "limits.max_steps", "valid integer"),
    ({**GOOD, "limits": {"max_steps": 0}}, "limits.max_steps", "greater than 0"),
    ({**GOOD, "limits": {"max_stesp": 3}}, "limits.max_stesp", "unknown field"),
    ({**GOOD, "model": "gpt4"}, "model.name", "unknown model kind"),
    ({**GOOD, "model": "openai:"}, "model.name", "needs a value"),
    ({**GOOD, "model": {"name": "local", "temperature": 9}}, "model.temperature", "less than or equal to 2"),
    ({**GOOD, "tools": "calculator"}, "tools", "valid list"),
    ({**GOOD, "inputs": {"urls": ["ftp://x"]}}, "inputs.urls", "not an http"),
    ({**GOOD, "seed": 1.5}, "seed", "integer"),
    ({**GOOD, "evaluator": {"expected": 5}}, "evaluator.name", "required"),
])
def test_each_bad_field_is_named(data, field, words):
    found, text = problems(data)
    assert field in found, found
    assert words in found[field]
    assert text.startswith("task.yaml: invalid task spec")


def test_missing_input_file_is_named_with_its_index(tmp_path):
    write(tmp_path / "a.txt", "hi")
    found, _ = problems({**GOOD, "inputs": {"files": ["a.txt", "nope.txt"]}}, tmp_path)
    assert list(found) == ["inputs.files[1]"] and "nope.txt" in found["inputs.files[1]"]


def test_relative_inputs_resolve_against_the_spec_file(tmp_path):
    write(tmp_path / "sub" / "data.txt", "hi")
    spec_file = write(tmp_path / "sub" / "t.yaml", "id: t\ninstruction: read\ninputs: {files: [data.txt]}\n")
    spec = load_spec(spec_file)
    assert spec.inputs.files[0] == (tmp_path / "sub" / "data.txt").resolve()


def test_yaml_syntax_error_names_line(tmp_path):
    f = write(tmp_path / "t.yaml", "id: t\ninstruction: [unclosed\n")
    with pytest.raises(SpecError) as ei:
        load_spec(f)
    assert "not valid YAML at line" in str(ei.value) and str(f) in str(ei.value)


def test_json_spec_and_json_error(tmp_path):
    ok = write(tmp_path / "t.json", json.dumps(GOOD))
    assert load_spec(ok).id == "t1"
    bad = write(tmp_path / "b.json", '{"id": "t1",}')
    with pytest.raises(SpecError, match="not valid JSON"):
        load_spec(bad)


def test_not_a_mapping_and_missing_file(tmp_path):
    f = write(tmp_path / "t.yaml", "- a\n- b\n")
    with pytest.raises(SpecError, match="expected a mapping"):
        load_spec(f)
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "missing.yaml")


def test_cli_bad_spec_exits_2_without_traceback_and_starts_nothing(tmp_path, home):
    f = write(tmp_path / "bad.yaml", "id: t\ninstruction: hi\nlimits: {max_steps: -1}\nmodle: local\n")
    r = toolpath_cli("run", f, home=home)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert str(f) in r.stderr and "limits.max_steps" in r.stderr and "modle: unknown field" in r.stderr
    assert r.stdout == ""
    assert not (home / "runs.db").exists() or "no runs" in toolpath_cli("runs", "list", home=home).stdout


def test_cli_override_errors_are_bad_input(tmp_path, home):
    f = write(tmp_path / "t.yaml", "id: t\ninstruction: hi\n")
    r = toolpath_cli("run", f, "--model", "nonsense", home=home)
    assert r.returncode == 2 and "model.name" in r.stderr
    r = toolpath_cli("run", f, "--max-steps", "0", home=home)
    assert r.returncode == 2 and "max-steps" in r.stderr


def test_scripted_and_hf_paths_resolve_against_the_spec_file(tmp_path, monkeypatch):
    write(tmp_path / "specs" / "r.yaml", "- hi\n")
    spec = load_spec(write(tmp_path / "specs" / "t.yaml", "id: t\ninstruction: x\nmodel: scripted:r.yaml\n"))
    assert spec.model.name == f"scripted:{(tmp_path / 'specs' / 'r.yaml').resolve()}"
    monkeypatch.chdir(tmp_path)
    spec = load_spec(write(tmp_path / "specs" / "u.yaml", "id: t\ninstruction: x\nmodel: scripted:specs/r.yaml\n"))
    assert spec.model.name.endswith("/specs/r.yaml") and spec.model.name.startswith(f"scripted:{tmp_path.resolve()}")
    spec = load_spec(write(tmp_path / "specs" / "v.yaml", "id: t\ninstruction: x\nmodel: scripted:gone.yaml\n"))
    assert spec.model.name == "scripted:gone.yaml"  # left for the loader to report


def test_sandbox_start_url_file_path_resolves_against_the_spec_file(tmp_path, monkeypatch):
    page = write(tmp_path / "site" / "index.html", "<title>x</title>")
    spec_file = write(tmp_path / "t.yaml", "id: t\ninstruction: go\nsandbox: {kind: browser, options: "
                                           "{start_url: site/index.html}}\n")
    monkeypatch.chdir(tmp_path / "site")  # the spec's own directory wins over the working directory
    assert load_spec(spec_file).sandbox.options["start_url"] == page.resolve().as_uri()


def test_sandbox_start_url_missing_file_is_named_and_urls_are_left_alone(tmp_path):
    bad = {**GOOD, "sandbox": {"kind": "browser", "options": {"start_url": "nope/index.html"}}}
    found, _ = problems(bad, tmp_path)
    assert list(found) == ["sandbox.options.start_url"] and "nope/index.html" in found["sandbox.options.start_url"]
    for url in ("http://127.0.0.1:8000/a", "file:///x/y.html", "data:text/html,hi", "about:blank"):
        spec = parse_spec({**GOOD, "sandbox": {"kind": "browser", "options": {"start_url": url}}}, base_dir=tmp_path)
        assert spec.sandbox.options["start_url"] == url
