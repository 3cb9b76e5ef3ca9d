# Interpreter exit while daemon threads are inside parenchyma calls: the process exits cleanly
# (exit code 0), as with NumPy. Taking the GIL back in a destructor once finalisation began
# used to end in std::terminate (SIGABRT) every time.
import os
import subprocess
import sys

import pytest

from conftest import get_backend

SCRIPT = r"""
import sys, threading, time
import numpy as np
import parenchyma

backend = parenchyma.Backend(sys.argv[1])
n = 1 << 16
running = threading.Semaphore(0)


def loop(kind):
    x = parenchyma.Tensor.zeros(n)
    y = parenchyma.Tensor.zeros(n)
    a = np.ones(n, dtype=np.float32)
    first = True
    while True:
        if kind == 0:
            parenchyma.blas.axpy(backend, 1.0, x, y)      # an op on Tensors
        elif kind == 1:
            parenchyma.blas.scal(backend, 1.0, a)         # an op on an imported array
        elif kind == 2:
            backend.synchronize()
        elif kind == 3:
            y.numpy()                                     # an export
        elif kind == 4:
            parenchyma.nn.relu(backend, x, y)
        else:
            try:  # an op that raises
                parenchyma.blas.axpy(backend, 1.0, parenchyma.Tensor(n), y)
            except parenchyma.Error:
                pass
        if first:
            running.release()
            first = False


kinds = 6
for k in range(kinds):
    threading.Thread(target=loop, args=(k,), daemon=True).start()
for _ in range(kinds):
    running.acquire()
time.sleep(0.05)
print("exiting", flush=True)
"""


@pytest.mark.parametrize("request_", ["native", "opencl"])
def test_exit_with_daemon_threads_inside_ops(request_):
    get_backend(request_)  # skips with the reason when the backend is absent
    env = dict(os.environ)
    for i in range(5):
        p = subprocess.run([sys.executable, "-c", SCRIPT, request_], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (
            f"run {i}: exit code {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr[-2000:]}")
        assert "exiting" in p.stdout
        assert "terminate" not in p.stderr, p.stderr[-2000:]
