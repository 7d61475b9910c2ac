"""The Docker sandbox: its confinement, its protocol and its errors always; real containers where an engine answers.

Without an engine (CI) the real-container tests are skipped with docker_works()'s reason, at once. With one, they
use the image named by TOOLPATH_DOCKER_IMAGE, or else an image built here from this machine's own Python (images
cannot be pulled everywhere, and a test must not need the network).
"""

import fcntl
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from toolpath.sandboxes import docker as dsb
from toolpath.sandboxes.base import SandboxError, SandboxLimits
from toolpath.sandboxes.docker import IMAGE_ENV, DockerSandbox, container_config, docker_works
from toolpath.sandboxes.docker_image import build_host_python_image
from toolpath.sandboxes.kernel_client import KERNEL, KernelPipe, host_image_paths

ENGINE = docker_works()
needs_engine = pytest.mark.skipif(ENGINE is not None, reason=f"no Docker engine here: {ENGINE}")


# ---- without an engine ---------------------------------------------------------------------------------
def test_without_the_sdk_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # makes `import docker` fail
    assert "pip install docker" in docker_works()
    with pytest.raises(SandboxError, match="pip install docker"):
        DockerSandbox().start()


def test_without_an_engine_the_reason_names_the_socket(monkeypatch, tmp_path):
    pytest.importorskip("docker")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(dsb, "SOCKET", str(tmp_path / "docker.sock"))
    assert "docker.sock does not exist and DOCKER_HOST is not set" in docker_works()


def test_an_engine_that_does_not_answer_is_a_reason_not_a_hang(tmp_path):
    pytest.importorskip("docker")
    dead = tmp_path / "dead.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(dead))
    srv.listen(1)  # accepts the connection, never answers: the ping must give up by itself
    try:
        assert "no Docker engine answers" in docker_works(f"unix://{dead}")
    finally:
        srv.close()


def test_a_failed_start_is_a_sandbox_error_and_leaves_no_folder(monkeypatch):
    monkeypatch.setattr(dsb, "_connect", lambda base_url=None: (_ for _ in ()).throw(SandboxError("no engine")))
    box = DockerSandbox()
    with pytest.raises(SandboxError, match="no engine"):
        box.start()
    assert box.workdir is None and box.container is None
    with pytest.raises(SandboxError, match="not started"):
        box.run("1")


def test_a_missing_image_is_not_pulled_unless_asked():
    errors = pytest.importorskip("docker.errors")
    pulled = []

    class Images:
        def get(self, name):
            raise errors.ImageNotFound(name)

        def pull(self, name):
            pulled.append(name)

    client = type("Client", (), {"images": Images()})()
    with pytest.raises(SandboxError, match="image 'nope:1' not found locally; build or load it first"):
        dsb._ensure_image(client, "nope:1", pull=False)
    assert pulled == []
    dsb._ensure_image(client, "nope:1", pull=True)
    assert pulled == ["nope:1"]


def test_the_image_is_configurable(monkeypatch):
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    assert DockerSandbox().image == dsb.DEFAULT_IMAGE
    monkeypatch.setenv(IMAGE_ENV, "mine:1")
    assert DockerSandbox().image == "mine:1"
    assert DockerSandbox(image="given:2").image == "given:2"


@pytest.mark.parametrize("option, value", [("cpus", -1), ("cpus", "2"), ("start_seconds", 0), ("pull", "yes"),
                                           ("image", 5), ("python", 3), ("init", 1)])
def test_bad_options_are_named(option, value):
    with pytest.raises(SandboxError, match=f"sandbox.options.{option}: expected"):
        DockerSandbox(**{option: value})


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-123")
    lim = SandboxLimits(cpu_seconds=20, memory_mb=512, processes=32, open_files=100, file_size_mb=4)
    return container_config("img:1", tmp_path / "io", lim), tmp_path


def test_the_container_is_confined(config):
    cfg, tmp = config
    assert cfg["network_disabled"] is True and cfg["network_mode"] == "none"
    assert cfg["read_only"] is True and cfg["user"] == "65534:65534"
    assert cfg["cap_drop"] == ["ALL"] and cfg["security_opt"] == ["no-new-privileges"]
    assert "privileged" not in cfg and "devices" not in cfg and "volumes" not in cfg
    assert cfg["pids_limit"] == 32 and cfg["mem_limit"] == cfg["memswap_limit"] == "512m"
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in cfg["ulimits"]}
    assert ulimits == {"cpu": (20, 21), "nofile": (100, 100), "fsize": (4 << 20, 4 << 20), "core": (0, 0)}
    assert "nano_cpus" not in cfg


