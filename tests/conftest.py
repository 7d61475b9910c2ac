import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import toolpath  # noqa: F401  (sets how long OpenMP threads spin before any test imports torch)

ROOT = Path(__file__).resolve().parents[1]

# Real data sets, where a checkout keeps them in a folder beside the repository. The package never looks
# outside itself for data; the tests point the benchmarks' variables at this folder when it is there (a user's
# own setting wins), and the tests that need the data skip without it.
SHARED_DATA = ROOT.parent / "shared" / "data"
for _var, _folder in {"TOOLPATH_MINDCUBE_DIR": "mindcube", "TOOLPATH_OMNI3D_DIR": "omni3d_bench",
                      "TOOLPATH_WEBARENA_DATA": "webarena", "TOOLPATH_OSWORLD_G": "osworld_g",
                      "TOOLPATH_SCREENSPOT": "screenspot", "TOOLPATH_VABENCH": "vabench"}.items():
    if (SHARED_DATA / _folder).is_dir():
        os.environ.setdefault(_var, str(SHARED_DATA / _folder))

# The default engine (policies/engines) would export each local model for ONNX Runtime on first use in every
# fresh TOOLPATH_HOME; the suite runs models on torch unless a test names an engine (tests/test_engine.py) or
# unpins the default itself (tests/test_engine_default.py). Subprocesses inherit it.
os.environ["TOOLPATH_ENGINE"] = "torch"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh TOOLPATH_HOME per test, so runs never leak between tests."""
    h = tmp_path / "home"
    monkeypatch.setenv("TOOLPATH_HOME", str(h))
    return h


@pytest.fixture
def store(home):
    from toolpath.runs import Store

    s = Store(home)
    yield s
    s.close()


@pytest.fixture(scope="session")
def bundled_model_folder(tmp_path_factory):
    """The bundled GGUF model converted to safetensors once for the whole session (None without the package).
    Conversion has its own tests (test_local_model.py); others link this folder into their home instead of
    converting it again, which costs tens of seconds each time."""
    from toolpath.policies.hf import convert_gguf
    from toolpath.policies.local import bundled_gguf

    gguf = bundled_gguf()
    if gguf is None:
        return None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLPATH_HOME", str(tmp_path_factory.mktemp("converted-bundled-model")))
        return convert_gguf(gguf)


def link_model(folder: Path | None, home: Path) -> None:
    """Make a converted model folder part of `home`'s models, where the loader looks for it."""
    if folder is not None:
        (home / "models").mkdir(parents=True, exist_ok=True)
        (home / "models" / folder.name).symlink_to(folder, target_is_directory=True)


def toolpath_cli(*args, home=None, env=None, timeout=120, cwd=None):
    """Run the real console entry point in a subprocess, as a user would."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if home is not None:
        e["TOOLPATH_HOME"] = str(home)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "toolpath.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd or ROOT)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_old_runs_table(home: Path, *, pid: bool) -> "sqlite3.Connection":
    """A runs.db as an older toolpath wrote it: the runs table of the first release (`pid` added later, nesting
    later still), no other table. Returns the open connection for the test's own rows."""
    import sqlite3

    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "runs.db")
    conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, spec TEXT NOT NULL, model TEXT "
                 "NOT NULL, agent TEXT NOT NULL, status TEXT NOT NULL, answer TEXT, error TEXT, score REAL, steps "
                 "INTEGER NOT NULL DEFAULT 0, tokens_in INTEGER NOT NULL DEFAULT 0, tokens_out INTEGER NOT NULL "
                 "DEFAULT 0, seconds REAL NOT NULL DEFAULT 0, eval_id TEXT, " + ("pid INTEGER, " if pid else "")
                 + "created REAL NOT NULL, updated REAL NOT NULL)")
    conn.commit()
    return conn
