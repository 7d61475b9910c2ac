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
    page = write(tmp_path / "site" / "y.html", "<p>hi</p>")
    # a file: URL is accepted under the spec's folder only (file:///x/y.html, anywhere, was accepted before)
    for url in ("http://127.0.0.1:8000/a", "http://localhost:9/", "http://[::1]:8000/", page.as_uri(),
                "data:text/html,hi", "about:blank"):
        spec = parse_spec({**GOOD, "sandbox": {"kind": "browser", "options": {"start_url": url}}}, base_dir=tmp_path)
        assert spec.sandbox.options["start_url"] == url


def start_url_problem(tmp_path, url, **options):
    data = {**GOOD, "sandbox": {"kind": "browser", "options": {"start_url": url, **options}}}
    try:
        parse_spec(data, "task.yaml", base_dir=tmp_path)
    except SpecError as err:
        return dict(err.problems)["sandbox.options.start_url"]
    return None


def test_a_remote_start_url_needs_its_host_allowed_by_name(tmp_path):
    # parse_spec only reads the URL: nothing is resolved or fetched
    assert "add 'example.com' there" in start_url_problem(tmp_path, "https://example.com/")
    assert start_url_problem(tmp_path, "https://example.com/", allowed_hosts=["example.org"]) is not None
    assert start_url_problem(tmp_path, "https://example.com/", allowed_hosts=["example.com:8443"]) is not None
    assert start_url_problem(tmp_path, "http://10.0.0.1/", allowed_hosts=[]) is not None  # private, not loopback
    for allowed in (["example.com"], ["example.com:443"], "example.org, example.com", ["*"]):
        assert start_url_problem(tmp_path, "https://example.com/", allowed_hosts=allowed) is None, allowed
    assert start_url_problem(tmp_path, "https://a.example.com/", allowed_hosts=["*.example.com"]) is None
    assert "scheme 'javascript'" in start_url_problem(tmp_path, "javascript:alert(1)")


def test_a_page_on_disk_must_be_under_the_spec_folder(tmp_path):
    write(tmp_path / "outside.html", "<p>x</p>")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "link.html").symlink_to(tmp_path / "outside.html")
    base = tmp_path / "specs"
    for url in ("../outside.html", str(tmp_path / "outside.html"), (tmp_path / "outside.html").as_uri(),
                "link.html", "file:///etc/passwd", "file://otherhost/etc/passwd"):
        assert start_url_problem(base, url) is not None, url


def test_bounded_shapes_at_the_limits(tmp_path):
    from toolpath.spec import MAX_NESTING, MAX_STRING_CHARS

    def nested(levels):  # `levels` lists inside metadata, which is itself one level below the top
        return {**GOOD, "metadata": {"x": json.loads("[" * levels + "]" * levels)}}
    parse_spec(nested(MAX_NESTING - 2))
    found, _ = problems(nested(MAX_NESTING - 1))
    assert "nested deeper than" in found["metadata.x[0][0][0][0]…"]
    parse_spec({**GOOD, "metadata": {"s": "x" * MAX_STRING_CHARS}})
    assert "at most" in problems({**GOOD, "metadata": {"s": "x" * (MAX_STRING_CHARS + 1)}})[0]["metadata.s"]
    shared = ["a"] * 100  # a list used twice (as YAML aliases make) is fine while the total stays small
    parse_spec({**GOOD, "metadata": {"a": shared, "b": shared}})


def test_yaml_anchors_that_expand_modestly_still_load(tmp_path):
    f = write(tmp_path / "t.yaml", "id: t\ninstruction: hi\nmetadata:\n  base: &b {color: red, size: 3}\n"
                                   "  copies: [*b, *b]\n  when: 2024-02-03\n")
    spec = load_spec(f)
    assert spec.metadata["copies"] == [{"color": "red", "size": 3}] * 2
    assert '"when":"2024-02-03"' in spec.to_json()


def test_duplicate_keys_are_named_in_yaml_and_json(tmp_path):
    for name, text in (("t.yaml", "id: t\ninstruction: hi\nlimits: {max_steps: 3, max_steps: 4}\n"),
                       ("t.json", '{"id": "t", "instruction": "hi", "limits": {"max_steps": 3, "max_steps": 4}}')):
        with pytest.raises(SpecError) as ei:
            load_spec(write(tmp_path / name, text))
        assert dict(ei.value.problems) == {"limits.max_steps": "written more than once (only the last would count)"}


