"""The Python kernel that runs inside a sandbox: one persistent namespace, one request at a time.

Standalone on purpose (standard library only, no toolpath imports): it is bound alone into the sandbox.

One file, two roles:

    kernel.py OUT_FD IMAGE_DIR [SCRATCH_DIR]
        A kernel. Requests arrive as JSON lines on stdin; answers go as JSON lines to OUT_FD, so nothing the
        user's code prints (even with os.write(1, …)) lands there by accident. Each request carries an id that
        its answer repeats. For each cell the kernel points fds 1 and 2 at files in SCRATCH_DIR (default /tmp,
        private to a sandbox; an unisolated kernel names its own folder), runs the code, evaluates a
        trailing expression like a notebook does, saves open matplotlib figures and shown PIL images as PNG
        files, and reports all of it.

    kernel.py launch (--control FD | --connect PATH) --images DIR --log PATH [--drop-to UID]
                     [--seccomp FD | --seccomp-file PATH]
        The launcher: the sandbox's first process (pid 1 of its PID namespace), which lives as long as the
        sandbox. The host sends it, over a Unix socket, one byte and two fds (the new kernel's request and
        answer pipes) each time it wants a kernel; the launcher kills every other process in the sandbox,
        forks a fresh kernel on those pipes and reports each kernel's exit status back. A kernel restart thus
        keeps the sandbox, and its memory-backed /episode folder, as they are. It ends when the host closes
        the socket (however the host died). With --drop-to it first gives the episode folder (its working
        directory) to that user, becomes it and drops every capability: bubblewrap, run by root, sets up the
        file system as root so it can read a Python installed under /root. With --seccomp it first installs
        the seccomp program read from that fd (for builders that cannot install one themselves: unshare);
        --seccomp-file reads it from a file instead (Docker, which can pass the launcher no fd of the host's).
"""

import ast
import errno
import json
import os
import signal
import sys
import traceback

namespace = {"__name__": "__main__"}
shown = []  # PIL images passed to .show() during the current cell
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _patch_pil():
    try:
        from PIL import Image
    except ImportError:
        return
    Image.Image.show = lambda self, *a, **k: shown.append(self.copy())


def _images(image_dir, cell, limit):
    """Save this cell's figures and shown images (at most `limit`); returns (paths, how many were dropped)."""
    os.makedirs(image_dir, exist_ok=True)
    pending = []
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        pending += [("figure", num) for num in plt.get_fignums()]
    pending += [("pil", img) for img in shown]
    paths = []
    try:
        for kind, item in pending[:limit]:
            p = os.path.join(image_dir, f"cell{cell}_{len(paths) + 1}.png")
            if kind == "figure":
                plt.figure(item).savefig(p, format="png")
            else:
                item.save(p, format="PNG")
            paths.append(p)
    finally:
        if plt is not None:
            plt.close("all")
        shown.clear()
    return paths, len(pending) - len(paths)


def _read_capped(path, cap):
    with open(path, "rb") as f:
        data = f.read(cap + 1)
        size = os.fstat(f.fileno()).st_size
    text = data[:cap].decode("utf-8", "replace")
    return text, size > cap, size


