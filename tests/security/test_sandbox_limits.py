"""A sandbox limit of the wrong kind or out of range, in a task spec: `toolpath run` exits 2 naming the file and
the field, with no traceback, and nothing is started or stored."""

import pytest
from conftest import toolpath_cli, write

from toolpath.sandboxes.base import LIMIT_RANGES, SandboxError, SandboxLimits


@pytest.mark.parametrize("field, value", [("memory_mb", -5), ("memory_mb", "2g"), ("cpu_seconds", 0),
                                          ("cell_seconds", ".nan"), ("cell_seconds", "true"), ("disk_mb", 1 << 40),
                                          ("images", -1), ("processes", 2.5), ("output_bytes", "null")])
def test_a_bad_limit_in_a_spec_exits_2_naming_it(tmp_path, home, field, value):
    write(tmp_path / "r.yaml", "- done\n")
    spec = write(tmp_path / "task.yaml", f"id: t\ninstruction: x\nmodel: scripted:r.yaml\n"
                                         f"sandbox: {{kind: process, options: {{{field}: {value}}}}}\n")
    r = toolpath_cli("run", spec, home=home)
    assert r.returncode == 2, r.stderr
    assert str(spec) in r.stderr and f"sandbox.options.{field}: expected" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert "no runs yet" in toolpath_cli("runs", "list", home=home).stdout


def test_every_limit_is_checked_in_python_too():
    for name, (low, high, _) in LIMIT_RANGES.items():
        for bad in (low - 1, high * 2, True, "1", None):
            with pytest.raises(SandboxError, match=f"sandbox.options.{name}: expected"):
                SandboxLimits(**{name: bad})
        SandboxLimits(**{name: high})
