"""What an episode may touch on disk besides what parse_spec checks. A spec or a data set may come from anyone:
- a file an agent's parameters name to write (fast_slow's `output`, `library`) is under the spec's folder, an
  --allow-path folder or $TOOLPATH_HOME, links resolved, else the CLI exits 2 naming the file and the field
  before anything starts, and nothing is written;
- a task `toolpath eval` builds from a data set names files in the data set's folders only: a row naming
  /proc/self/environ or a file beside the data is one failed sample naming the field, the others run;
- read_file serves only the task's inputs and the episode's work folder, re-checked when it is called: an input
  swapped for a link or a FIFO after the task started is refused, not followed, and nothing blocks.
(The style and the checks of test_hostile_specs.py and test_spec_reach.py.)"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import write
from PIL import Image

from security.test_hostile_specs import nothing_starts  # noqa: F401 - a fixture
from security.test_spec_reach import SECRET_TEXT, run_refused
from toolpath import cli
from toolpath.agents.episode import run_episode
from toolpath.agents.fast_slow import AGENT as FAST_SLOW
from toolpath.agents.reach import ReachError, checked_spec, copy_checked
from toolpath.policies.base import Response
from toolpath.runs import Store
from toolpath.spec import Reach, TaskSpec, load_spec
from toolpath.state import ToolCall
from toolpath.tools.registry import ToolContext, ToolError, get_tool


def victim(tmp_path) -> Path:
    """A file outside the spec's folder that a hostile spec would overwrite."""
    return write(tmp_path / "elsewhere" / "victim.png", SECRET_TEXT)


def edit_spec(tmp_path, params, name="task.yaml") -> Path:
    """A fast_slow spec in tmp_path/spec with its image beside it and `params`."""
    folder = tmp_path / "spec"
    folder.mkdir(exist_ok=True)
    Image.new("RGB", (8, 8), "red").save(folder / "pic.png")
    text = json.dumps({"id": "writer", "instruction": "recolor the red square blue", "inputs": {"images": ["pic.png"]},
                       "agent": {"name": "fast_slow", "params": params}})
    return write(folder / name, text)


def output_in_the_users_home(tmp_path):
    return edit_spec(tmp_path, {"output": "~/.bashrc"}), "agent.params.output"


def output_absolute_elsewhere(tmp_path):
    return edit_spec(tmp_path, {"output": str(victim(tmp_path))}), "agent.params.output"


def output_relative_escaping(tmp_path):
    victim(tmp_path)
    return edit_spec(tmp_path, {"output": "../elsewhere/victim.png"}), "agent.params.output"


def output_through_a_linked_folder(tmp_path):
    victim(tmp_path)
    (tmp_path / "spec").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "spec" / "out")
    return edit_spec(tmp_path, {"output": "out/victim.png"}), "agent.params.output"


def output_is_a_link(tmp_path):
    (tmp_path / "spec").mkdir()
    os.symlink(victim(tmp_path), tmp_path / "spec" / "out.png")
    return edit_spec(tmp_path, {"output": "out.png"}), "agent.params.output"


def output_is_a_fifo(tmp_path):
    (tmp_path / "spec").mkdir()
    os.mkfifo(tmp_path / "spec" / "out.png")  # opened for writing, it would block the run
    return edit_spec(tmp_path, {"output": "out.png"}), "agent.params.output"


def output_is_a_folder(tmp_path):
    (tmp_path / "spec" / "out.png").mkdir(parents=True)
    return edit_spec(tmp_path, {"output": "out.png"}), "agent.params.output"


def output_with_a_nul(tmp_path):
    return edit_spec(tmp_path, {"output": "out\u0000.png"}), "agent.params.output"


def output_not_a_path(tmp_path):
    return edit_spec(tmp_path, {"output": ["out.png"]}), "agent.params.output"


def library_system_file(tmp_path):
    return edit_spec(tmp_path, {"library": "/etc/passwd"}), "agent.params.library"


def library_escaping(tmp_path):
    return edit_spec(tmp_path, {"library": "../../lib.json"}), "agent.params.library"


