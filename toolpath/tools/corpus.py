"""Walking a corpus folder safely, and reading its files with a bound: the one way search and retrieve reach
the documents and images they index.

The folder is named by the user, but what lies in it may come from anyone (a downloaded collection, a shared
drive, an unpacked archive): a link in it may point at /etc/shadow, a FIFO blocks the first open() for ever,
a multi-gigabyte file would be read whole into memory. So a corpus file is a regular file that lies inside the
corpus once links are resolved, no larger than the bound; anything else is skipped and named once with the
reason, never fatal to the rest of the corpus.

    TOOLPATH_CORPUS_MAX_MB=32    the largest corpus file read, in MiB (text and images alike)
"""

from __future__ import annotations

import errno
import io
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .registry import ToolError

MAX_MB_VAR = "TOOLPATH_CORPUS_MAX_MB"
DEFAULT_MAX_MB = 32

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class Unreadable(OSError):
    """A corpus file that is not read, and why (an OSError, so the callers' "cannot read" handling covers it)."""


@dataclass
class Corpus:
    root: Path
    files: list[Path] = field(default_factory=list)  # real paths: regular, inside root, within the bound; sorted
    skipped: list[str] = field(default_factory=list)  # "relative/name: why", one per file


def max_file_bytes() -> int:
    raw = os.environ.get(MAX_MB_VAR, "").strip()
    if not raw:
        return DEFAULT_MAX_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not 0 < mb <= 1 << 20:
        raise ToolError(f"{MAX_MB_VAR}={raw!r} is not a size: give the largest corpus file in MiB, e.g. 32")
    return int(mb * (1 << 20))


def corpus_root(var: str, what: str, suffixes: tuple[str, ...], instead: str = "") -> Path:
    """The corpus folder a tool reads, from the environment variable `var`; a ToolError naming the variable when
    it is unset or names nothing (`instead`: what the tool could be given in its place, said in that error)."""
    value = os.environ.get(var, "").strip()
    if not value:
        raise ToolError(f"{what} has no corpus: set {var} to a folder of {' '.join(suffixes)} files"
                        + (f" (or {instead})" if instead else ""))
    path = Path(value).expanduser().resolve()
    if not path.exists():
        raise ToolError(f"{what}: {var}={value!r} does not exist")
    return path


def _too_large(size: int, limit: int) -> str:
    return f"{size / (1 << 20):.1f} MiB, over the {limit / (1 << 20):g} MiB bound ({MAX_MB_VAR})"


def _kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular one."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check(path: Path, root: str, limit: int) -> tuple[str | None, str]:
    """(the real path to read, "") for a file the corpus may read, else (None, why). Only stat calls: nothing
    is opened, so a FIFO or a device cannot block or react here."""
    try:
        real = os.path.realpath(path, strict=True)
    except (OSError, RuntimeError) as err:  # a loop gives ELOOP (or RuntimeError from older Pythons)
        loop = isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP
        return None, "a link loop" if loop else f"a broken link ({getattr(err, 'strerror', None) or err})"
    if not _inside(real, root):
        return None, "a link that leaves the corpus"
    try:
        st = os.stat(real)
    except OSError as err:
        return None, f"cannot read ({err.strerror or err})"
    kind = _kind(st.st_mode)
    if kind:
        return None, f"{kind}, not a regular file"
    if st.st_size > limit:
        return None, _too_large(st.st_size, limit)
    return real, ""


def walk(root: Path, suffixes: tuple[str, ...]) -> Corpus:
    """The corpus files under root with one of the suffixes, sorted so an index (and its cache key) does not
    depend on directory order. Hidden files and folders are never content (.git, .cache). Links to folders are
    not followed (a loop, or the same files twice); a link to a file is read where it points, if that is inside."""
    limit = max_file_bytes()
    root = Path(os.path.realpath(root))
    corpus = Corpus(root)
    base = str(root)
    if not root.is_dir():
        real, why = _check(root, base, limit)
        if root.suffix.lower() in suffixes:
            corpus.files += [Path(real)] if real else []
            corpus.skipped += [] if real else [f"{root.name}: {why}"]
        return corpus
    seen: set[str] = set()

    def unlisted(err: OSError) -> None:
        corpus.skipped.append(f"{_relative(err.filename, root)}/: cannot list ({err.strerror or err})")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted):
        here = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            if (here / d).is_symlink():
                corpus.skipped.append(f"{_relative(here / d, root)}/: a link to a folder, not followed")
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in suffixes:
                continue
            real, why = _check(here / name, base, limit)
            if real is None:
                corpus.skipped.append(f"{_relative(here / name, root)}: {why}")
            elif real not in seen:  # two links to one file: index it once
                seen.add(real)
                corpus.files.append(Path(real))
    corpus.files.sort()
    corpus.skipped.sort()
    return corpus


def _relative(path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The whole file, if it is a regular file within the bound; else Unreadable naming why. The open cannot
    block (O_NONBLOCK: a FIFO put in a file's place after the walk answers at once) and follows no final link
    (the walk gave the real path); the type and size are checked on the open descriptor, and the read stops
    at the bound even if the file grows meanwhile."""
    limit = max_file_bytes() if limit is None else limit
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind:
            raise Unreadable(f"{kind}, not a regular file")
        if st.st_size > limit:
            raise Unreadable(_too_large(st.st_size, limit))
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise Unreadable(_too_large(total, limit))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")


def open_image(path: Path):
    """A PIL image of the file, not yet decoded (so JPEG draft mode still applies), refused when its header
    claims more pixels than PIL's own bomb limit: decoding it would take gigabytes."""
    from PIL import Image

    try:
        im = Image.open(io.BytesIO(read_bytes(path)))
    except Image.DecompressionBombError as err:  # over twice the limit: PIL refuses at the header already
        raise Unreadable(str(err)) from None
    if im.width * im.height > (Image.MAX_IMAGE_PIXELS or float("inf")):
        im.close()
        raise Unreadable(f"{im.width}x{im.height} pixels, over the {Image.MAX_IMAGE_PIXELS:,} pixel bound")
    return im
