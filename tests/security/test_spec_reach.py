"""What a spec can reach on disk. A spec may come from anyone: every file it names (inputs.files, inputs.images,
a file: URL in inputs.urls) is taken relative to its folder and must be under it, links resolved, unless the user
allows another folder (`--allow-path DIR`, `allow_paths=`); and the icecache KV cache writes its far store only
under $TOOLPATH_HOME. Each hostile spec makes the CLI exit 2 naming the file and the field, before anything
starts (the style and the checks of test_hostile_specs.py)."""

import json
import os

import pytest
from conftest import write
from PIL import Image

from security.test_hostile_specs import OK, assert_refused, nothing_starts, spec  # noqa: F401 - a fixture
from toolpath import cli
from toolpath.runs import Store
from toolpath.spec import SpecError, load_spec

SECRET_TEXT = "root:$6$not-for-the-model\n"


def outside(tmp_path):
    """A folder beside the spec's, with a text file and an image in it."""
    folder = tmp_path / "elsewhere"
    write(folder / "notes.txt", SECRET_TEXT)
    Image.new("RGB", (8, 8), "red").save(folder / "pic.png")
    return folder


def shadow(tmp_path):
    return spec(tmp_path, OK + "inputs: {files: [/etc/shadow]}\n"), "inputs.files[0]"


def proc_environ(tmp_path):
    return spec(tmp_path, OK + "inputs: {files: [/proc/self/environ]}\n"), "inputs.files[0]"


def absolute_file_outside(tmp_path):
    return spec(tmp_path / "spec", OK + f"inputs: {{files: [{outside(tmp_path) / 'notes.txt'}]}}\n"), "inputs.files[0]"


def relative_file_escaping(tmp_path):
    outside(tmp_path)
    return spec(tmp_path / "spec", OK + "inputs: {files: [../elsewhere/notes.txt]}\n"), "inputs.files[0]"


def symlinked_file(tmp_path):
    (tmp_path / "spec").mkdir()
    os.symlink("/etc/passwd", tmp_path / "spec" / "notes.txt")
    return spec(tmp_path / "spec", OK + "inputs: {files: [notes.txt]}\n"), "inputs.files[0]"


def symlinked_folder(tmp_path):
    (tmp_path / "spec").mkdir()
    os.symlink("/etc", tmp_path / "spec" / "data")
    return spec(tmp_path / "spec", OK + "inputs: {files: [data/hostname]}\n"), "inputs.files[0]"


def absolute_image_outside(tmp_path):
    Image.new("RGB", (8, 8)).save(write(tmp_path / "spec" / "cat.png", ""))  # the first image is fine
    return spec(tmp_path / "spec", OK + f"inputs: {{images: [cat.png, {outside(tmp_path) / 'pic.png'}]}}\n"), \
        "inputs.images[1]"


def symlinked_image(tmp_path):
    (tmp_path / "spec").mkdir()
    os.symlink(outside(tmp_path) / "pic.png", tmp_path / "spec" / "pic.png")
    return spec(tmp_path / "spec", OK + "inputs: {images: [pic.png]}\n"), "inputs.images[0]"


def file_url_input(tmp_path):
    return spec(tmp_path, OK + "inputs: {urls: ['file:///etc/shadow']}\n"), "inputs.urls[0]"


def far_dir_spec(folder, far_dir: str):
    """A spec whose local model's icecache writes its far store to `far_dir`."""
    model = {"name": "local", "options": {"kv_cache": {"kind": "icecache", "far": "mmap", "far_dir": far_dir}}}
    return spec(folder, OK.replace("model: scripted:r.yaml", "model: " + json.dumps(model)))


def far_dir_absolute(tmp_path):
    return far_dir_spec(tmp_path, str(tmp_path / "far")), "model.options"


def far_dir_escaping(tmp_path):
    return far_dir_spec(tmp_path, "../../far"), "model.options"


def far_dir_through_a_link(tmp_path):
    os.symlink(tmp_path, tmp_path / "home" / "link")  # a link inside the home that points out of it
    return far_dir_spec(tmp_path, "link/far"), "model.options"


