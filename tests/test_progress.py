"""The one progress helper: rate-limited lines in a log, one redrawn line on a terminal, silenced by -q, and
progress on stderr while --json stdout stays one JSON object."""

import io
import json

import pytest
from tiny_lm import save_tiny_byte_llama

from toolpath import progress
from toolpath.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(autouse=True)
def loud():
    progress.set_quiet(False)
    yield
    progress.set_quiet(False)


def test_without_a_terminal_a_line_at_most_every_few_seconds_and_a_final_line():
    out, clock = io.StringIO(), Clock()
    stage = Progress("[2/4] clip", total=320, unit="steps", stream=out, every=10, clock=clock)
    for _ in range(320):  # 1/8 s a step: 40 s in all
        clock.now += 0.125
        stage.update(value="loss 0.500")
    stage.close("top-1 0.9")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "toolpath: [2/4] clip: 320 steps to do"
    assert len(lines) == 1 + 4 + 1  # start, one per 10 s of 40, final
    assert lines[1] == "toolpath: [2/4] clip: 80/320 steps (25%), 8.00 steps/s, 00:30 left, loss 0.500"
    assert lines[-1] == "toolpath: [2/4] clip: 320 steps in 00:40, loss 0.500, top-1 0.9"


def test_bytes_are_scaled_and_an_unknown_total_shows_what_is_done():
    out, clock = io.StringIO(), Clock()
    stage = Progress("joining m.gguf", total=3 << 30, unit="B", stream=out, every=5, clock=clock)
    clock.now += 6
    stage.update(1 << 30)
    assert "1.00GB/3.00GB (33%)" in out.getvalue().splitlines()[1] and "00:12 left" in out.getvalue()
    counting = Progress("converting", unit="tensors", stream=out, every=0, clock=clock)
    counting.update(3)
    assert out.getvalue().splitlines()[-1].startswith("toolpath: converting: 3 tensors, ")


def test_an_exception_or_ctrl_c_ends_the_line_saying_so():
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), Progress("gptq", 4, "layers", stream=out, every=99):
        raise KeyboardInterrupt
    with pytest.raises(ValueError), Progress("rtn", 4, "layers", stream=out, every=99):
        raise ValueError("x")
    ends = out.getvalue().splitlines()
    assert ends[1].endswith("interrupted") and ends[3].endswith("failed") and len(ends) == 4


def test_on_a_terminal_one_redrawn_line_per_stage():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    with Progress("tailoring search", 3, "trials", stream=tty) as stage:
        for _ in range(3):
            stage.update(value="best 0.98")
    text = tty.getvalue()
    assert "\r" in text and text.count("\n") == 1 and "3/3" in text and "best 0.98" in text


def test_quiet_silences_every_stage_and_line():
    out = io.StringIO()
    progress.set_quiet(True)
    with Progress("building", 2, "steps", stream=out, every=0) as stage:
        stage.update(2)
    progress.say("wrote it", stream=out)
    assert out.getvalue() == "" and stage.done == 2


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("transformers")
    return save_tiny_byte_llama(tmp_path_factory.mktemp("tiny") / "model", text_chars=5000, vocab=280, hidden=32,
                                intermediate=32, heads=2, kv_heads=1, positions=64)


def test_json_stdout_stays_one_object_while_compress_reports_progress(tiny_model, tmp_path, capsys, monkeypatch):
    """`toolpath compress --json`: its layer progress goes to stderr, stdout is exactly the one object; -q leaves
    stderr without progress."""
    from toolpath.cli import main

    monkeypatch.setenv(progress.EVERY_VARIABLE, "0")
    argv = ["compress", f"hf:{tiny_model}", "--method", "rtn", "--bits", "4", "--option", "group_size=32", "--json"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["method"] == "rtn" and out.count("\n") == 1
    assert "toolpath: rtn: quantizing 2 decoder layers: 1/2 layers (50%)" in err
    assert main([*argv, "--out", str(tmp_path / "b"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["method"] == "rtn" and "quantizing" not in err


def test_ctrl_c_in_a_build_says_what_was_kept_and_how_to_start_again(home, monkeypatch, capsys):
    from toolpath.cli import main
    from toolpath.train import metaembed_training

    def interrupted(seed):
        with Progress("[2/2] training", 200, "steps") as stage:
            stage.update(3)
            raise KeyboardInterrupt

    monkeypatch.setattr(metaembed_training, "build", interrupted)
    assert main(["models", "build", "metaembed"]) == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("toolpath: [2/2] training: 3 steps in ") and err[-2].endswith(", interrupted")
    assert "nothing half-written" in err[-1] and "`toolpath models build metaembed` starts it again" in err[-1]
