"""The sandboxes' seccomp filter (bwrap, unshare, and Docker, where it stacks on the engine's own profile): the
system calls that code in them never needs and attacks on the kernel or on the sandbox itself start from, refused
with EPERM.

Namespaces and capabilities already keep the sandbox's user from mounting, loading modules or tracing the host;
what they leave open is the kernel's own attack surface, reachable by any user: a new user namespace (in which
the caller is root again, and so reaches code paths written for root), io_uring, eBPF, perf events, keyrings,
userfaultfd (a classic tool to win kernel races) and the new mount API. This is a deny-list on top of those
layers, not an allow-list: ordinary Python, numpy, threads and subprocesses use none of these calls.

Two rules read an argument instead of refusing the call whole. clone and unshare are refused only when their
flags ask for a new namespace (so fork, threads and vfork keep working). clone3 passes its flags in memory,
which a seccomp filter cannot read, so it answers ENOSYS: the C library then falls back to clone, whose flags
the filter does read (Docker's default profile does the same).

The BPF program is compiled by libseccomp (through pyseccomp, its ctypes bindings), which also checks the
architecture of every call: a call made through another ABI (32-bit x86, x32) ends the process. Filters are
written for x86_64 and aarch64; elsewhere, or without libseccomp, `program()` raises SeccompUnavailable with
the reason and the sandbox says on every result that no filter is applied.
"""

from __future__ import annotations

import errno
import platform
import tempfile

__all__ = ["DENIED", "NAMESPACE_FLAGS", "SeccompUnavailable", "program"]

# clone/unshare flags that make a new namespace (linux/sched.h).
NAMESPACE_FLAGS = {"CLONE_NEWTIME": 0x80, "CLONE_NEWNS": 0x20000, "CLONE_NEWCGROUP": 0x02000000,
                   "CLONE_NEWUTS": 0x04000000, "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000,
                   "CLONE_NEWPID": 0x20000000, "CLONE_NEWNET": 0x40000000}

# Refused whole, by what they would give an attacker.
DENIED = (
    # joining another namespace
    "setns",
    # large kernel surfaces that unprivileged code reaches and a sandboxed kernel never needs
    "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key",
    # reading or steering another process (the launcher, a kernel of an earlier cell)
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    # mounts, old API and new, and file handles that walk past a mount's root
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "name_to_handle_at", "open_by_handle_at",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "vhangup", "iopl", "ioperm", "lookup_dcookie", "uselib",
)
# Refused when any of NAMESPACE_FLAGS is in their first argument (the flags on both architectures we filter).
NAMESPACE_CALLS = ("clone", "unshare")
# Answered ENOSYS so the C library falls back to clone (see above).
UNREADABLE_FLAGS = ("clone3",)
ARCHES = ("x86_64", "aarch64")


class SeccompUnavailable(Exception):
    """No seccomp program can be built here; the message says why."""


_compiled: dict[str, bytes | str] = {}  # "program": the BPF, or the reason there is none


def program() -> bytes:
    """The filter as a BPF program (an array of struct sock_filter, what bwrap's --seccomp and
    prctl(PR_SET_SECCOMP) take), compiled once per process."""
    if "program" not in _compiled:
        try:
            _compiled["program"] = _compile()
        except SeccompUnavailable as why:
            _compiled["program"] = str(why)
    found = _compiled["program"]
    if isinstance(found, str):
        raise SeccompUnavailable(found)
    return found


def _compile() -> bytes:
    machine = platform.machine()
    if machine not in ARCHES:
        raise SeccompUnavailable(f"no seccomp filter is written for this architecture ({machine}); "
                                 f"there is one for {' and '.join(ARCHES)}")
    try:
        import pyseccomp as seccomp
    except ImportError:
        raise SeccompUnavailable("pyseccomp is not installed (pip install pyseccomp)") from None
    except RuntimeError as err:  # pyseccomp raises this when it finds no libseccomp
        raise SeccompUnavailable(f"{err} (Debian package libseccomp2)") from None
    deny, unsupported = seccomp.ERRNO(errno.EPERM), seccomp.ERRNO(errno.ENOSYS)
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    try:
        for name in DENIED:
            _add(seccomp, f, deny, name)
        for name in NAMESPACE_CALLS:
            for flag in NAMESPACE_FLAGS.values():
                _add(seccomp, f, deny, name, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        for name in UNREADABLE_FLAGS:
            _add(seccomp, f, unsupported, name)
        with tempfile.TemporaryFile() as out:
            f.export_bpf(out)
            out.seek(0)
            return out.read()
    except OSError as err:
        raise SeccompUnavailable(f"libseccomp could not build the filter: {err}") from None


def _add(seccomp, f, action: int, name: str, *args) -> None:
    """One rule; a call this architecture does not have (iopl on aarch64) has nothing to refuse."""
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    if number < 0:
        return
    f.add_rule(action, number, *args)
