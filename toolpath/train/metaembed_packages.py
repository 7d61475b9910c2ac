"""The docstrings of the installed packages as MetaEmbed training and test pairs, and the manifest that pins them.

Each top-level package of the environment's site-packages is one document of the split (so a held-out query
never comes from a package seen in training, where near-duplicate docstrings of sibling functions would make
the test easy). Its modules are read in a fixed order (by a hash of their path, so no alphabetical corner of a
big package dominates) until `per_package` pairs are found: a few huge packages (generated plotting validators,
machine-learning frameworks) would otherwise be most of the data and most of the reading time.

The pairs follow from the installed versions alone; `manifest` records them (top-level package -> distribution
and version), so the set is reproduced by installing the same versions.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PER_PACKAGE = 300
MAX_FILE_BYTES = 300_000  # larger modules are generated tables and validators, not prose
_SKIP_PARTS = {"test", "tests", "testing", "_vendor", "vendor", "vendored", "__pycache__", "examples", "benchmarks"}


def site_packages() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def top_level_packages(root: Path) -> list[str]:
    """Importable top-level names under root: package folders and single-module files, sorted."""
    names = set()
    for p in root.iterdir():
        if p.name.startswith(".") or p.name.endswith((".dist-info", ".egg-info", ".data")) or "-" in p.name:
            continue
        if p.is_dir() and p.name not in _SKIP_PARTS and any(p.glob("*.py")):
            names.add(p.name)
        elif p.suffix == ".py" and p.stem != "__init__":
            names.add(p.stem)
    return sorted(names)


def package_files(root: Path, name: str) -> list[Path]:
    """The package's modules in reading order: by a hash of the path relative to site-packages."""
    single = root / f"{name}.py"
    if single.is_file():
        return [single]
    files = [p for p in (root / name).rglob("*.py")
             if not set(p.relative_to(root).parts[:-1]) & _SKIP_PARTS and p.stat().st_size <= MAX_FILE_BYTES]
    return sorted(files, key=lambda p: hashlib.sha256(str(p.relative_to(root)).encode()).hexdigest())


@functools.cache
def _owners() -> dict[str, list[str]]:
    """top-level name -> the distributions that install it (reading every installed RECORD: once a process)."""
    from importlib.metadata import packages_distributions

    return packages_distributions()


def manifest(names: list[str]) -> dict[str, str]:
    """top-level package -> "distribution==version" (or "" for a name no installed distribution claims)."""
    from importlib.metadata import PackageNotFoundError, version

    owners = _owners()
    out = {}
    for name in names:
        dists = sorted(owners.get(name, []))
        try:
            out[name] = f"{dists[0]}=={version(dists[0])}" if dists else ""
        except PackageNotFoundError:
            out[name] = ""
    return out
