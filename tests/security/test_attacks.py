"""Attacks from inside the Python sandbox. Each must be contained with a clear error and a healthy host."""

import os
import socket

import pytest

from toolpath.sandboxes.base import SandboxLimits
from toolpath.sandboxes.process import ProcessSandbox, bwrap_works, unshare_works

# Every attack runs against each isolation this machine can build; one it cannot is skipped with the reason.
ISOLATIONS = {"bwrap": bwrap_works(), "unshare": unshare_works()}


@pytest.fixture(params=sorted(ISOLATIONS))
def box(request, monkeypatch):
    reason = ISOLATIONS[request.param]
    if reason is not None:
        pytest.skip(f"no {request.param} sandbox here: {reason}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-123")  # must never be visible inside
    with ProcessSandbox(SandboxLimits(cell_seconds=10, memory_mb=512, processes=32, cpu_seconds=20,
                                      file_size_mb=4), isolation=request.param) as b:
        yield b
    assert os.getpid() > 0  # the host test process is still here and well


def err(box, code, **kw):
    r = box.run(code, **kw)
    assert r.error, f"the attack was not stopped: value={r.value!r} stdout={r.stdout[:200]!r}"
    return r.error + " ".join(r.notes)


@pytest.fixture
def host_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)  # listening is enough: a connection that could reach it would be accepted by the kernel
    yield srv.getsockname()[1]
    srv.close()


def test_tcp_to_a_host_service_on_loopback(box, host_server):
    # bwrap brings up a loopback of the sandbox's own (refused), unshare leaves it down (unreachable)
    e = err(box, f"import socket; socket.create_connection(('127.0.0.1', {host_server}), 2)")
    assert "ConnectionRefusedError" in e or "Network is unreachable" in e


def test_tcp_to_the_outside(box):
    e = err(box, "import socket; socket.create_connection(('1.1.1.1', 80), 2)")
    assert "Network is unreachable" in e or "OSError" in e


