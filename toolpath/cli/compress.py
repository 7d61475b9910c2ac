"""`toolpath compress MODEL --method M [--bits N] [--option KEY=VALUE ...] --out DIR [--json]`.

Everything is checked before any work (the method, its typed options, the output folder, the model); the method
writes into a hidden sibling folder `.DIR.tmp-XXXX`, compression.json is added, and only then is it renamed to
DIR, so a failure or an interrupt leaves nothing under DIR. The compress holds a lock on its temporary folder
while it runs; one that nothing holds was left by a compress that was killed, and the next compress of the same
DIR removes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from ..policies.base import PolicyError
from ..progress import say
from .common import EXIT_FAILED, EXIT_OK, BadInput, echo, echo_json, error


def _options(pairs: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--option {pair!r}: expected KEY=VALUE")
        if key.strip() == "bits":
            raise BadInput(f"--option {pair!r}: give the bit-width as --bits")
        out[key.strip()] = value.strip()
    return out


# How kinds.options names a bad field of the compressor family ("compress.group_size: ..."), at the start of the
# message or after the "; " between two problems; the command line's user wrote it as a flag.
_FIELD = "compress"
_NAMED = re.compile(rf"(^|; ){_FIELD}(?:\.(\w+))?: ")


def typed_options(kind, bits: float | None, pairs: dict[str, str]):
    """`--bits` and the `--option` pairs validated into the method's Options; one BadInput naming each bad one
    as the flag that set it ("gptq --option nsamples: ...", "rtn --bits: ...")."""
    from ..kinds import options

    values = {**pairs, **({} if bits is None else {"bits": bits})}
    try:
        return options(kind, values, _FIELD)
    except ValueError as err:
        def flag(m: re.Match) -> str:
            name = m.group(2)
            where = "" if name is None else " --bits" if name == "bits" else f" --option {name}"
            return f"{m.group(1)}{kind.name}{where}: "
        raise BadInput(_NAMED.sub(flag, str(err))) from None


def _out_dir(text: str) -> Path:
    out = Path(text).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput(f"--out {out}: already exists and is not an empty folder")
    if not out.parent.is_dir():
        raise BadInput(f"--out {out}: its parent folder {out.parent} does not exist")
    return out


def _lock(folder: Path) -> int:
    """An exclusive lock on `folder`, held until the returned descriptor is closed (or the process dies)."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove_stale_temporaries(out: Path) -> list[Path]:
    """Remove the `.OUT.tmp-*` folders beside `out` that no running compress holds; returns them."""
    import fcntl

    removed = []
    prefix = f".{out.name}.tmp-"  # compared as text: the name may hold glob's special characters
    for tmp in out.parent.iterdir():
        if not tmp.name.startswith(prefix) or tmp.is_symlink() or not tmp.is_dir():
            continue
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a running compress holds it
            continue
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
        finally:
            os.close(fd)
    return removed


def cmd_compress(args) -> int:
    from ..compress import compressor
    from ..compress.source import check_source

    try:
        kind = compressor(args.method)
    except ValueError as err:  # an unknown method, a plugin that cannot be loaded or is not a compressor
        raise BadInput(f"--method {args.method}: {err}") from None
    options = typed_options(kind, args.bits, _options(args.option))
    try:
        check_source(args.model)
    except ValueError as err:
        raise BadInput(str(err)) from None
    out = _out_dir(args.out)
    for stale in remove_stale_temporaries(out):
        error(f"removed {stale}, left by an interrupted compress of {out}")
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    held = _lock(tmp)
    started = time.perf_counter()
    try:
        result = kind.compress(args.model, tmp, options=options, log=say)
        record = {"method": args.method, "source": args.model, "bits": getattr(options, "bits", None),
                  "options": options.model_dump(mode="json"), **(result or {}),
                  "seconds": round(time.perf_counter() - started, 1)}
        (tmp / "compression.json").write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
        if out.exists():
            out.rmdir()  # checked empty above
        os.replace(tmp, out)
    except ValueError as err:  # bad option values and the like, found by the method before its work
        raise BadInput(str(err)) from None
    except PolicyError as err:  # the model would not load (missing package, broken folder)
        error(f"cannot compress {args.model}: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # the temporary folder goes below; nothing half-written is left under --out
        error(f"interrupted: nothing was written to {out}; run the same command again to start over")
        return 130  # the shell's code for Ctrl-C, as main returns for any interrupted command
    finally:
        os.close(held)
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        echo_json({"out": str(out), **record})
    else:
        echo(f"{args.method}: wrote {out} ({record['seconds']} s); load it with model: hf:{out}")
    return EXIT_OK
