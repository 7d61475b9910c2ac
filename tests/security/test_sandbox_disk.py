"""What a sandbox may write is bounded: /episode, /tmp and /dev/shm hold at most `disk_mb` each, memory-backed
and inside the sandbox (never the host's /tmp), and a write past that is told to the model as such."""

import ast
import os

import pytest

from security.test_sandbox_escalation import KINDS, open_box

# 2 MB files, each well under file_size_mb: only the folder's size stops it
FILL = ("import os\nos.makedirs({path!r}, exist_ok=True)\nfor i in range(40):\n"
        "    with open(os.path.join({path!r}, 'f%d' % i), 'wb') as f:\n"
        "        f.write(b'x' * (2 << 20))")
# The file system a folder lives on, seen from inside: its type (from the mount table, by device), its size and
# the bytes used on it. Measured on the sandbox's own mount, never on the host's /tmp that others write to.
MOUNT = ("import os\ndev = os.stat({path!r}).st_dev\nst = os.statvfs({path!r})\n"
         "kind = next(l.split(' - ')[1].split()[0] for l in open('/proc/self/mountinfo')\n"
         "            if l.split()[2] == '%d:%d' % (os.major(dev), os.minor(dev)))\n"
         "(kind, st.f_blocks * st.f_frsize, (st.f_blocks - st.f_bfree) * st.f_frsize)")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["/episode/fill", "/tmp/fill", "/dev/shm/fill"])
def test_each_writable_folder_is_bounded_and_a_full_one_is_reported(kind, path):
    box = open_box(kind, disk_mb=16)
    try:
        r = box.run(FILL.format(path=path))
        assert "No space left on device" in r.error
        assert any("lack of space" in n and "disk_mb" in n and "16 MB" in n for n in r.notes)
        used = box.run(f"import os\nsum(os.path.getsize(os.path.join({path!r}, f)) for f in os.listdir({path!r}))")
        assert int(used.value) <= 16 << 20
        # what it wrote sits on a memory-backed file system of the sandbox's own, no larger than disk_mb: none
        # of the 80 MB it tried can have gone to a host disk
        fs, size, on_fs = ast.literal_eval(box.run(MOUNT.format(path=path)).value)
        assert fs == "tmpfs" and size <= 16 << 20 and on_fs >= int(used.value) > 8 << 20
        assert box.run(f"import shutil; shutil.rmtree({path!r}); open('/episode/ok', 'w').write('x')").ok
    finally:
        box.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_episode_folder_is_a_bounded_tmpfs(kind):
    box = open_box(kind, disk_mb=24)
    try:
        st = os.statvfs(box.workdir)
        assert st.f_blocks * st.f_frsize <= 24 << 20
    finally:
        box.close()


def test_system_v_shared_memory_is_bounded_in_the_unshare_sandbox():
    # bwrap cannot set its IPC namespace's limits (see "still weak" in the README); unshare and Docker can
    box = open_box("unshare", disk_mb=16)
    try:
        r = box.run("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "shmid = libc.shmget(0, ctypes.c_size_t(64 << 20), 0o1600)\n"
                    "assert shmid >= 0, 'shmget refused, errno %d' % ctypes.get_errno()")
        assert "shmget refused" in r.error
    finally:
        box.close()