def test_only_bounded_memory_folders_are_writable(config):
    cfg, tmp = config
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in cfg["mounts"]}
    assert mounts == {dsb.KERNEL_INSIDE: (str(KERNEL.resolve()), True), dsb.IO_INSIDE: (str(tmp / "io"), True)}
    # No host folder is written to: /episode, /tmp and /dev/shm are tmpfs of disk_mb each, nosuid
    assert set(cfg["tmpfs"]) == {"/tmp", "/episode"} and cfg["shm_size"] == "256m"
    for options in cfg["tmpfs"].values():
        assert {"nosuid", "nodev", "size=256m"} <= set(options.split(","))
    assert {"mode=0700", "uid=65534", "gid=65534"} <= set(cfg["tmpfs"]["/episode"].split(","))
    assert cfg["working_dir"] == "/episode"


def test_no_host_environment_goes_in(config):
    cfg, _ = config
    assert set(cfg["environment"]) == {"HOME", "MPLBACKEND", "MPLCONFIGDIR", "PYTHONDONTWRITEBYTECODE"}
    assert "sk-host-secret-123" not in repr(cfg)


def test_the_launcher_installs_toolpaths_seccomp_filter_over_the_engines(config):
    cfg, _ = config
    assert cfg["command"][-2:] == ["--seccomp-file", f"{dsb.IO_INSIDE}/{dsb.SECCOMP}"]
    # No seccomp= option: the engine's default profile stays beneath toolpath's filter.
    assert not any(o.startswith("seccomp") for o in cfg["security_opt"])
    unfiltered = container_config("i", Path("io"), SandboxLimits(), seccomp=False)["command"]
    assert not any(a.startswith("--seccomp") for a in unfiltered)


def test_cpus_are_optional(tmp_path):
    assert container_config("i", tmp_path, SandboxLimits(), cpus=1.5)["nano_cpus"] == 1_500_000_000


def test_the_sdk_accepts_the_config(config):
    # The SDK's own conversion (the one containers.create runs) checks every field name and value type.
    containers = pytest.importorskip("docker.models.containers")
    cfg, _ = config
    args = containers._create_container_args({**cfg, "version": "1.41"})
    host = args["host_config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert host["PidsLimit"] == 32 and {u["Name"] for u in host["Ulimits"]} == {"cpu", "nofile", "fsize", "core"}
    assert args["network_disabled"] is True and args["user"] == "65534:65534"


def test_image_paths_must_be_files_in_the_episode_folder(tmp_path):
    work, out = tmp_path / "ep", tmp_path / "out"
    (work / ".images").mkdir(parents=True)
    out.mkdir()
    (work / ".images" / "ok.png").write_bytes(b"\x89PNG")
    (tmp_path / "secret").write_text("x")
    (work / ".images" / "link.png").symlink_to(tmp_path / "secret")
    (work / "dirlink").symlink_to(tmp_path)  # a folder on the way that is a symlink out
    notes = []
    got = host_image_paths(["/episode/.images/ok.png", "/episode/.images/link.png", "/episode/../secret",
                            "/episode/dirlink/secret", "/etc/passwd", "/episode/.images", 7], "/episode", work, 10,
                           notes, out)
    assert [p.read_bytes() for p in got] == [b"\x89PNG"] and len(notes) == 6 and all("refused" in n for n in notes)
    assert all(out in p.parents for p in got)  # copies, made as they were checked
    assert len(host_image_paths(["/episode/.images/ok.png"] * 3, "/episode", work, 2, [], out)) == 2


def _nonblocking(fd):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    return fd


@pytest.fixture
def kernel(tmp_path):
    """kernel.py as a plain child process behind a KernelPipe: the protocol client without Docker."""
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-I", str(KERNEL), str(out_w), str(tmp_path), str(tmp_path)], stdin=req_r,
                            pass_fds=(out_w,), stdout=subprocess.DEVNULL, cwd=tmp_path)
    os.close(req_r)
    os.close(out_w)
    pipe = KernelPipe(_nonblocking(req_w), _nonblocking(out_r))
    assert pipe.read(30)["ready"]
    yield pipe, proc
    proc.kill()
    proc.wait()
    pipe.close()


