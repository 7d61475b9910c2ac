"""The documentation: the README stays short and its links land, and the MkDocs site builds strictly
(a broken link, a missing page or an API page whose module moved fails here, not on a reader)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 200


def _readme_links() -> list[str]:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    return [t for t in targets if "://" not in t]


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the reference lives in docs/"


def test_readme_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    for command in ("make demo", "make test"):
        assert command in text


def test_readme_links_exist():
    links = _readme_links()
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None
                    or importlib.util.find_spec("material") is None
                    or importlib.util.find_spec("mkdocstrings_handlers") is None,
                    reason="mkdocs, mkdocs-material or mkdocstrings-python is not installed (the dev extra has them)")
def test_site_builds_strictly(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").exists()