CASES = {f.__name__: f for f in [output_in_the_users_home, output_absolute_elsewhere, output_relative_escaping,
                                 output_through_a_linked_folder, output_is_a_link, output_is_a_fifo, output_is_a_folder,
                                 output_with_a_nul, output_not_a_path, library_system_file, library_escaping]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_agent_param_writing_out_of_reach_exits_2_naming_file_and_field(case, tmp_path, home, capsys, monkeypatch,
                                                                          nothing_starts):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # ~ is this test's, never the real one
    home.mkdir()
    run_refused(*CASES[case](tmp_path), home, capsys, nothing_starts)
    assert not (tmp_path / "user").exists()
    if (tmp_path / "elsewhere" / "victim.png").exists():
        assert (tmp_path / "elsewhere" / "victim.png").read_text() == SECRET_TEXT
    assert sorted(p.name for p in (tmp_path / "elsewhere").glob("*")) in ([], ["victim.png"])


def test_write_targets_inside_the_spec_folder_allowed_folders_or_the_home_are_taken(tmp_path, home):
    spec_path = edit_spec(tmp_path, {"output": "out/edited.png", "library": str(home / "lib.json")})
    spec = load_spec(spec_path)
    checked = checked_spec(spec, FAST_SLOW, Reach(spec_path.parent))
    assert checked.agent.params == {"output": str((tmp_path / "spec" / "out" / "edited.png").resolve()),
                                    "library": str((home / "lib.json").resolve())}
    assert spec.agent.params["output"] == "out/edited.png"  # the caller's spec is left as it was
    other = tmp_path / "allowed"
    other.mkdir()
    params = {"output": str(other / "x.png")}
    with pytest.raises(ReachError, match=r"agent\.params\.output: .*--allow-path"):
        checked_spec(load_spec(edit_spec(tmp_path, params)), FAST_SLOW, Reach(spec_path.parent))
    assert checked_spec(load_spec(edit_spec(tmp_path, params)), FAST_SLOW,
                        Reach(spec_path.parent, [other])).agent.params["output"] == str((other / "x.png").resolve())
    # without a reach (a Python caller's own spec): only $TOOLPATH_HOME, a relative path taken there
    with pytest.raises(ReachError, match=r"\$TOOLPATH_HOME"):
        checked_spec(checked, FAST_SLOW)  # its output, in the spec's folder
    assert checked_spec(load_spec(edit_spec(tmp_path, {"output": "e.png"})), FAST_SLOW).agent.params["output"] == \
        str((home / "e.png").resolve())


def test_the_write_replaces_a_link_put_in_after_the_check_and_refuses_a_folder_made_a_link(tmp_path):
    source = write(tmp_path / "edited.png", "edited")
    secret = victim(tmp_path)
    dest = tmp_path / "spec" / "out" / "edited.png"
    dest.parent.mkdir(parents=True)
    os.symlink(secret, dest)  # after the episode checked `dest`
    copy_checked(source, dest)
    assert not dest.is_symlink() and dest.read_text() == "edited" and secret.read_text() == SECRET_TEXT
    dest.unlink()
    dest.parent.rmdir()
    os.symlink(secret.parent, dest.parent)  # the folder on the way is a link now
    with pytest.raises(OSError, match="link"):
        copy_checked(source, dest)
    assert sorted(p.name for p in secret.parent.iterdir()) == ["victim.png"]


def test_a_resumed_run_keeps_its_files_and_refuses_one_made_a_link_since_it_started(tmp_path):
    notes = write(tmp_path / "spec" / "notes.txt", "notes")
    spec = TaskSpec(id="t", instruction="read", inputs={"files": [notes]},
                    agent={"name": "fast_slow", "params": {"output": "out/e.png"}})
    recorded = checked_spec(spec, FAST_SLOW, Reach(notes.parent))  # as the run's spec is stored
    assert checked_spec(recorded, FAST_SLOW, recorded=True) == recorded  # resumed without the spec's folder
    notes.unlink()
    os.symlink(victim(tmp_path), notes)
    (tmp_path / "spec" / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ReachError) as err:
        checked_spec(recorded, FAST_SLOW, recorded=True)
    assert [where for where, _ in err.value.problems] == ["inputs.files[0]", "agent.params.output"]


# ---- a data set's rows ----------------------------------------------------------------------------------

class SayYes:
    name = "python:yes"

    def __init__(self, spec=None):
        pass

    def respond(self, messages, tools, **gen):
        return Response(text="Yes.", tokens_in=1, tokens_out=1)


def test_an_eval_row_naming_a_file_outside_its_data_set_is_a_failed_sample_not_a_read(tmp_path, store):
    from toolpath.evals.runner import run_eval

    data = tmp_path / "pope"
    data.mkdir()
    Image.new("RGB", (8, 8), "red").save(data / "a.png")
    Image.new("RGB", (8, 8), "red").save(write(tmp_path / "elsewhere" / "pic.png", ""))
    os.symlink(tmp_path / "elsewhere" / "pic.png", data / "link.png")
    rows = [("a.png", "ok"), ("/proc/self/environ", "proc"), ("../elsewhere/pic.png", "up"), ("link.png", "link")]
    write(data / "coco_pope_popular.json", "\n".join(json.dumps(
        {"question_id": q, "image": image, "text": "Is there a dog in the image?", "label": "yes"})
        for image, q in rows) + "\n")
    result = run_eval("pope", store, model="python:security.test_write_reach:SayYes", data=str(data))
    by_id = {s.sample_id.rsplit("-", 1)[1]: s for s in result.samples}
    assert by_id["ok"].status == "finished" and by_id["ok"].score == 1.0
    for refused in ("proc", "up", "link"):
        sample = by_id[refused]
        assert sample.status == "failed" and sample.run_id is None, sample
        assert "inputs.images[0]" in sample.error and "outside" in sample.error
    assert len(store.list_runs()) == 1  # only the good row's episode started
    # the user may admit the folder beside the data (toolpath eval --allow-path DIR); never /proc
    again = run_eval("pope", store, model="python:security.test_write_reach:SayYes", data=str(data),
                     allow_paths=[tmp_path / "elsewhere"])
    assert {s.sample_id.rsplit("-", 1)[1]: s.status for s in again.samples} == {
        "ok": "finished", "proc": "failed", "up": "finished", "link": "finished"}


def test_eval_allow_path_must_name_a_folder(tmp_path, home, capsys):
    assert cli.main(["eval", "pope", "--data", str(tmp_path), "--allow-path", str(tmp_path / "nope")]) == 2
    assert "--allow-path" in capsys.readouterr().err
    with Store(home) as store:
        assert store.list_evals() == []


# ---- read_file at call time -----------------------------------------------------------------------------

class SwapThenRead:
    """Swaps the task's input for something else before each read_file call: a link to a secret, then a FIFO."""

    name = "python:swap"

    def __init__(self, notes: Path, secret: Path):
        self.notes, self.secret, self.step = notes, secret, 0

    def respond(self, messages, tools, **gen):
        self.step += 1
        if self.step == 1:
            return self._read()  # the real file first
        if self.step == 2:
            self.notes.unlink()
            os.symlink(self.secret, self.notes)
            return self._read()
        if self.step == 3:
            self.notes.unlink()
            os.mkfifo(self.notes)  # a read that follows it blocks until a writer comes: none does
            return self._read()
        return Response(text="done", tool_calls=[ToolCall(id="e", name="final_answer", arguments={"answer": "x"})])

    def _read(self):  # each time named another way: by name, by its path, by ./name
        path = [self.notes.name, str(self.notes), "./" + self.notes.name][self.step - 1]
        call = ToolCall(id=f"c{self.step}", name="read_file", arguments={"path": path})
        return Response(text="", tool_calls=[call])


def test_read_file_refuses_an_input_swapped_after_the_task_started(tmp_path, store):
    notes = write(tmp_path / "spec" / "notes.txt", "the notes")
    task = write(tmp_path / "spec" / "task.yaml", json.dumps({
        "id": "swap", "instruction": "read", "inputs": {"files": ["notes.txt"]},
        "tools": ["read_file", "final_answer"]}))
    spec = load_spec(task)
    result = run_episode(spec, store, policy=SwapThenRead(notes, victim(tmp_path)), reach=Reach(task.parent))
    assert result.status == "finished"
    seen = [m.content for m in store.transcript(result.run_id) if m.role == "tool"]
    assert seen[0] == "the notes"
    for refused in seen[1:3]:
        assert "cannot be read" in refused and "root:" not in refused


def test_read_file_serves_the_work_folder_and_nothing_out_of_it(tmp_path, store):
    work = tmp_path / "episode"
    write(work / "out" / "result.txt", "42")
    os.symlink(victim(tmp_path), work / "leak.txt")
    ctx = ToolContext(sandbox=SimpleNamespace(workdir=work), save_artifact=store.put_artifact)
    rf = get_tool("read_file")
    assert rf.call({"path": "out/result.txt"}, ctx).content == "42"
    assert rf.call({"path": "/episode/out/result.txt"}, ctx).content == "42"  # as code in the sandbox names it
    for bad in ("leak.txt", "../elsewhere/victim.png", "/episode/../elsewhere/victim.png", "out", "/etc/passwd"):
        with pytest.raises(ToolError) as err:
            rf.call({"path": bad}, ctx)
        assert "root:" not in str(err.value)
