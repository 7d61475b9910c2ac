"""The process sandbox's kernel: state, output, images, crashes and timeouts (real bubblewrap sandboxes)."""

import pytest

from toolpath.sandboxes import process
from toolpath.sandboxes.base import SandboxError, SandboxLimits
from toolpath.sandboxes.process import ProcessSandbox, bwrap_works

NO_BWRAP = bwrap_works()
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=f"no bubblewrap sandbox here: {NO_BWRAP}")


@pytest.fixture
def box():
    with ProcessSandbox(SandboxLimits(cell_seconds=5)) as b:
        yield b


@needs_bwrap
def test_state_persists_and_last_expression_is_shown(box):
    assert box.isolation == "bwrap"
    assert box.run("x = 20").value is None
    r = box.run("x += 1\nx * 2")
    assert r.ok and r.value == "42"


@needs_bwrap
def test_stdout_and_stderr_are_captured_even_from_raw_fds(box):
    r = box.run("import os, sys\nprint('py out')\nos.write(1, b'fd out\\n')\nprint('py err', file=sys.stderr)")
    assert "py out" in r.stdout and "fd out" in r.stdout and "py err" in r.stderr


@needs_bwrap
def test_exceptions_are_reported_and_the_kernel_lives_on(box):
    r = box.run("y = 1\n1 / 0")
    assert "ZeroDivisionError" in r.error and "<cell" in r.error
    assert box.run("y").value == "1"  # same kernel: no restart for an ordinary exception
    assert "SystemExit" in box.run("raise SystemExit(3)").error and box.run("y").value == "1"


@needs_bwrap
def test_timeout_restarts_the_kernel_and_says_so(box):
    box.run("z = 5")
    r = box.run("while True: pass", timeout=1)
    assert "1 s limit" in r.error and "variables are lost" in r.notes[0]
    assert "NameError" in box.run("z").error and box.run("2 + 2").value == "4"


@needs_bwrap
def test_a_crash_restarts_the_kernel(box):
    r = box.run("import os\nos._exit(7)")
    assert "the kernel died (exit 7)" in r.error and box.restarts == 1
    assert box.run("3 * 3").value == "9"


@needs_bwrap
def test_output_is_capped(box):
    r = box.run("print('x' * 100_000)")
    assert len(r.stdout) == box.limits.output_bytes and any("cut to" in n for n in r.notes)


@needs_bwrap
def test_figures_and_shown_images_come_back_as_files(box):
    r = box.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n"
                "from PIL import Image\nImage.new('RGB', (8, 8), 'red').show()")
    assert r.ok, r.error
    assert len(r.images) == 2 and all(p.read_bytes()[:4] == b"\x89PNG" for p in r.images)
    assert all(box.workdir in p.parents for p in r.images)


@needs_bwrap
def test_image_limit(box):
    r = box.run("from PIL import Image\nfor i in range(13): Image.new('L', (2, 2)).show()")
    assert len(r.images) == 10 and any("3 more image" in n for n in r.notes)


@needs_bwrap
def test_episodes_share_nothing():
    with ProcessSandbox() as a, ProcessSandbox() as b:
        a.run("secret = 'a'")
        a.run("open('note.txt', 'w').write('a')")
        assert "NameError" in b.run("secret").error
        assert "FileNotFoundError" in b.run("open('note.txt').read()").error
        assert a.workdir != b.workdir


def test_unisolated_mode_must_be_asked_for_and_says_so(monkeypatch):
    monkeypatch.setattr(process, "bwrap_works", lambda: "bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(process, "unshare_works", lambda: "unshare cannot create namespaces here")
    with pytest.raises(SandboxError, match="bwrap: bubblewrap .*unshare: unshare cannot.*isolation: unisolated"):
        ProcessSandbox().start()
    with ProcessSandbox(isolation="unisolated") as box:
        r = box.run("1 + 1")
        assert r.value == "2" and r.notes[0].startswith("UNISOLATED")


def test_unknown_isolation_is_refused():
    with pytest.raises(SandboxError, match="unknown isolation"):
        ProcessSandbox(isolation="vm")


@needs_bwrap
def test_a_kernel_that_cannot_start_is_a_clear_error():
    box = ProcessSandbox(SandboxLimits(memory_mb=4))  # too little memory for Python itself
    with pytest.raises(SandboxError, match="did not start"):
        box.start()
    box.close()


@needs_bwrap
def test_chatty_kernel_stderr_outside_cells_cannot_block_it(box):
    # 1 MB to the kernel's own stderr from a thread, after the cell ended: more than any pipe buffer holds
    box.run("import threading, time, os\n"
            "threading.Thread(target=lambda: (time.sleep(0.2), os.write(2, b'e' * 1_000_000))).start()")
    import time

    time.sleep(0.6)
    assert box.run("1 + 1").value == "2"
    assert (box.workdir / ".kernel.log").stat().st_size >= 1_000_000


@needs_bwrap
def test_a_failing_preload_is_a_clear_error_and_the_kernel_survives(box):
    with pytest.raises(SandboxError, match="(?s)preloading the kernel failed.*ModuleNotFoundError"):
        box.preload("import no_such_module_here")
    assert box.run("1 + 1").value == "2" and box.restarts == 0
