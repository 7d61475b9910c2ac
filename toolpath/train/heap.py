"""Keeping freed memory in the process for reuse, for training loops that allocate the same large tensors every
step (a dense gradient of a 49k-row embedding table, the optimiser's temporaries).

glibc serves each allocation above its mmap threshold with a fresh mapping and unmaps it when freed, so every
step touches those pages anew, and on a virtual machine a page fault is slow: in a profile of one connector step
the zeroing and summing of the embedding's gradient took longer than the language model's matrix products.
Serving every allocation from the heap and never trimming it back makes the second step reuse the first's pages.
The cost is that the process keeps its peak memory until it exits, which a build process does anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_MAX = -4


def reuse_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse; False where the C library is not glibc (nothing changes)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
