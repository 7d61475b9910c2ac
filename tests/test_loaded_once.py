"""toolpath.loaded_once: a model is loaded once per key however many threads ask, a failed load is not kept, and
a bounded cache lets the least recently used model go, never one being held."""

from __future__ import annotations

import threading

import pytest

from toolpath.loaded_once import LoadedOnce, clear_all, held, weight_bytes


class Tensor:
    def __init__(self, n: int, itemsize: int = 4):
        self.n, self.itemsize = n, itemsize

    def numel(self) -> int:
        return self.n

    def element_size(self) -> int:
        return self.itemsize


class Module:
    """Shaped as a torch module as far as weight_bytes reads one."""

    def __init__(self, params: int, buffers: int = 0):
        self._p, self._b = [Tensor(params)], [Tensor(buffers, 2)]

    def parameters(self):
        return iter(self._p)

    def buffers(self):
        return iter(self._b)


def test_two_threads_asking_for_one_model_load_it_once():
    cache = LoadedOnce("test models")
    started, release, loads = threading.Event(), threading.Event(), []

    def load():
        loads.append(1)
        started.set()
        release.wait(10)  # the second thread asks while this load is under way
        return object()

    got = []
    first = threading.Thread(target=lambda: got.append(cache.get("m", load)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: got.append(cache.get("m", load)))
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert len(loads) == 1 and len(got) == 2 and got[0] is got[1]


def test_different_keys_load_side_by_side():
    cache = LoadedOnce("test models")
    both = threading.Barrier(2, timeout=10)  # each load waits for the other: a global lock would deadlock here

    def load(name):
        both.wait()
        return name

    threads = [threading.Thread(target=cache.get, args=(k, lambda k=k: load(k))) for k in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert "a" in cache and "b" in cache


def test_a_failed_load_is_not_kept():
    cache = LoadedOnce("test models")
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk hiccup")
        return "model"

    with pytest.raises(OSError, match="disk hiccup"):
        cache.get("m", flaky)
    assert "m" not in cache
    assert cache.get("m", flaky) == "model" and cache.get("m", flaky) == "model"
    assert len(calls) == 2


def test_bytes_are_counted_and_the_least_recently_used_goes_first():
    cache = LoadedOnce("test models", max_bytes=1000)
    cache.get("a", lambda: Module(100))  # 400 bytes
    cache.get("b", lambda: (Module(50, 100), "tokenizer"))  # 200 + 200
    assert cache.bytes_held() == 800
    cache.get("a", lambda: pytest.fail("a is held"))  # a is now the most recently used
    cache.get("c", lambda: Module(100))  # 1200 > 1000: b goes
    assert "b" not in cache and "a" in cache and "c" in cache and cache.bytes_held() == 800


def test_a_held_model_is_not_evicted():
    cache = LoadedOnce("test models", max_items=1)
    with cache.hold("a", lambda: "A") as a:
        cache.get("b", lambda: "B")
        assert a == "A" and "a" in cache  # over the bound while a is held
    assert "a" not in cache and "b" in cache  # released: the older one goes


def test_clear_all_and_held_report():
    cache = LoadedOnce("report models")
    cache.get("x", lambda: Module(10))
    assert ("report models", "x", 40) in held()
    clear_all()
    assert "x" not in cache and len(cache) == 0


def test_weight_bytes_reads_what_it_can():
    class Policy:
        model = Module(25)

    assert weight_bytes(Policy()) == 100
    assert weight_bytes({"m": Module(1), "n": [Module(2)]}) == 12
    assert weight_bytes("a tokenizer") == 0 and weight_bytes(None) == 0
