"""System calls that attacks on the kernel start from are refused inside the sandbox (EPERM), by a seccomp filter
(toolpath/sandboxes/seccomp.py), while ordinary work (threads, subprocesses, fork, numpy) goes on.

Each call is made with ctypes' syscall() and arguments chosen so that, without the filter, the kernel would
answer something else (EINVAL, EFAULT, EBADF, success): an EPERM can only come from the filter. Three calls
(pivot_root, move_mount, fsopen) answer EPERM in the sandbox anyway, for lack of capabilities; the filter's
own answer to them is shown by a process on the host, as root, that loads the same program.
"""

import ast
import json
import os
import subprocess
import sys

import pytest

from security.test_sandbox_escalation import KINDS, open_box
from toolpath.sandboxes import docker, kernel, process, seccomp

# The calls, by their numbers on x86_64 and aarch64 (written out here, not taken from libseccomp, so a wrong
# name-to-number table there cannot hide a gap), each with arguments the kernel itself would not answer EPERM.
PROBE = r'''
import ctypes, errno, json, platform
libc = ctypes.CDLL(None, use_errno=True)
X86 = platform.machine() == "x86_64"
def call(x86, arm, *args):
    r = libc.syscall(ctypes.c_long(x86 if X86 else arm), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
BAD = 1  # an address nothing is mapped at: a call that reads its arguments fails with EFAULT
got = {}
for name, flag in FLAGS.items():
    got["clone " + name] = call(56, 220, flag | 0x800, 0, 0, 0, 0)  # CLONE_SIGHAND without CLONE_VM: EINVAL
    got["unshare " + name] = call(272, 97, flag | 0x1)  # 0x1 is no unshare flag: EINVAL
got["setns"] = call(308, 268, -1, 0)
got["io_uring_setup"] = call(425, 425, 1, BAD)
got["io_uring_enter"] = call(426, 426, -1, 0, 0, 0, 0, 0)
got["io_uring_register"] = call(427, 427, -1, 0, 0, 0)
got["keyctl"] = call(250, 219, 9999, 0, 0, 0, 0)
got["add_key"] = call(248, 217, BAD, BAD, 0, 0, 0)
got["request_key"] = call(249, 218, BAD, BAD, 0, 0)
got["ptrace"] = call(101, 117, 16, 999999, 0, 0)  # PTRACE_ATTACH
got["bpf"] = call(321, 280, 9999, 0, 0)
got["perf_event_open"] = call(298, 241, BAD, 0, -1, -1, 0)
got["mount"] = call(165, 40, BAD, BAD, BAD, 0, 0)
got["umount2"] = call(166, 39, BAD, 0)
got["pivot_root"] = call(155, 41, BAD, BAD)
got["move_mount"] = call(429, 429, -1, BAD, -1, BAD, 0)
got["open_tree"] = call(428, 428, -1, BAD, 0)
got["fsopen"] = call(430, 430, BAD, 0)
got["kexec_load"] = call(246, 104, 0, 1, BAD, 0)
got["init_module"] = call(175, 105, BAD, 0, BAD)
got["finit_module"] = call(313, 273, -1, BAD, 0)
got["userfaultfd"] = call(323, 282, 1)  # UFFD_USER_MODE_ONLY: open to any user
got["clone3"] = call(435, 435, BAD, 88)
got["unshare CLONE_NEWUSER alone"] = call(272, 97, 0x10000000)  # last: unfiltered, it succeeds
print(json.dumps(got))
'''
PROBE_CELL = f"FLAGS = {seccomp.NAMESPACE_FLAGS!r}\n" + PROBE
REFUSED = [f"{call} {flag}" for flag in seccomp.NAMESPACE_FLAGS for call in ("clone", "unshare")] + [
    "setns", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "ptrace",
    "bpf", "perf_event_open", "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "kexec_load",
    "init_module", "finit_module", "userfaultfd", "unshare CLONE_NEWUSER alone"]
# clone3's flags are out of the filter's reach: ENOSYS sends the C library back to clone, which is filtered.
EXPECTED = {**dict.fromkeys(REFUSED, "EPERM"), "clone3": "ENOSYS"}

