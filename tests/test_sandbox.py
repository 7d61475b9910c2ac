"""The process sandbox's kernel: state, output, images, crashes and timeouts (real bubblewrap sandboxes)."""

import os

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
    # copied out of the sandbox as they were checked, into a folder only this user can enter, removed on close
    assert all(p.parent.stat().st_mode & 0o777 == 0o700 for p in r.images)
    box.close()
    assert not any(p.exists() for p in r.images)


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
    with pytest.raises(SandboxError, match="sandbox.options.isolation: unknown isolation 'vm'"):
        ProcessSandbox(isolation="vm")


def test_the_unisolated_folder_is_private_and_a_killed_hosts_is_swept(tmp_path, monkeypatch):
    import subprocess
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no process has now
    stale = tmp_path / f"toolpath-episode-{dead.pid}-abc123"
    (stale / "inputs").mkdir(parents=True)
    alive = tmp_path / f"toolpath-episode-{os.getpid()}-def456"  # a sandbox of a host still running: kept
    alive.mkdir()
    with ProcessSandbox(isolation="unisolated") as box:
        assert box.workdir.parent == tmp_path and box.workdir.stat().st_mode & 0o777 == 0o700
        assert not stale.exists() and alive.exists()
        work = box.workdir
    assert not work.exists()


def test_the_unisolated_kernel_keeps_its_scratch_files_in_its_own_folder():
    # a fixed name in the host's /tmp would be shared by every such kernel, and anyone's to plant
    with ProcessSandbox(isolation="unisolated") as box:
        assert box.run("print('marker-3f9a')").stdout == "marker-3f9a\n"
        assert "marker-3f9a" in (box.workdir / ".cell_stdout").read_text()


@needs_bwrap
def test_a_kernel_restart_keeps_the_episode_files(box):
    (box.workdir / "from_host.txt").write_text("input")
    box.run("v = 1\nopen('from_cell.txt', 'w').write('made')")
    r = box.run("while True: pass", timeout=1)
    assert "variables are lost" in r.notes[0]
    assert box.run("open('from_host.txt').read() + open('from_cell.txt').read()").value == "'inputmade'"


@needs_bwrap
def test_a_sandbox_whose_launcher_died_is_rebuilt_and_says_its_files_are_lost(box):
    import signal

    box.run("open('f.txt', 'w').write('x')")
    import time

    work = box.workdir
    os.kill(box._root_pid, signal.SIGKILL)  # as the host's OOM killer might
    while work.exists():  # the sandbox's processes go with it, a moment later
        time.sleep(0.01)
    r = box.run("import os; os.listdir('.')")
    assert any("rebuilt, and the files in /episode are lost" in n for n in r.notes)
    assert "f.txt" not in (r.value or "") and box.run("1 + 1").value == "2"


@needs_bwrap
def test_the_kernel_never_runs_as_host_root(box):
    r = box.run("[l.split()[1:] for l in open('/proc/self/status') if l.split()[0] in ('Uid:', 'CapEff:', 'CapPrm:')]")
    assert r.value == "[['65534', '65534', '65534', '65534'], ['0000000000000000'], ['0000000000000000']]"
    # and on the host: whatever it writes belongs to an unprivileged user, never to root
    box.run("open('mine', 'w').write('x')")
    assert (box.workdir / "mine").stat().st_uid == (65534 if os.getuid() == 0 else os.getuid())
    assert "PermissionError" in box.run("import os; os.listdir('/etc/ssl/private')").error or \
        not os.path.exists("/etc/ssl/private")


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
