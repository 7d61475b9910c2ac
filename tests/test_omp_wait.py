"""Importing toolpath shortens how long torch's OpenMP threads spin before they sleep (benchmarks/omp_wait.py
measures why), unless the user chose a wait policy or a spin count."""

import os
import subprocess
import sys

from conftest import ROOT

PROBE = "import os, toolpath; print(os.environ.get('GOMP_SPINCOUNT'))"


def _spin_count(**env_values):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_values, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_a_short_spin_by_default_and_a_users_choice_is_kept():
    assert _spin_count() == "10000"
    assert _spin_count(GOMP_SPINCOUNT="500") == "500"
    assert _spin_count(OMP_WAIT_POLICY="ACTIVE") == "None"  # the user's policy decides the spin