ORDINARY = r'''
import concurrent.futures, os, subprocess, sys
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    squares = list(pool.map(lambda i: i * i, range(8)))
child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
pid = os.fork()
if pid == 0:
    os._exit(3)
forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
try:  # toolpath's own sandboxes run its interpreter, numpy included; a Docker image may have none
    import numpy as np
    rank = int(np.linalg.matrix_rank(np.eye(5)))
except ImportError:
    rank = None
(squares[-1], child.stdout.strip(), forked, rank)
'''


@pytest.fixture(scope="module", params=KINDS)
def box(request):
    b = open_box(request.param, cell_seconds=30)
    yield request.param, b
    b.close()


def status_field(box, name: str) -> str | None:
    """A field of /proc/self/status as the kernel in the sandbox sees it; None where this kernel has none."""
    r = box.run(f"[l.split()[1] for l in open('/proc/self/status') if l.startswith({name + ':'!r})]")
    assert r.ok, r.error
    found = ast.literal_eval(r.value)
    return found[0] if found else None


def test_the_sandbox_runs_under_a_seccomp_filter(box):
    kind, b = box
    assert status_field(b, "Seccomp") == "2"  # SECCOMP_MODE_FILTER, inherited by every process the kernel starts
    assert not any("SECCOMP" in n for n in b.run("1").notes)


def test_docker_keeps_the_engines_profile_beneath_toolpaths(box):
    kind, b = box
    if kind != "docker":
        pytest.skip("only a Docker container has a profile of its engine's")
    count = status_field(b, "Seccomp_filters")
    if count is None:
        pytest.skip("this kernel does not count a process's seccomp filters (Linux 5.9 and later do)")
    engine_applies_one = any("name=seccomp" in o for o in b.client.info().get("SecurityOptions", []))
    assert int(count) == 1 + engine_applies_one


def test_each_dangerous_call_is_refused_inside(box):
    kind, b = box
    r = b.run(PROBE_CELL)
    assert r.ok, r.error
    # Docker included: the engine's default profile allows io_uring and ptrace, toolpath's filter does not.
    assert json.loads(r.stdout) == EXPECTED


def test_threads_subprocesses_fork_and_numpy_still_work(box):
    kind, b = box
    r = b.run(ORDINARY)
    assert r.ok, r.error
    squares, child, forked, rank = ast.literal_eval(r.value)
    assert (squares, child, forked) == (49, "42", 3)
    assert rank == 5 or (kind == "docker" and rank is None)


def test_the_program_itself_refuses_each_call_even_to_root():
    """The host's root, not the sandbox's user, would get EFAULT or EINVAL from pivot_root, move_mount and
    fsopen: loading the program in a plain process (through the launcher's own installer) shows its answers."""
    try:
        bpf = seccomp.program()
    except seccomp.SeccompUnavailable as why:
        pytest.skip(str(why))
    r_fd, w_fd = os.pipe()
    os.write(w_fd, bpf)
    os.close(w_fd)
    load = (f"import ctypes, sys\nsys.path.insert(0, {os.path.dirname(kernel.__file__)!r})\nimport kernel\n"
            "assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS\n"
            f"kernel._install_seccomp({r_fd})\n")
    try:
        done = subprocess.run([sys.executable, "-I", "-c", load + PROBE_CELL], capture_output=True, text=True,
                              pass_fds=(r_fd,), timeout=60)
    finally:
        os.close(r_fd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == EXPECTED


@pytest.mark.parametrize("kind", ["bwrap", "docker"])
def test_without_a_filter_every_result_says_so(kind, monkeypatch):
    def unavailable():
        raise seccomp.SeccompUnavailable("no seccomp filter is written for this architecture (mips)")

    monkeypatch.setattr(docker if kind == "docker" else process, "program", unavailable)
    b = open_box(kind)
    try:
        r = b.run("1")
    finally:
        b.close()
    said = [n for n in r.notes if n.startswith("NO SECCOMP FILTER")]
    assert r.ok and len(said) == 1 and said[0].endswith(": no seccomp filter is written for this architecture (mips)")


def test_an_unfiltered_architecture_is_named(monkeypatch):
    monkeypatch.setattr(seccomp, "_compiled", {})
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    with pytest.raises(seccomp.SeccompUnavailable, match=r"\(riscv64\); there is one for x86_64 and aarch64"):
        seccomp.program()
