"""Models loaded once per process: the one cache every loader of a model (a policy, a tool's network, an OCR
engine) keeps what it loaded in.

    _MODELS = LoadedOnce("depth models")
    model, processor = _MODELS.get(path, lambda: load(path))

- Each key is loaded once: two threads asking for the same model wait for one load (a lock per key; different
  keys load side by side).
- A failed load is not kept: the error goes to the caller, and the next call loads again.
- What is held is counted (`bytes_held`, `held()`): a torch module's parameters and buffers, an array's bytes,
  summed through tuples, lists, dicts and an object's `model`. A cache may be bounded (`max_items`,
  `max_bytes`): the least recently used entries go first, never one being loaded or held with `hold()`.
- `clear()` (one cache) and `clear_all()` (every cache: tests) forget what is held.

Floor 0: it imports nothing of toolpath, and nothing heavy (a model's size is read from the object itself).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
_CACHES: weakref.WeakSet[LoadedOnce] = weakref.WeakSet()


@dataclass
class _Entry:
    value: Any
    nbytes: int
    holds: int = 0


@dataclass
class _Loading:
    lock: threading.Lock
    waiting: int = 0


class LoadedOnce:
    """Loaded models by key; `what` names them in `held()`."""

    def __init__(self, what: str, *, max_items: int | None = None, max_bytes: int | None = None):
        self.what, self.max_items, self.max_bytes = what, max_items, max_bytes
        self._lock = threading.Lock()  # guards the two tables below, never held while a model loads
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()  # least recently used first
        self._loading: dict[Hashable, _Loading] = {}
        _CACHES.add(self)

    def get(self, key: Hashable, load: Callable[[], T], size: Callable[[T], int] | None = None) -> T:
        """The value kept under `key`, loaded by `load()` the first time (by one thread; the others wait for it).
        `size(value)` gives its bytes where `weight_bytes` cannot see them."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key].value
            loading = self._loading.setdefault(key, _Loading(threading.Lock()))
            loading.waiting += 1
        try:
            with loading.lock:
                with self._lock:
                    if key in self._entries:  # another thread loaded it while this one waited
                        self._entries.move_to_end(key)
                        return self._entries[key].value
                value = load()  # an error propagates and nothing is kept: the next caller loads again
                nbytes = size(value) if size is not None else weight_bytes(value)
                with self._lock:
                    self._entries[key] = _Entry(value, nbytes)
                    self._evict(keep=key)
                return value
        finally:
            with self._lock:
                loading.waiting -= 1
                if not loading.waiting:
                    del self._loading[key]

    @contextlib.contextmanager
    def hold(self, key: Hashable, load: Callable[[], T], size: Callable[[T], int] | None = None) -> Iterator[T]:
        """`get`, and the entry is not evicted until the block ends."""
        value = self.get(key, load, size)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.holds += 1
        try:
            yield value
        finally:
            with self._lock:
                if entry is not None:
                    entry.holds -= 1
                self._evict()

    def _evict(self, keep: Hashable = None) -> None:
        """Drop least recently used entries, not held and not `keep`, until within the bounds (the caller locks)."""
        for key in list(self._entries):
            if not self._over():
                return
            entry = self._entries[key]
            if key != keep and not entry.holds:
                del self._entries[key]

    def _over(self) -> bool:
        return bool((self.max_items is not None and len(self._entries) > self.max_items)
                    or (self.max_bytes is not None and self.bytes_held() > self.max_bytes))

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def pop(self, key: Hashable) -> Any:
        """Forget one entry (a model whose files changed); its value, or None."""
        with self._lock:
            entry = self._entries.pop(key, None)
        return entry.value if entry is not None else None

    def bytes_held(self) -> int:
        return sum(e.nbytes for e in list(self._entries.values()))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def held() -> list[tuple[str, Hashable, int]]:
    """(what, key, bytes) of every model held in this process, for a report of memory in use."""
    return [(cache.what, key, entry.nbytes) for cache in list(_CACHES) for key, entry in list(cache._entries.items())]


def clear_all() -> None:
    """Forget every loaded model of every cache (tests that need a fresh load)."""
    for cache in list(_CACHES):
        cache.clear()


def weight_bytes(value: Any, depth: int = 3) -> int:
    """The bytes of the weights `value` holds, as far as they can be read off it without importing anything: a
    torch module's parameters and buffers, an array's `nbytes`, through containers and an object's `model`."""
    if depth < 0 or value is None:
        return 0
    if isinstance(value, (tuple, list)):
        return sum(weight_bytes(v, depth - 1) for v in value)
    if isinstance(value, dict):
        return sum(weight_bytes(v, depth - 1) for v in value.values())
    parameters, buffers = getattr(value, "parameters", None), getattr(value, "buffers", None)
    if callable(parameters) and callable(buffers):
        try:
            return sum(t.numel() * t.element_size() for part in (parameters(), buffers()) for t in part)
        except (TypeError, AttributeError):
            return 0
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return weight_bytes(getattr(value, "model", None), depth - 1)