def test_the_pipe_speaks_the_kernel_protocol(kernel):
    pipe, _ = kernel
    assert pipe.request({"code": "x = 6"}, 10)["error"] is None
    res = pipe.request({"code": "print('out')\nx * 7"}, 10)
    assert res["value"] == "42" and res["stdout"] == "out\n"
    big = "y = " + repr("z" * 200_000) + "\nlen(y)"  # more than a pipe buffer holds: written in pieces
    assert pipe.request({"code": big}, 10)["value"] == "200000"


def test_the_pipe_times_out_and_sees_a_dead_kernel(kernel):
    pipe, proc = kernel
    assert pipe.request({"code": "while True: pass"}, 0.5) is None
    proc.kill()
    proc.wait()
    with pytest.raises(EOFError):
        pipe.read(5)


# ---- with an engine ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def image():
    """The image for real containers: TOOLPATH_DOCKER_IMAGE if set, else one built from this machine's Python."""
    if ENGINE is not None:
        pytest.skip(f"no Docker engine here: {ENGINE}")
    if os.environ.get(IMAGE_ENV):
        return os.environ[IMAGE_ENV]
    import docker

    client = docker.from_env(timeout=120)
    try:
        return build_host_python_image(client)
    except (OSError, subprocess.CalledProcessError, docker.errors.DockerException) as err:
        pytest.skip(f"no image with Python here and none can be built: {err}")
    finally:
        client.close()


def sandbox(image, **limits):
    return DockerSandbox(SandboxLimits(**{"cell_seconds": 10, **limits}), image=image)


@pytest.fixture
def box(image, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-123")  # must never be visible inside
    with sandbox(image, memory_mb=256, processes=32, cpu_seconds=20, file_size_mb=4) as b:
        yield b


def ours():
    """Ids of the toolpath sandbox containers the engine has, running or not."""
    import docker

    client = docker.from_env()
    try:
        return {c.id for c in client.containers.list(all=True, filters={"label": dsb.LABEL})}
    finally:
        client.close()


@needs_engine
def test_state_persists_across_cells(box):
    assert box.isolation == "docker"
    assert box.run("x = 20").value is None
    r = box.run("x += 1\nx * 2")
    assert r.ok and r.value == "42"


@needs_engine
def test_output_and_errors_come_back_and_the_kernel_lives_on(box):
    r = box.run("import os, sys\nprint('py out')\nos.write(1, b'fd out\\n')\nprint('py err', file=sys.stderr)")
    assert "py out" in r.stdout and "fd out" in r.stdout and "py err" in r.stderr
    r = box.run("y = 1\n1 / 0")
    assert "ZeroDivisionError" in r.error and "<cell" in r.error
    assert box.run("y").value == "1" and box.restarts == 0
    r = box.run("print('x' * 100_000)")
    assert len(r.stdout) == box.limits.output_bytes and any("cut to" in n for n in r.notes)


@needs_engine
def test_a_cell_timeout_restarts_the_kernel_in_the_same_container_and_says_so(box):
    box.run("z = 5\nopen('kept.txt', 'w').write('files stay')")
    first = box.container.id
    r = box.run("while True: pass", timeout=1)
    assert "1 s limit" in r.error and "variables are lost" in r.notes[0]
    assert box.container.id == first  # the launcher forked a fresh kernel; /episode (a tmpfs) is as it was
    assert "NameError" in box.run("z").error and box.run("2 + 2").value == "4"
    assert box.run("open('kept.txt').read()").value == "'files stay'"


@needs_engine
def test_a_crash_restarts_the_kernel(box):
    r = box.run("import os\nos._exit(7)")
    assert "the kernel died (exit 7)" in r.error and box.restarts == 1
    assert box.run("3 * 3").value == "9"


@needs_engine
def test_preload_runs_again_after_a_restart(box):
    box.preload("answer = 42")
    box.run("import os\nos._exit(1)")
    assert box.run("answer").value == "42"
    with pytest.raises(SandboxError, match="(?s)preloading the kernel failed.*ModuleNotFoundError"):
        box.preload("import no_such_module_here")
    assert box.run("1 + 1").value == "2"


@needs_engine
def test_running_out_of_memory_is_reported(box):
    r = box.run("x = bytearray(1 << 30)\nx[::4096] = b'x' * len(x[::4096])")
    assert "memory" in r.error.lower() and box.run("1").value == "1"


@needs_engine
def test_no_network_at_all(box):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)  # a host service on loopback: the container's loopback is not the host's
    try:
        port = srv.getsockname()[1]
        r = box.run(f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)")
        assert "ConnectionRefusedError" in r.error
    finally:
        srv.close()
    assert "OSError" in box.run("import socket; socket.create_connection(('1.1.1.1', 80), 2)").error
    assert "gaierror" in box.run("import socket; socket.getaddrinfo('example.com', 80)").error
    assert box.run("import socket; sorted(n for _, n in socket.if_nameindex())").value == "['lo']"


