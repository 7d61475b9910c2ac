"""toolpath: a graph-based runtime for tool-using multimodal agents."""

import os

# Torch's OpenMP threads (libgomp) spin for a long while (300,000 turns) before they sleep when waiting for each
# other. On a machine other work also uses, a spinning thread holds a core the thread it waits for needs, and a
# small model's generation ran many times slower with two threads than with one. A short spin keeps the speed of a
# quiet machine and sleeps soon enough on a busy one (benchmarks/omp_wait.py). libgomp reads this once, when torch
# first loads it, so it is set here, before anything imports torch; a wait policy the user chose is kept.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")

__version__ = "0.1.0"