def png(path, size=(8, 6)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, "white").save(path)
    return path


def test_image_inputs_must_be_images_within_the_limits(tmp_path):
    png(tmp_path / "ok.png")
    assert parse_spec({**GOOD, "inputs": {"images": ["ok.png"]}}, base_dir=tmp_path).inputs.images[0].name == "ok.png"
    write(tmp_path / "fake.png", "\x89PNG but not really")
    found, _ = problems({**GOOD, "inputs": {"images": ["ok.png", "fake.png"]}}, tmp_path)
    assert list(found) == ["inputs.images[1]"] and "not an image" in found["inputs.images[1]"]
    with open(tmp_path / "big.txt", "wb") as f:
        f.truncate(101 * 2**20)  # sparse: refused from its size
    found, _ = problems({**GOOD, "inputs": {"files": ["big.txt"]}}, tmp_path)
    assert "at most 100.0 MiB" in found["inputs.files[0]"]
    (tmp_path / "folder.png").mkdir()
    found, _ = problems({**GOOD, "inputs": {"images": ["folder.png"]}}, tmp_path)
    assert "not a regular file" in found["inputs.images[0]"]


@pytest.mark.parametrize("model, field", [
    ({"name": "openai:m", "options": {"api_key": "sk-abc123456789"}}, "model.options.api_key"),
    ({"name": "openai:m", "options": {"apiKey": 123456789}}, "model.options.apiKey"),
    ({"name": "openai:m", "options": {"headers": {"access-token": "t0k3n-abcdefgh"}}},
     "model.options.headers.access-token"),
    ({"name": "openai:m", "base_url": "https://user:pw-abcdefgh@example.com/v1"}, "model.base_url"),
    ({"name": "openai:m", "base_url": "https://example.com/v1?api_key=abcdefgh123"}, "model.base_url"),
    ({"name": "openai:m", "api_key_env": "sk-abcdef123456"}, "model.api_key_env"),
    ({"name": "openai:m", "api_key_env": "my key"}, "model.api_key_env"),
])
def test_secrets_in_a_spec_are_refused_without_showing_them(model, field):
    found, text = problems({**GOOD, "model": model})
    assert list(found) == [field]
    assert "environment variable" in found[field]
    assert "model.api_key_env" in found[field] or field == "model.api_key_env"
    for secret in ("sk-abc123456789", "123456789", "t0k3n-abcdefgh", "pw-abcdefgh", "abcdefgh123", "sk-abcdef123456"):
        assert secret not in text


def test_names_of_variables_and_empty_secret_fields_are_fine(monkeypatch):
    # the user allows the name (tests/security/test_secrets.py)
    monkeypatch.setenv("TOOLPATH_API_KEYS", "MY_SERVER_KEY")
    parse_spec({**GOOD, "model": {"name": "openai:m", "api_key_env": "MY_SERVER_KEY",
                                  "base_url": "http://127.0.0.1:9/v1",
                                  "options": {"api_key": None, "token_budget": 5, "max_tokens": 9}},
                "metadata": {"hint": "ask the admin", "instruction_tokens": 12, "keyboard": "qwerty"}})


def test_a_known_secret_value_is_refused_anywhere(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-key-0123")
    found, text = problems({**GOOD, "instruction": "use sk-the-real-key-0123 to log in"})
    assert list(found) == ["instruction"] and "sk-the-real-key-0123" not in text
    parse_spec({**GOOD, "instruction": "bearer instruments and api_key= are words in prose"})


def test_python_policy_errors_are_policy_errors_naming_the_field(tmp_path):
    from toolpath.policies.base import PolicyError, load
    from toolpath.spec import ModelSpec

    for target, words in (("os:system", "TypeError"), ("os:sep", "not a class or factory"),
                          ("sys:exit", "SystemExit"), ("json:nope", "has no attribute")):
        with pytest.raises(PolicyError, match=words) as ei:
            load(ModelSpec(name=f"python:{target}"))
        assert str(ei.value).startswith(f"model.name 'python:{target}'")
