"""Importing toolpath makes torch's OpenMP threads sleep while they wait (benchmarks/omp_wait.py measures why),
unless the user chose a wait policy."""

import os
import subprocess
import sys

from conftest import ROOT

PROBE = "import os, toolpath; print(os.environ['OMP_WAIT_POLICY'])"


def _policy(env_value):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_the_default_is_passive_and_a_users_choice_is_kept():
    assert _policy(None) == "PASSIVE"
    assert _policy("ACTIVE") == "ACTIVE"
