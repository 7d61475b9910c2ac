"""Hostile and careless task specs. Each must make the CLI exit 2 naming the file and the field, with no
traceback, before anything starts: no run stored, no sandbox opened, no model loaded (but where loading it
is what fails), and no packet sent anywhere."""

import json
import os
import socket
import struct
import zlib

import pytest
from conftest import toolpath_cli, write

from toolpath import cli
from toolpath.agents import episode
from toolpath.runs import Store

OK = "id: hostile\ninstruction: What is 2 + 3?\nmodel: scripted:r.yaml\n"
LONG_PATH = "d" * 200 + "/" + "x" * 4800  # 5,000 characters


def spec(tmp_path, text, name="task.yaml"):
    write(tmp_path / "r.yaml", "- the answer is 5\n")
    return write(tmp_path / name, text)


def nested_yaml(tmp_path):
    return spec(tmp_path, OK + "metadata: {deep: " + "[" * 20_000 + "]" * 20_000 + "}\n"), "metadata"


def nested_json(tmp_path):
    text = '{"id": "hostile", "instruction": "x", "metadata": {"deep": ' + "[" * 20_000 + "]" * 20_000 + "}}"
    return spec(tmp_path, text, "task.json"), "metadata"


def alias_bomb(tmp_path):
    lines = ['  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    text = OK + "metadata:\n" + "\n".join(lines) + "\n"
    assert len(text.encode()) < 1600  # 1.5 kB that expands to 9^9 strings
    return spec(tmp_path, text), "metadata"


def merge_key_bomb(tmp_path):
    lines = ["  a: &a {x: 1, y: 2}"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {name}: &{name} {{<<: [" + ", ".join([f"*{prev}"] * 9) + "]}")
    return spec(tmp_path, OK + "metadata:\n" + "\n".join(lines) + "\n"), "metadata.b"


def self_reference(tmp_path):
    return spec(tmp_path, OK + "metadata: {loop: &loop [1, *loop]}\n"), "metadata.loop"


def long_image_path(tmp_path):
    return spec(tmp_path, OK + f"inputs: {{images: [{LONG_PATH}]}}\n"), "inputs.images[0]"


def long_start_url(tmp_path):
    return spec(tmp_path, OK + f"sandbox: {{kind: browser, options: {{start_url: {LONG_PATH}}}}}\n"), \
        "sandbox.options.start_url"


def long_scripted_path(tmp_path):
    return spec(tmp_path, OK.replace("scripted:r.yaml", f"scripted:{LONG_PATH}")), "model.name"


def scripted_fifo(tmp_path):
    os.mkfifo(tmp_path / "responses.yaml")  # the scripted policy would block reading it
    return spec(tmp_path, OK.replace("scripted:r.yaml", "scripted:responses.yaml")), "model.name"


def nul_in_path(tmp_path):
    return spec(tmp_path, OK + 'inputs: {files: ["notes\\0.txt"]}\n'), "inputs.files[0]"


def nul_in_json_path(tmp_path):
    text = json.dumps({"id": "hostile", "instruction": "x", "inputs": {"images": ["cat\u0000.png"]}})
    return spec(tmp_path, text, "task.json"), "inputs.images[0]"


def python_os_system(tmp_path):
    return spec(tmp_path, OK.replace("scripted:r.yaml", "python:os:system")), "model.name"


def python_sys_exit(tmp_path):
    return spec(tmp_path, OK.replace("scripted:r.yaml", "python:sys:exit")), "model.name"


def image_not_an_image(tmp_path):
    write(tmp_path / "cat.png", "#!/bin/sh\necho this is not an image\n")
    return spec(tmp_path, OK + "inputs: {images: [cat.png]}\n"), "inputs.images[0]"


def huge_sparse_image(tmp_path):
    with open(tmp_path / "huge.png", "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.truncate(2 * 2**30)  # 2 GB that take no disk: refused from its size, never read
    return spec(tmp_path, OK + "inputs: {images: [huge.png]}\n"), "inputs.images[0]"


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def image_bomb(tmp_path):
    header = struct.pack(">IIBBBBB", 20_000, 20_000, 1, 0, 0, 0, 0)  # a PNG that declares 400 M pixels
    (tmp_path / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header)
                                        + png_chunk(b"IDAT", zlib.compress(b"")) + png_chunk(b"IEND", b""))
    return spec(tmp_path, OK + "inputs: {images: [bomb.png]}\n"), "inputs.images[0]"


def remote_start_url(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: browser, options: {start_url: 'https://example.invalid/'}}\n"), \
        "sandbox.options.start_url"


def remote_start_url_other_host_allowed(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: browser, options: {start_url: 'https://example.invalid/', "
                               "allowed_hosts: [example.org, '*.example.invalid']}}\n"), "sandbox.options.start_url"


def file_url_outside(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: browser, options: {start_url: 'file:///etc/passwd'}}\n"), \
        "sandbox.options.start_url"


def relative_path_escaping(tmp_path):
    return spec(tmp_path / "specs", OK + "sandbox: {kind: browser, options: {start_url: ../../../../etc/passwd}}\n"), \
        "sandbox.options.start_url"


def symlink_out_of_the_folder(tmp_path):
    os.symlink("/etc/passwd", tmp_path / "page.html")
    return spec(tmp_path, OK + "sandbox: {kind: browser, options: {start_url: page.html}}\n"), \
        "sandbox.options.start_url"


def bogus_evaluator(tmp_path):
    return spec(tmp_path, OK + "evaluator: {name: bogus}\n"), "evaluator.name"


def duplicate_json_keys(tmp_path):
    text = '{"id": "hostile", "instruction": "x", "model": {"name": "scripted:r.yaml", "name": "local"}}'
    return spec(tmp_path, text, "task.json"), "model.name"


def duplicate_yaml_keys(tmp_path):
    return spec(tmp_path, OK + "instruction: Something else entirely\n"), "instruction"


def empty_model_override(tmp_path):
    return spec(tmp_path, OK), "model.name: empty"


def spec_too_big(tmp_path):
    return spec(tmp_path, OK + "# " + "x" * 70_000 + "\n"), "the file is"


def string_too_long(tmp_path):
    return spec(tmp_path, OK + "metadata: {notes: " + "y" * 40_000 + "}\n"), "metadata.notes"


def integer_too_long(tmp_path):
    return spec(tmp_path, OK + "seed: " + "9" * 5_000 + "\n"), "seed"


def impossible_date(tmp_path):
    return spec(tmp_path, OK + "seed: 2024-02-30\n"), "seed"


def binary_value(tmp_path):
    return spec(tmp_path, OK + "metadata: {blob: !!binary /w==}\n"), "metadata.blob"


def api_key_in_options(tmp_path):
    return spec(tmp_path, OK.replace("model: scripted:r.yaml", "model: {name: 'openai:gpt-4.1-mini', options: "
                                     "{api_key: sk-live-abcdef0123456789}}")), "model.options.api_key"


def credentials_in_base_url(tmp_path):
    return spec(tmp_path, OK.replace("model: scripted:r.yaml", "model: {name: 'openai:m', base_url: "
                                     "'http://user:sk-abcdef0123456789@127.0.0.1:9/v1'}")), "model.base_url"


def key_as_api_key_env(tmp_path):
    return spec(tmp_path, OK.replace("model: scripted:r.yaml", "model: {name: 'openai:m', api_key_env: "
                                     "sk-abcdef0123456789}")), "model.api_key_env"


def token_in_metadata(tmp_path):
    return spec(tmp_path, OK + "metadata: {github_token: ghp_0123456789abcdef}\n"), "metadata.github_token"


def authorization_header_in_options(tmp_path):
    return spec(tmp_path, OK + "agent: {name: react, params: {headers: {x: 'Bearer abcdef0123456789'}}}\n"), \
        "agent.params.headers.x"


def agent_param_misspelt(tmp_path):
    return spec(tmp_path, OK + "agent: {name: react, params: {formt: deepeyes}}\n"), "agent.params.formt: agent 'react'"


def agent_param_quoted_false(tmp_path):  # read as text "no", never as true: the check it names is kept
    return spec(tmp_path, "id: h\ninstruction: put the red cube on the blue plate\nmodel: scripted:r.yaml\n"
                          "agent: {name: embodied, params: {verify: 'no'}}\nsandbox: robot\n"), "agent.params.verify"


def agent_param_out_of_range(tmp_path):
    return spec(tmp_path, OK + "agent: {name: visual_program, params: {program_seconds: 1.0e+12, repairs: -1}}\n"), \
        "agent.params.program_seconds"


def agent_param_of_another_type(tmp_path):
    return spec(tmp_path, OK + "agent: {name: computer_use, params: {history: [1, 2], coordinates: px}}\n"), \
        "agent.params.coordinates"


def sandbox_limit_true(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: process, options: {memory_mb: true}}\n"), "sandbox.options.memory_mb"


def sandbox_option_misspelt(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: process, options: {isolaton: unisolated}}\n"), \
        "sandbox.options.isolaton: sandbox 'process' has no option"


def sandbox_viewport_huge(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: browser, options: {viewport: 100000x100000}}\n"), \
        "sandbox.options.viewport"


def sandbox_launch_not_commands(tmp_path):
    return spec(tmp_path, OK + "sandbox: {kind: desktop, options: {launch: 5, settle: 1.0e+9}}\n"), \
        "sandbox.options.launch"


# name: (function making the spec in a folder, extra arguments to `toolpath run`); each function returns the
# spec's path and the field (or words) the error must name besides the file
CASES = {f.__name__: (f, args) for f, args in [
    (nested_yaml, ()), (nested_json, ()), (alias_bomb, ()), (merge_key_bomb, ()), (self_reference, ()),
    (long_image_path, ()), (long_start_url, ()), (long_scripted_path, ()), (nul_in_path, ()),
    (nul_in_json_path, ()), (python_os_system, ()), (python_sys_exit, ()), (image_not_an_image, ()),
    (huge_sparse_image, ()), (image_bomb, ()), (remote_start_url, ()), (remote_start_url_other_host_allowed, ()),
    (file_url_outside, ()), (relative_path_escaping, ()), (symlink_out_of_the_folder, ()), (bogus_evaluator, ()),
    (duplicate_json_keys, ()), (duplicate_yaml_keys, ()), (empty_model_override, ("--model", "")),
    (spec_too_big, ()), (string_too_long, ()), (integer_too_long, ()), (impossible_date, ()), (binary_value, ()),
    (api_key_in_options, ()), (credentials_in_base_url, ()), (key_as_api_key_env, ()), (token_in_metadata, ()),
    (authorization_header_in_options, ()), (agent_param_misspelt, ()), (agent_param_quoted_false, ()),
    (agent_param_out_of_range, ()), (agent_param_of_another_type, ()), (sandbox_limit_true, ()),
    (sandbox_option_misspelt, ()), (sandbox_viewport_huge, ()), (sandbox_launch_not_commands, ()),
]}


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail on any packet from this process; record every model loaded; record and refuse every sandbox, so
    that even a regression never opens a browser on a remote start page."""
    started = {"sandboxes": [], "models": []}

    def no_network(*args, **kwargs):
        raise AssertionError(f"a hostile spec made a network call: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket.socket, "sendto", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)

    def no_sandbox(kind, options):
        started["sandboxes"].append(kind)
        raise AssertionError(f"a hostile spec opened a {kind} sandbox")

    real_load = episode.load
    monkeypatch.setattr(episode, "open_sandbox", no_sandbox)
    monkeypatch.setattr(episode, "load", lambda spec: started["models"].append(spec.name) or real_load(spec))
    return started


def assert_refused(code, stderr, home, spec_path, field):
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert str(spec_path) in stderr, stderr[:500]
    assert field in stderr, stderr[:500]
    if (home / "runs.db").exists():
        with Store(home) as store:
            assert store.list_runs() == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_spec_exits_2_naming_file_and_field(case, tmp_path, home, capsys, nothing_starts):
    make, args = CASES[case]
    spec_path, field = make(tmp_path)
    code = cli.main(["run", str(spec_path), *args])
    out, err = capsys.readouterr()
    assert_refused(code, err, home, spec_path, field)
    assert out == ""
    assert nothing_starts["sandboxes"] == []
    # the model is loaded only where loading it is what fails
    assert len(nothing_starts["models"]) == (1 if case.startswith("python_") else 0)


def test_secrets_are_not_echoed_and_name_the_variable_to_use(tmp_path, home, capsys):
    spec_path, _ = api_key_in_options(tmp_path)
    assert cli.main(["run", str(spec_path)]) == 2
    err = capsys.readouterr().err
    assert "sk-live-abcdef0123456789" not in err and "model.api_key_env" in err


def test_bogus_evaluator_lists_the_scorers_and_the_benchmarks_that_score(tmp_path, home, capsys):
    spec_path, _ = bogus_evaluator(tmp_path)
    assert cli.main(["run", str(spec_path)]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in ("numeric", "exact", "mindcube_choice", "webarena", "miniwob", "tabletop"))


@pytest.mark.parametrize("make", [
    lambda tmp_path: (os.mkfifo(tmp_path / "fifo.yaml"), tmp_path / "fifo.yaml")[1],  # reading one blocks forever
    lambda tmp_path: "/dev/zero",  # endless: reading it whole fills memory
    lambda tmp_path: tmp_path,  # a folder
], ids=["fifo", "dev-zero", "folder"])
def test_spec_that_is_not_a_regular_file(make, tmp_path, home):
    path = make(tmp_path)
    r = toolpath_cli("run", path, home=home, timeout=60)  # a subprocess: a hang fails the test, not the run
    assert_refused(r.returncode, r.stderr, home, path, "not a regular file")


def test_scripted_model_that_is_a_fifo(tmp_path, home):
    path, field = scripted_fifo(tmp_path)
    r = toolpath_cli("run", path, home=home, timeout=60)
    assert_refused(r.returncode, r.stderr, home, path, field)
    assert "not a regular file" in r.stderr


def test_empty_model_on_eval(home):
    r = toolpath_cli("eval", "arith", "--limit", "1", "--model", "", home=home)
    assert r.returncode == 2 and "--model '': empty" in r.stderr and "Traceback" not in r.stderr
    assert not (home / "runs.db").exists() or Store(home).list_evals() == []


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_view_port_out_of_range(port, home):
    r = toolpath_cli("view", "--port", port, home=home, timeout=60)
    assert r.returncode == 2 and "--port: a port is 0 to 65535" in r.stderr and "Traceback" not in r.stderr
