# Reference counting and memory: round trips through DLPack leak nothing; threads share
# backends and tensors safely with the GIL released.
import gc
import os
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import parenchyma
from parenchyma import blas


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def round_trip(a):
    t = parenchyma.from_dlpack(a)
    n = t.numpy()
    assert n.ctypes.data == a.ctypes.data
    return n


def test_ten_thousand_round_trips_leak_nothing():
    a = np.ones(256, dtype=np.float32)
    for _ in range(1000):  # warm-up: caches, allocator pools
        round_trip(a)
    gc.collect()
    refs = sys.getrefcount(a)
    rss = rss_bytes()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(10_000):
        round_trip(a)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert sys.getrefcount(a) == refs
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 64 * 1024, f"Python heap grew by {grown} bytes"
    assert rss_bytes() - rss < 8 * 1024 * 1024


def test_unconsumed_capsules_release_their_export():
    a = np.ones(64)
    refs = sys.getrefcount(a)
    t = parenchyma.from_dlpack(a)
    assert sys.getrefcount(a) == refs + 1  # the imported capsule holds the array
    for _ in range(1000):
        cap = t.__dlpack__()
        del cap
    memoryview(t).release()
    del t
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_views_keep_the_producer_alive():
    a = np.arange(16, dtype=np.float64)
    refs = sys.getrefcount(a)
    n = parenchyma.from_dlpack(a).numpy()
    assert sys.getrefcount(a) == refs + 1
    del n
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_ops_on_numpy_operands_keep_no_reference(native):
    x, y = np.ones(100), np.ones(100)
    rx, ry = sys.getrefcount(x), sys.getrefcount(y)
    for _ in range(200):
        blas.axpy(native, 1.0, x, y)
    assert sys.getrefcount(x) == rx and sys.getrefcount(y) == ry
    assert y[0] == 201.0


def test_threads_share_backend_and_tensors(backend):
    n = 64
    a = parenchyma.from_dlpack(np.ones((n, n), np.float32))
    errors = []

    def work(seed):
        try:
            c = parenchyma.Tensor((n, n), "float32")
            for _ in range(10):
                blas.gemm(backend, a, a, c)
                assert blas.asum(backend, a) == n * n
            np.testing.assert_array_equal(c.numpy(), np.full((n, n), float(n)))
        except Exception as e:  # reported below, with the thread's failure
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_gil_released_during_synchronize(native):
    # Another thread runs Python code while this one waits in synchronize().
    done = threading.Event()
    th = threading.Thread(target=lambda: (sum(range(10000)), done.set()))
    th.start()
    native.synchronize()
    th.join(5)
    assert done.is_set()
