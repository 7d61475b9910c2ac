"""What code in a sandbox leaves on the host: never a file owned by root, never a setuid bit that works, never a
world-writable folder, nothing at all once the sandbox is gone (even when its host was killed).

Every test runs against each sandbox this machine can build (bwrap, unshare, docker); one it cannot is skipped
with the reason. The other security files import `KINDS` and `open_box` from here.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolpath.sandboxes.base import SandboxLimits
from toolpath.sandboxes.docker import IMAGE_ENV, DockerSandbox, docker_works
from toolpath.sandboxes.process import ProcessSandbox, bwrap_works, unshare_works

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("bwrap", "unshare", "docker")
_reasons: dict[str, str | None] = {}
_image: list[str] = []


def reason_missing(kind: str) -> str | None:
    """Why this machine cannot build a sandbox of `kind` (None when it can), asked once per kind."""
    if kind not in _reasons:
        _reasons[kind] = {"bwrap": bwrap_works, "unshare": unshare_works, "docker": docker_works}[kind]()
    return _reasons[kind]


def docker_image() -> str:
    """$TOOLPATH_DOCKER_IMAGE, else an image built from this machine's own Python (made once, then reused)."""
    if not _image:
        if os.environ.get(IMAGE_ENV):
            _image.append(os.environ[IMAGE_ENV])
        else:
            import docker

            from toolpath.sandboxes.docker_image import build_host_python_image

            client = docker.from_env(timeout=120)
            try:
                _image.append(build_host_python_image(client))
            finally:
                client.close()
    return _image[0]


def open_box(kind: str, **limits):
    """A started sandbox of `kind` with these limits (cell_seconds 10 unless given), or a skip saying why not."""
    reason = reason_missing(kind)
    if reason is not None:
        pytest.skip(f"no {kind} sandbox here: {reason}")
    lim = SandboxLimits(**{"cell_seconds": 10, **limits})
    box = DockerSandbox(lim, image=docker_image()) if kind == "docker" else ProcessSandbox(lim, isolation=kind)
    return box.start()


@pytest.fixture(params=KINDS)
def box(request):
    b = open_box(request.param)
    yield b
    b.close()


def as_nobody():
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)


def test_a_setuid_copy_made_inside_gives_no_privilege_on_the_host(box):
    # /usr/bin/id tells its effective ids; an image without it still has its Python to copy
    r = box.run("import shutil, os, sys\nsrc = '/usr/bin/id' if os.path.exists('/usr/bin/id') else sys.executable\n"
                "shutil.copy(src, '/episode/rootid')\nos.chmod('/episode/rootid', 0o6755)\nsrc")
    assert r.ok, r.error
    copy = box.workdir / "rootid"
    assert copy.stat().st_mode & 0o6000  # the bits are set...
    assert copy.stat().st_uid != 0 and copy.stat().st_gid != 0  # ...but never on a file of host root's
    assert os.statvfs(box.workdir).f_flag & os.ST_NOSUID  # and they mean nothing where the file lies
    if os.getuid() == 0 and r.value == "'/usr/bin/id'":  # what the attacker would do: run it as another user
        try:
            out = subprocess.run([str(copy)], capture_output=True, text=True, preexec_fn=as_nobody, timeout=30)
        except PermissionError:  # it cannot even reach the sandbox's files: better still
            return
        assert "euid=0" not in out.stdout and "egid=0" not in out.stdout, out.stdout


def test_the_episode_folder_is_not_world_writable_nor_a_host_folder(box):
    box.run("open('note.txt', 'w').write('x')")
    mode = box.workdir.stat().st_mode
    assert not mode & 0o002
    # it lives in the sandbox's own mount namespace, reached through /proc while the sandbox runs
    assert str(box.workdir).startswith("/proc/") and (box.workdir / "note.txt").read_text() == "x"


def test_files_the_sandbox_writes_are_not_the_host_roots(box):
    box.run("import os\nos.makedirs('d/e')\nopen('d/e/f', 'w').write('x')")
    assert all(p.stat().st_uid != 0 for p in [box.workdir / "d", box.workdir / "d/e", box.workdir / "d/e/f"])


def test_an_artifact_copy_keeps_no_setuid_bit(box, store):
    box.run("import os\nopen('/episode/s.bin', 'wb').write(b'x')\nos.chmod('/episode/s.bin', 0o6755)")
    assert box.workdir.joinpath("s.bin").stat().st_mode & 0o6000  # set inside (and meaningless: nosuid)
    ref = store.put_artifact(box.workdir / "s.bin", name="s.bin")
    st = os.stat(ref.path)
    assert not st.st_mode & 0o7000 and st.st_uid == os.getuid()


def test_close_leaves_nothing(box):
    box.run("open('/episode/f', 'w').write('x')\nimport os\nos.makedirs('/episode/d/e', exist_ok=True)")
    work = box.workdir
    assert work.exists()
    box.close()
    assert not work.exists()


HOST = """
import sys
from toolpath.sandboxes.base import SandboxLimits
from toolpath.sandboxes.process import ProcessSandbox
from toolpath.sandboxes.docker import DockerSandbox
kind = sys.argv[1]
box = (DockerSandbox(image=sys.argv[2]) if kind == "docker" else ProcessSandbox(isolation=kind)).start()
box.run("open('/episode/left.txt', 'w').write('x' * 1000)")
print(box.workdir, getattr(getattr(box, "container", None), "id", ""), flush=True)
sys.stdin.read()  # until killed
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_host_leaves_no_episode_folder(kind):
    if reason_missing(kind) is not None:
        pytest.skip(f"no {kind} sandbox here: {reason_missing(kind)}")
    image = docker_image() if kind == "docker" else ""
    host = subprocess.Popen([sys.executable, "-c", HOST, kind, image], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    work, _, container = host.stdout.readline().strip().partition(" ")
    work = Path(work)
    try:
        assert (work / "left.txt").exists()
        host.send_signal(signal.SIGKILL)  # no close(), no finalizer: the sandbox must go by itself
        host.wait()
        deadline = time.monotonic() + 60
        while work.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not work.exists()
    finally:
        host.kill()
        host.wait()
        if container:  # stopped, as its launcher ended; remove it
            import docker

            client = docker.from_env()
            try:
                client.containers.get(container).remove(force=True)
            finally:
                client.close()