def test_udp_out(box):
    assert "Network is unreachable" in err(box, "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                                                 "s.sendto(b'x', ('8.8.8.8', 53))")


def test_dns(box):
    assert "gaierror" in err(box, "import socket; socket.getaddrinfo('example.com', 80)")


@pytest.mark.parametrize("path", ["/etc/shadow", "/root/.ssh/id_rsa", "/etc/passwd"])
def test_host_files_are_not_there(box, path):
    assert "FileNotFoundError" in err(box, f"open({path!r}).read()")


def test_the_run_database_is_not_there(box, home):
    from toolpath.runs import Store

    Store(home).close()
    assert "FileNotFoundError" in err(box, f"open({str(home / 'runs.db')!r}, 'rb').read()")


def test_other_episodes_folders_are_not_there(box):
    with ProcessSandbox() as other:
        (other.workdir / "theirs.txt").write_text("private")
        assert "FileNotFoundError" in err(box, f"open({str(other.workdir / 'theirs.txt')!r}).read()")


@pytest.mark.parametrize("path", ["/usr/evil", "/etc/evil", "/evil"])
def test_writing_outside_the_work_folder(box, path):
    e = err(box, f"open({path!r}, 'w').write('x')")
    assert "Read-only file system" in e or "Permission denied" in e
    assert not os.path.exists(path)


def test_fork_bomb(box):
    e = err(box, "import os\nkids = []\nwhile True:\n    pid = os.fork()\n    if pid == 0:\n"
                 "        import time; time.sleep(30)\n        os._exit(0)\n    kids.append(pid)", timeout=8)
    assert "BlockingIOError" in e or "Resource temporarily unavailable" in e or "limit" in e
    assert box.run("1 + 1").value == "2"


def test_memory_bomb(box):
    assert "MemoryError" in err(box, "x = bytearray(4 * 1024 ** 3)")
    assert box.run("2 + 2").value == "4"


def test_cpu_spin_is_stopped_by_the_cell_timeout(box):
    assert "limit" in err(box, "while True: pass", timeout=2)


def test_endless_output_is_capped(box):
    r = box.run("import sys\nfor _ in range(200_000): sys.stdout.write('spam spam spam\\n')")
    assert len(r.stdout) <= box.limits.output_bytes and any("cut to" in n for n in r.notes)


def test_huge_file(box):
    e = err(box, "f = open('big.bin', 'wb')\nfor _ in range(100): f.write(b'x' * 1024 * 1024)\nf.close()")
    assert "File too large" in e or "kernel died" in e
    assert (box.workdir / "big.bin").stat().st_size <= 4 * 1024 * 1024


def test_signals_cannot_reach_the_host(box):
    r = box.run("import os, signal\nppid = os.getppid()\ntry:\n    os.kill(ppid, signal.SIGKILL)\n"
                "except PermissionError:\n    pass\nppid")  # unshare's init refuses it; bwrap's ignores it
    # inside its own PID namespace the parent is the sandbox's init (pid 1), never a host process
    assert r.value == "1" and box.run("1").value == "1"
    assert "ProcessLookupError" in err(box, f"import os; os.kill({os.getpid()}, 9)")


def test_proc_shows_only_the_sandbox(box):
    r = box.run("import os; sorted(int(p) for p in os.listdir('/proc') if p.isdigit())")
    pids = eval(r.value)
    assert len(pids) <= 4  # the sandbox's init, the kernel and its children: no host process at all


def test_ptrace_cannot_reach_host_processes(box):
    # PTRACE_ATTACH (16) to this test process: its pid does not exist in the sandbox's PID namespace
    e = err(box, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 f"res = libc.ptrace(16, {os.getpid()}, 0, 0)\n"
                 "assert res == 0, 'ptrace refused, errno %d' % ctypes.get_errno()")
    # EPERM from the seccomp filter, which refuses ptrace whole; where there is none, ESRCH from the namespace
    assert "ptrace refused, errno 1" in e or "ptrace refused, errno 3" in e


def test_symlink_escape(box):
    box.run("import os; os.symlink('/', 'root')")
    assert (box.workdir / "root").is_symlink()
    # inside, '/' is the sandbox's own root: the link leads nowhere private
    assert "FileNotFoundError" in err(box, "open('root/root/.ssh/id_rsa').read()")


def test_forged_image_paths_from_a_compromised_kernel_are_refused(box):
    # A cell that finds the current request's id in the kernel's frames and answers for it: its answer is taken
    # (it says no more than the cell could print), its image paths are not, and the kernel's own answer, which
    # then arrives as a second one, costs the kernel before the next cell runs.
    r = box.run("import json, os, sys\nos.makedirs('/episode/.images', exist_ok=True)\n"
                "os.symlink('/etc/passwd', '/episode/.images/evil.png')\n"
                "f = sys._getframe()\nwhile 'req' not in f.f_locals: f = f.f_back\n"
                "out = os.fdopen(int(sys.argv[1]), 'w', buffering=1)\n"
                "out.write(json.dumps({'id': f.f_locals['req']['id'], 'stdout': '', 'stdout_truncated': False,"
                " 'stdout_bytes': 0, 'stderr': '', 'stderr_truncated': False, 'stderr_bytes': 0, 'value': None,"
                " 'error': None, 'images': ['/episode/.images/evil.png', '/etc/shadow'], 'images_dropped': 0,"
                " 'no_space': False}) + '\\n')")
    assert r.images == [] and sum("refused" in n for n in r.notes) == 2
    r = box.run("1 + 1")  # the kernel's answer is seen before this request is sent, or instead of its answer
    assert box.restarts == 1 and ("no request asked for" in r.notes[0] or "instead of this cell" in r.error)
    assert box.run("3 * 3").value == "9"


def test_an_image_swapped_for_a_symlink_after_the_answer_changes_nothing_the_host_keeps(box):
    # the host copies each image as it checks it: a cell's thread that later points the name at a host file
    # cannot make the host read that file
    r = box.run("from PIL import Image\nImage.new('RGB', (4, 4), 'red').show()\nimport os, threading, time\n"
                "def swap():\n    time.sleep(0.3)\n    os.remove('/episode/.images/cell1_1.png')\n"
                "    os.symlink('/etc/passwd', '/episode/.images/cell1_1.png')\n"
                "threading.Thread(target=swap).start()")
    assert len(r.images) == 1
    import time

    time.sleep(1)
    assert r.images[0].read_bytes()[:4] == b"\x89PNG" and box.workdir not in r.images[0].parents


def test_environment_has_no_host_secrets(box):
    r = box.run("import os; dict(os.environ)")
    assert "sk-host-secret" not in r.value and "OPENAI_API_KEY" not in r.value and "TOOLPATH_HOME" not in r.value


def test_ctypes_cannot_mount_or_unshare(box):
    e = err(box, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "res = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)\nassert res == 0, 'mount refused'")
    assert "mount refused" in e


def test_runs_as_an_unprivileged_user(box):
    assert box.run("import os; (os.getuid(), os.getgid())").value == "(65534, 65534)"