def _out_of_space(exc):
    """Whether `exc`, or an exception it came from, is a write that found its file system full."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def run_cell(cell, code, output_cap, image_limit, image_dir, scratch="/tmp"):
    result = {"value": None, "error": None, "no_space": False}
    out_path, err_path = os.path.join(scratch, ".cell_stdout"), os.path.join(scratch, ".cell_stderr")
    saved = os.dup(1), os.dup(2)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            tree = ast.parse(code, f"<cell {cell}>")
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(compile(tree, f"<cell {cell}>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), f"<cell {cell}>", "eval"), namespace)
                if value is not None:
                    result["value"] = repr(value)[:output_cap]
        except SystemExit as e:
            result["error"] = f"SystemExit({repr(e.code)[:200]}): the kernel keeps running"
        except BaseException as e:
            etype, evalue, tb = sys.exc_info()
            # Drop the kernel's own frame so the traceback starts in the user's cell.
            result["error"] = "".join(traceback.format_exception(etype, evalue, tb.tb_next))[-output_cap:]
            result["no_space"] = _out_of_space(e)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except OSError as e:  # what the cell printed last did not fit in /tmp
                    result["no_space"] = result["no_space"] or _out_of_space(e)
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    result["stdout"], result["stdout_truncated"], result["stdout_bytes"] = _read_capped(out_path, output_cap)
    result["stderr"], result["stderr_truncated"], result["stderr_bytes"] = _read_capped(err_path, output_cap)
    try:
        result["images"], result["images_dropped"] = _images(image_dir, cell, image_limit)
    except Exception as e:  # a figure that cannot be drawn (or saved) must not take the kernel down
        result["images"], result["images_dropped"] = [], 0
        result["error"] = ((result["error"] or "") + f"\n(saving images failed: {e})")[-output_cap:]
        result["no_space"] = result["no_space"] or _out_of_space(e)
    return result


def _answer(fd, obj):
    """One whole JSON line on the answer fd (a large answer takes several writes)."""
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _preload(code):
    try:
        exec(code, namespace)
    except BaseException:  # a preload that fails must be reported, not end the kernel
        return {"ok": False, "error": traceback.format_exc()[-2000:]}
    return {"ok": True, "error": None}


def serve(out_fd, image_dir, scratch="/tmp"):
    """Answer requests from stdin until it closes (the host is gone)."""
    _patch_pil()
    _answer(out_fd, {"ready": True, "pid": os.getpid()})
    cell = 0
    for line in sys.stdin:
        req = json.loads(line)
        cell += 1
        if req.get("op") == "set":  # preload values (e.g. task images) into the namespace
            res = _preload(req["code"])
        else:
            res = run_cell(cell, req["code"], int(req.get("output_cap", 20000)), int(req.get("image_limit", 10)),
                           image_dir, scratch)
        res["id"] = req.get("id")
        _answer(out_fd, res)


# ---- the launcher ---------------------------------------------------------------------------------------
def _options(argv):
    """--name value pairs into a dict."""
    if len(argv) % 2:
        raise SystemExit(f"launch: expected --name value pairs, got {argv!r}")
    return {argv[i].lstrip("-"): argv[i + 1] for i in range(0, len(argv), 2)}


def _control_socket(opts):
    import socket

    if "control" in opts:  # bubblewrap, unshare: one end of a socketpair, inherited
        return socket.socket(fileno=int(opts["control"]))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # Docker: the host listens on a path in a folder
    sock.connect(opts["connect"])  # it removes once this connection is made
    return sock


def _capabilities():
    with open("/proc/self/status") as f:
        return {line.split(":")[0]: int(line.split()[1], 16) for line in f if line.startswith("Cap")}


def _drop_root(uid):
    """Give the episode folder (the working directory) to `uid` and become it: leaving uid 0 clears the
    effective and permitted capabilities. (The inheritable ones bubblewrap set stay, and can never be used:
    no_new_privs is set and every mount is nosuid, so no exec can gain a capability.)"""
    os.chown(".", uid, uid)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    caps = _capabilities()
    if os.getuid() != uid or any(caps[k] for k in ("CapPrm", "CapEff", "CapAmb")):
        raise SystemExit(f"launch: could not drop privileges: uid {os.getuid()}, {caps!r}")


def _own_pid_namespace():
    """Whether this process is the first of a PID namespace (or the first after Docker's init), so that
    kill(-1) reaches only the sandbox. Never true on a host: there pid 1 is the system's init."""
    if os.getpid() == 1:
        return True
    try:
        with open("/proc/1/cmdline", "rb") as f:
            init = os.path.basename(f.read().split(b"\0")[0])
    except OSError:
        return False
    return os.getppid() == 1 and init in (b"docker-init", b"tini")


def _install_seccomp(fd):
    """Install the BPF program (an array of struct sock_filter) read from `fd` on this process and all it will
    start. no_new_privs, which the kernel requires of an unprivileged process, is already set: by
    unshare's setpriv, by Docker's no-new-privileges."""
    try:
        import ctypes
    except ImportError:  # a Python built without libffi: refuse to run unfiltered rather than go on quietly
        raise SystemExit("launch: this Python has no ctypes, which installing the seccomp filter needs") from None

    data = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    if not data or len(data) % 8:
        raise SystemExit(f"launch: the seccomp program is empty or cut ({len(data)} bytes)")

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(data, len(data))
    prog = SockFprog(len(data) // 8, ctypes.cast(code, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise SystemExit(f"launch: could not install the seccomp filter: {os.strerror(ctypes.get_errno())}")


def _kill_everything_else():
    try:
        os.kill(-1, signal.SIGKILL)  # every process of this PID namespace but this one (and its init)
    except ProcessLookupError:
        pass


def _fork_kernel(req_fd, out_fd, opts, keep_out):
    """A fresh kernel on these pipes, forked from this launcher (no second interpreter to start)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        os.setsid()  # a session of its own: the kernel's kill(0) reaches nothing but itself
        os.dup2(req_fd, 0)
        os.close(req_fd)
        null = os.open("/dev/null", os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        # The kernel's own stderr (outside cells) goes to a file, never a pipe nobody drains.
        log = os.open(opts["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 2)
        os.close(log)
        sys.argv = [sys.argv[0], str(out_fd), opts["images"]]
        serve(out_fd, opts["images"])
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(0)


def launch(argv):
    import select
    import socket

    opts = _options(argv)
    if not _own_pid_namespace():
        raise SystemExit(f"launch: refusing to run outside a PID namespace of its own (pid {os.getpid()})")
    if "seccomp" in opts:
        _install_seccomp(int(opts["seccomp"]))
    elif "seccomp-file" in opts:
        try:
            fd = os.open(opts["seccomp-file"], os.O_RDONLY)
        except OSError as err:
            raise SystemExit(f"launch: cannot read the seccomp program: {err}") from err
        _install_seccomp(fd)
    ctl = _control_socket(opts)
    if "import-root" in opts:  # the host's toolpath, bound read-only, ahead of any installed copy
        sys.path.insert(0, opts["import-root"])
    if "drop-to" in opts:
        _drop_root(int(opts["drop-to"]))
    # Wake up on a child's exit as well as on the host's messages; reap every child (this is an init).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _patch_pil()  # once here, so each kernel forked later starts with Pillow imported
    kernel = None
    while True:
        ready = select.select([ctl, wake_r], [], [])[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
        kernel = _reap(kernel, ctl)
        if ctl not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1, 2)
        except ConnectionError:  # reset, broken pipe, aborted
            # A host that died with our reports unread in its socket resets the connection instead of
            # closing it: it is gone all the same.
            break
        if not msg:
            break  # the host is gone
        _kill_everything_else()
        kernel = None  # killed on purpose: its exit is not reported
        if len(fds) == 2:
            kernel = _fork_kernel(fds[0], fds[1], opts, (ctl.fileno(), wake_r, wake_w))
        for fd in fds:
            os.close(fd)
    _kill_everything_else()


def _reap(kernel, ctl):
    """Collect every exited child; report the kernel's own exit status to the host. Returns the kernel still
    running, or None."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return kernel
        if pid == 0:
            return kernel
        if pid == kernel:
            report = {"exit": os.waitstatus_to_exitcode(status), "pid": pid}
            try:  # never blocks: a host that reads no reports must not stall the sandbox's init
                ctl.send((json.dumps(report) + "\n").encode(), 0x40)  # MSG_DONTWAIT
            except OSError:
                pass
            kernel = None


if __name__ == "__main__":
    if sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2:])
    else:
        serve(int(sys.argv[1]), *sys.argv[2:4])