@needs_engine
def test_only_the_episode_folder_and_tmp_are_writable(box):
    for path in ("/etc/evil", "/usr/evil", "/opt/toolpath/kernel.py", "/evil"):
        assert "Read-only file system" in box.run(f"open({path!r}, 'w')").error, path
    assert box.run("open('/tmp/scratch', 'w').write('ok')").value == "2"
    assert box.run("open('note.txt', 'w').write('hello')").ok
    assert (box.workdir / "note.txt").read_text() == "hello"


@needs_engine
def test_nobody_without_privileges_or_host_secrets(box):
    assert box.run("import os; os.getuid(), os.getgid()").value == "(65534, 65534)"
    assert box.run("[l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1]").value \
        == repr("0" * 16)
    env = box.run("import os; dict(os.environ)").value
    assert "sk-host-secret" not in env and "OPENAI_API_KEY" not in env
    assert "PermissionError" in box.run("import os; os.setuid(0)").error


@needs_engine
def test_file_size_and_process_limits_hold(box):
    r = box.run("open('big', 'wb').write(b'x' * (8 << 20))")
    assert "File too large" in r.error or "died" in r.error
    r = box.run("import os, time\nfor _ in range(100):\n    if os.fork() == 0:\n        time.sleep(30); os._exit(0)")
    assert "BlockingIOError" in (r.error or "") or "Resource temporarily unavailable" in (r.error or "")


@needs_engine
def test_images_come_back_as_private_host_copies(box):
    if not box.run("import PIL").ok:
        pytest.skip("Pillow is not in the image")
    r = box.run("from PIL import Image\nfor i in range(12): Image.new('RGB', (8, 8), 'red').show()")
    assert r.ok, r.error
    assert len(r.images) == 10 and any("2 more image" in n for n in r.notes)
    # copied out of the container as they were checked, into a folder only this user can enter
    assert all(p.read_bytes()[:4] == b"\x89PNG" and p.parent.stat().st_mode & 0o777 == 0o700 for p in r.images)


@needs_engine
def test_only_a_process_of_the_container_is_taken_for_its_launcher(box):
    # the launcher's socket sits in a host folder while it connects: a host process that got there first is refused
    assert box._in_container(box._root_pid) and not box._in_container(os.getpid())


@needs_engine
def test_episodes_share_nothing(image):
    with sandbox(image) as a, sandbox(image) as b:
        a.run("secret = 'a'")
        a.run("open('note.txt', 'w').write('a')")
        assert "NameError" in b.run("secret").error
        assert "FileNotFoundError" in b.run("open('note.txt').read()").error
        assert a.container.id != b.container.id and a.workdir != b.workdir


@needs_engine
def test_close_removes_the_container_and_the_folder(image):
    box = sandbox(image).start()
    cid, work = box.container.id, box.workdir
    box.run("open('f', 'w').write('x'); import os; os.makedirs('d/e', exist_ok=True)")
    assert cid in ours()
    box.close()
    assert cid not in ours() and not work.exists()
    box.close()  # twice is fine


@needs_engine
def test_a_missing_image_or_interpreter_is_a_clear_error_and_leaves_nothing(image):
    before = ours()
    with pytest.raises(SandboxError, match="image 'toolpath-no-such-image:0' not found locally; build or load it"):
        sandbox("toolpath-no-such-image:0").start()
    box = DockerSandbox(image=image, python="no-such-python")
    with pytest.raises(SandboxError, match="did not start in Docker.*no-such-python"):
        box.start()
    assert ours() == before and box.workdir is None
    # Too little memory for Python itself: the container starts, then dies before the kernel is ready.
    with pytest.raises(SandboxError, match="did not start in Docker.*out of memory"):
        sandbox(image, memory_mb=6).start()
    assert ours() == before


@needs_engine
def test_a_launcher_that_cannot_install_the_filter_does_not_start(image, monkeypatch):
    """No quiet fallback to the engine's profile alone: a program the kernel refuses is a failed start."""
    before = ours()
    # One instruction of an opcode BPF does not have: prctl answers EINVAL.
    monkeypatch.setattr(DockerSandbox, "_write_seccomp", lambda self, path: path.write_bytes(b"\xff" * 8) > 0)
    with pytest.raises(SandboxError, match="did not start in Docker.*could not install the seccomp filter: Inv"):
        sandbox(image).start()
    assert ours() == before


