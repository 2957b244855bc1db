"""cpu tier: the op cache of shardjit.torch (bounded, least recently used, closes what it drops,
builds a key once under concurrent misses, never hands a call an op it closed) and the Runtime it
hands to the ops it builds."""

import threading
import time

import pytest

import shardjit
from shardjit import _op_cache


class FakeOp:
    def __init__(self, name):
        self.name = name
        self.closed = False

    def close(self):
        self.closed = True


def test_builds_once_per_key_and_reuses():
    cache = _op_cache.OpCache(capacity=4)
    built = []

    def build(name):
        built.append(name)
        return FakeOp(name)

    first = cache.get(("a", 1), lambda: build("a1"))
    again = cache.get(("a", 1), lambda: build("again"))
    other = cache.get(("a", 2), lambda: build("a2"))
    assert first is again and first is not other
    assert built == ["a1", "a2"]
    assert first.op.name == "a1"


def test_evicts_the_least_recently_used_and_closes_it():
    cache = _op_cache.OpCache(capacity=2)
    a = cache.get("a", lambda: FakeOp("a"))
    b = cache.get("b", lambda: FakeOp("b"))
    cache.get("a", lambda: FakeOp("a-rebuilt"))  # a is now the most recent
    c = cache.get("c", lambda: FakeOp("c"))
    assert cache.keys() == ["a", "c"]
    assert b.op.closed and not a.op.closed and not c.op.closed
    cache.set_capacity(1)
    assert cache.keys() == ["c"] and a.op.closed
    cache.clear()
    assert len(cache) == 0 and c.op.closed


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, "4", None])
def test_refuses_a_capacity_that_is_not_a_positive_int(capacity):
    with pytest.raises(ValueError, match="op cache capacity: expected a positive int"):
        _op_cache.OpCache(capacity=capacity)
    with pytest.raises(ValueError, match="op cache capacity"):
        _op_cache.set_op_cache_size(capacity)


def test_concurrent_misses_build_a_key_once():
    cache = _op_cache.OpCache(capacity=4)
    built = []

    def build():
        built.append(1)
        time.sleep(0.05)
        return FakeOp("slow")

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", build))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert all(r is results[0] for r in results)


class EvictingBetweenLookupAndLock(_op_cache.OpCache):
    """An op cache where, right after the first lookup of `key`, another caller's miss evicts it:
    what a thread between get() and the entry's lock can meet."""

    def __init__(self, key):
        super().__init__(capacity=1)
        self._key = key
        self.evicted = []

    def get(self, key, build):
        entry = super().get(key, build)
        if key == self._key and not self.evicted:
            self.evicted.append(entry)
            super().get("another key", lambda: FakeOp("another"))  # capacity 1: evicts `key`
        return entry


def test_a_locked_entry_is_never_one_that_was_evicted():
    cache = EvictingBetweenLookupAndLock("k")
    with cache.locked("k", lambda: FakeOp("k")) as entry:
        assert entry.lock.locked()
        assert not entry.op.closed and not entry.evicted
        stale = cache.evicted[0]
        assert stale is not entry and stale.op.closed and stale.evicted
    assert not entry.lock.locked()
    assert cache.keys() == ["k"]


def test_threads_never_use_a_closed_op():
    cache = _op_cache.OpCache(capacity=2)
    used_closed = []

    def calls(name):
        for i in range(300):
            key = (name, i % 3)
            with cache.locked(key, lambda: FakeOp(key)) as entry:
                if entry.op.closed:
                    used_closed.append(key)

    threads = [threading.Thread(target=calls, args=(name,)) for name in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert used_closed == []


def test_set_runtime_takes_a_runtime_only(tmp_path, monkeypatch):
    monkeypatch.setattr(_op_cache, "_runtime", None)  # the process's Runtime comes back afterwards
    with pytest.raises(TypeError, match="set_runtime: runtime: expected a shardjit.Runtime, got str"):
        _op_cache.set_runtime("not a runtime")
    rt = shardjit.Runtime(cache_dir=str(tmp_path / "cache"))
    _op_cache.set_runtime(rt)
    assert _op_cache.runtime() is rt
