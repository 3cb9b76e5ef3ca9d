# Use after fork: a child forked from a process that created the runtime raises parenchyma.Error
# ('unavailable') naming the fix (multiprocessing's 'spawn' start method) instead of hanging in
# its first op; with 'spawn' (or 'forkserver') the child makes a runtime of its own and works.
import multiprocessing as mp

import numpy as np
import pytest

import parenchyma
from conftest import get_backend

TIMEOUT = 120


def _describe(e):
    return ("error", e.code, str(e))


def child_uses_inherited(backend, t, q):
    out = []
    for what, f in (("op", lambda: parenchyma.blas.scal(backend, 2.0, t)),
                    ("synchronize", lambda: backend.synchronize()),
                    ("numpy", lambda: t.numpy()),
                    ("new backend", lambda: parenchyma.Backend(backend.framework))):
        try:
            f()
            out.append((what, "ok"))
        except parenchyma.Error as e:
            out.append((what,) + _describe(e))
    q.put(out)


def child_makes_its_own(request, q):
    try:
        b = parenchyma.Backend(request)
        x = parenchyma.asarray(np.arange(8, dtype=np.float32))
        parenchyma.blas.scal(b, 2.0, x)
        b.synchronize()
        q.put(("ok", x.numpy().tolist()))
    except parenchyma.Error as e:
        q.put(_describe(e))


def run_child(ctx, target, args):
    q = ctx.Queue()
    p = ctx.Process(target=target, args=args + (q,))
    p.start()
    try:
        result = q.get(timeout=TIMEOUT)
    except Exception:
        p.kill()
        p.join()
        pytest.fail(f"the {ctx.get_start_method()} child gave no answer in {TIMEOUT} s (hung)")
    p.join(TIMEOUT)
    assert p.exitcode == 0
    return result


@pytest.mark.parametrize("request_", ["native", "opencl"])
def test_forked_child_gets_a_clear_error_not_a_hang(request_):
    backend = get_backend(request_)
    t = parenchyma.asarray(np.arange(8, dtype=np.float32))
    parenchyma.blas.scal(backend, 1.0, t)  # the runtime is in use in the parent
    result = run_child(mp.get_context("fork"), child_uses_inherited, (backend, t))
    for what, *r in result:
        assert r[0] == "error", (what, r)
        assert r[1] == "unavailable", (what, r)
        assert "fork" in r[2] and "spawn" in r[2], (what, r)
    # The parent is unaffected.
    parenchyma.blas.scal(backend, 2.0, t)
    np.testing.assert_array_equal(t.numpy(), 2 * np.arange(8, dtype=np.float32))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_child_makes_a_runtime_of_its_own(native, method):
    result = run_child(mp.get_context(method), child_makes_its_own, ("native",))
    assert result == ("ok", [2.0 * i for i in range(8)]), result
