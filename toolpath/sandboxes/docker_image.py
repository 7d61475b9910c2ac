"""An image with this machine's own Python, for Docker engines that cannot pull one (air-gapped, CI, this project's
test machine): `docker import` of a root file system holding the interpreter, its standard library, Pillow when
installed, and the shared libraries they load, at /usr/local like the official python images.

    python -m toolpath.sandboxes.docker_image [TAG]      # prints the tag; reused if it exists
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def build_host_python_image(client, tag: str | None = None) -> str:
    """Import an image holding this machine's own Python (its standard library, plus Pillow when installed) and
    the shared libraries they load, at /usr/local like the official images. Returns its tag; reused if present."""
    import sysconfig

    import docker

    tag = tag or f"toolpath-python:{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}-host"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "dist-packages"}
    files = {f"usr/local/bin/{ver}": exe}  # path in the image -> host path
    trees = {str(stdlib): f"usr/local/lib/{ver}"}
    try:
        import PIL

        pil = Path(PIL.__file__).parent
        trees[str(pil)] = f"usr/local/lib/{ver}/site-packages/PIL"
        if (pil.parent / "pillow.libs").is_dir():
            trees[str(pil.parent / "pillow.libs")] = f"usr/local/lib/{ver}/site-packages/pillow.libs"
    except ImportError:
        pil = None
    objects = [exe] + [str(p) for p in (stdlib / "lib-dynload").glob("*.so") if "_tkinter" not in p.name]
    objects += [str(p) for p in pil.glob("*.so")] if pil else []
    # ldd exits non-zero when one object is static; what it printed for the others is still right.
    for line in subprocess.run(["ldd", *objects], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > 3 and parts[2].startswith("/") and "pillow.libs" not in parts[2]:
            files[f"usr/lib/{parts[0]}"] = os.path.realpath(parts[2])  # a default search directory of the loader
        elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
            files[parts[0].lstrip("/")] = os.path.realpath(parts[0])  # the loader, at the path binaries name

    def root_owned(info):
        name = Path(info.name).name
        if name in skip or name.startswith("config-") or name.startswith("_tkinter"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tempfile.TemporaryDirectory() as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        with tarfile.open(rootfs, "w") as tar:
            for d in ("usr", "usr/local", "usr/local/bin", "usr/local/lib", f"usr/local/lib/{ver}/site-packages",
                      "usr/lib", "lib64", "etc", "tmp", "episode"):
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
                tar.addfile(info)
            for src, dst in trees.items():
                tar.add(src, dst, filter=root_owned)
            for dst, src in files.items():
                tar.add(src, dst, filter=root_owned)
            for alias in ("python3", "python"):
                info = tarfile.TarInfo(f"usr/local/bin/{alias}")
                info.type, info.linkname = tarfile.SYMTYPE, ver
                tar.addfile(info)
        with open(rootfs, "rb") as f:
            repo, _, version = tag.partition(":")
            client.api.import_image(src=f, repository=repo, tag=version or "latest",
                                    changes=["ENV PATH=/usr/local/bin:/usr/bin:/bin"])
    client.images.get(tag)
    return tag


def main() -> None:
    import docker

    client = docker.from_env(timeout=120)
    try:
        print(build_host_python_image(client, sys.argv[1] if len(sys.argv) > 1 else None))
    finally:
        client.close()


if __name__ == "__main__":
    main()