CASES = {f.__name__: f for f in [shadow, proc_environ, absolute_file_outside, relative_file_escaping, symlinked_file,
                                 symlinked_folder, absolute_image_outside, symlinked_image, file_url_input,
                                 far_dir_absolute, far_dir_escaping, far_dir_through_a_link]}


def run_refused(spec_path, field, home, capsys, started) -> str:
    """`toolpath run SPEC` exits 2 naming the file and the field, prints nothing on stdout and no secret, starts
    no sandbox and loads no model; returns its stderr."""
    code = cli.main(["run", str(spec_path)])
    out, err = capsys.readouterr()
    assert_refused(code, err, home, spec_path, field)
    assert out == "" and SECRET_TEXT.strip() not in err
    assert started["sandboxes"] == [] and started["models"] == []
    return err


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_spec_reaching_out_of_its_folder_exits_2_naming_file_and_field(case, tmp_path, home, capsys, nothing_starts):
    home.mkdir()
    err = run_refused(*CASES[case](tmp_path), home, capsys, nothing_starts)
    if case.startswith("far_dir"):
        assert not (tmp_path / "far").exists() and "kv_cache.far_dir" in err and "$TOOLPATH_HOME" in err
    else:
        assert "--allow-path" in err  # how the user lets it in


def reader_spec(tmp_path, files: list[str]) -> "os.PathLike":
    """A spec whose scripted model reads each input and then /etc/shadow and /proc/self/environ by path."""
    asks = [{"tool_calls": [{"name": "read_file", "arguments": {"path": p}}]}
            for p in [*files, "/etc/shadow", "/proc/self/environ"]]
    write(tmp_path / "spec" / "reads.yaml", json.dumps(asks + ["done"]))
    return write(tmp_path / "spec" / "task.yaml", json.dumps({
        "id": "reader", "instruction": "read", "model": "scripted:reads.yaml", "inputs": {"files": files},
        "tools": ["read_file", "final_answer"], "limits": {"max_steps": len(asks) + 1}}))


def test_allow_path_lets_the_user_admit_a_folder_and_read_file_serves_nothing_else(tmp_path, home, capsys):
    folder = outside(tmp_path)
    task = reader_spec(tmp_path, [str(folder / "notes.txt")])
    assert cli.main(["run", str(task), "--allow-path", str(folder), "--json"]) == 0, capsys.readouterr().err
    with Store(home) as store:
        results = [m.content for m in store.transcript(store.list_runs()[0]["id"]) if m.role == "tool"]
    assert SECRET_TEXT.strip() in results[0]  # the allowed file is served
    for refused in results[1:]:  # the two paths no spec named: not this task's input files
        assert "not one of this task's input files" in refused and "root:" not in refused


def test_allow_path_admits_only_its_own_folder(tmp_path, home, capsys):
    folder = outside(tmp_path)
    task = reader_spec(tmp_path, [str(folder / "notes.txt"), "/proc/self/environ"])
    assert cli.main(["run", str(task), "--allow-path", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "inputs.files[1]" in err and "inputs.files[0]" not in err and str(folder) in err
    assert cli.main(["run", str(task), "--allow-path", str(tmp_path / "nope")]) == 2
    assert "--allow-path" in capsys.readouterr().err


def test_the_python_api_takes_the_allow_list_too(tmp_path):
    folder = outside(tmp_path)
    task = write(tmp_path / "spec" / "task.yaml", OK.replace("scripted:r.yaml", "local") +
                 f"inputs: {{files: [{folder / 'notes.txt'}]}}\n")
    with pytest.raises(SpecError, match=r"inputs\.files\[0\]"):
        load_spec(task)
    assert load_spec(task, allow_paths=[folder]).inputs.files == [(folder / "notes.txt").resolve()]


def test_far_dir_under_the_home_is_accepted(tmp_path, home):
    task = far_dir_spec(tmp_path, str(home / "far"))
    assert load_spec(task).model.options["kv_cache"]["far_dir"] == str(home / "far")