# A cell whose kernel exits just after it answers: the launcher reports that exit on its control socket.
EXIT_SOON = "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.1), os._exit(1))).start()"
HOST = f"""
import select, sys
from toolpath.sandboxes.docker import DockerSandbox
box = DockerSandbox(image=sys.argv[1]).start()
box.run("x = 1")
if sys.argv[2] == "hang":
    # A report left unread: the killed host's socket then resets the connection rather than closing it.
    box.run({EXIT_SOON!r})
    select.select([box._control], [], [], 30)
print(box.container.id, flush=True)
if sys.argv[2] == "hang":
    sys.stdin.read()  # until killed
"""  # then exits without close()


def _host(image, mode):
    return subprocess.Popen([sys.executable, "-c", HOST, image, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[1])


@needs_engine
def test_a_host_that_forgets_to_close_leaves_no_container(image):
    before = ours()
    host = _host(image, "exit")
    cid = host.stdout.readline().strip()
    assert host.wait(60) == 0 and cid and ours() == before


@needs_engine
def test_a_killed_host_stops_its_container(image):
    import docker

    host = _host(image, "hang")
    cid = host.stdout.readline().strip()
    client = docker.from_env()
    try:
        assert client.containers.get(cid).status == "running"
        host.kill()  # no finalizer runs: the kernel must notice on its own that the host is gone
        host.wait()
        assert client.containers.get(cid).wait(timeout=60)["StatusCode"] == 0  # the kernel's clean exit at EOF
    finally:
        try:
            client.containers.get(cid).remove(force=True)
        except docker.errors.NotFound:
            pass
        client.close()


@pytest.mark.parametrize("isolation", ["bwrap", "unshare"])
def test_a_host_gone_with_reports_unread_ends_the_launcher_cleanly(isolation):
    """The launcher every sandbox starts first (Docker's too) takes a reset control socket, what a host that
    died with the launcher's reports unread leaves, as the host leaving: it ends with status 0, no traceback."""
    from toolpath.sandboxes.process import ProcessSandbox, bwrap_works, unshare_works

    reason = {"bwrap": bwrap_works, "unshare": unshare_works}[isolation]()
    if reason is not None:
        pytest.skip(f"no {isolation} sandbox here: {reason}")
    box = ProcessSandbox(isolation=isolation).start()
    try:
        assert box.run(EXIT_SOON).ok
        assert select.select([box._control], [], [], 30)[0]  # the kernel's exit, reported and left unread
        box._control.close()
        box._control = None
        assert box.proc.wait(timeout=30) == 0, box._startup_log()  # bwrap or unshare end with the launcher
    finally:
        box.close()


@needs_engine
def test_a_task_runs_its_code_in_a_container(image, store):
    """The episode wiring: `sandbox: docker` in a spec gives the python tool a container, with the task's image."""
    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.spec import parse_spec

    root = Path(__file__).resolve().parents[1] / "examples"
    spec = parse_spec({"id": "d", "instruction": "How wide is image_1?", "inputs": {"images": ["assets/bars.png"]},
                       "sandbox": {"kind": "docker", "options": {"image": image, "cell_seconds": 20}},
                       "agent": {"name": "react", "params": {"format": "deepeyes"}}}, base_dir=root)
    script = ["<code>\n```python\nimport os\nprint(image_1.size, os.getuid(), os.getcwd())\n```\n",
              "<answer>320</answer>"]
    r = run_episode(spec, store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "320")
    obs = next(s for s in store.steps(r.run_id) if s["node"] == "tools")["payload"]["observations"][0]["content"]
    assert "(320, 200) 65534 /episode" in obs


def test_unknown_docker_options_are_named(store):
    from toolpath.agents.episode import EpisodeError, run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.spec import parse_spec

    spec = parse_spec({"id": "d", "instruction": "x", "sandbox": {"kind": "docker", "options": {"imag": "x"}}})
    with pytest.raises(EpisodeError, match="sandbox.options.imag: sandbox 'docker' has no option 'imag'; its options: "
                                           "cpu_seconds, .*, images, image, python, pull, cpus, init, base_url"):
        run_episode(spec, store, policy=ScriptedPolicy([]))
