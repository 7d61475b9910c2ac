"""toolpath: a graph-based runtime for tool-using multimodal agents."""

import os

# Torch's OpenMP threads spin while they wait for each other. On a machine other work also uses, a spinning thread
# holds a core another thread needs, and a small model's generation ran several times slower with two threads than
# with one; sleeping while waiting (PASSIVE) avoids that. libgomp reads this once, when torch first loads it, so it
# is set here, before anything imports torch; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
