# parenchyma.coll across processes: tests/python/coll_ranks.py under `mpirun -np 2` (and 3 for
# the world communicator), every op on every rank against NumPy references. Skipped, with the
# reason, where mpirun (Open MPI's) is absent, where no coll bundle serves the native backend
# (an installed wheel built without MPI), or, for the mpi4py half, where the interpreter cannot
# import mpi4py (Debian: python3-mpi4py; a venv of the wheel has none unless pip-installed).
# The ranks run in their own processes: this interpreter never starts MPI.
import os
import re
import shutil
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "coll_ranks.py")


def mpirun():
    path = shutil.which("mpirun")
    if path is None:
        pytest.skip("mpirun not found (install openmpi-bin and libopenmpi-dev)")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    if "Open MPI" not in version.stdout + version.stderr:
        pytest.skip("mpirun is not Open MPI's; these tests use its options")
    return path


def run_ranks(np_, mode):
    # As tests/coll/run_mpi.sh: root allowed, more ranks than cores, shared memory without
    # ptrace in containers, no network probing.
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1", PARENCHYMA_COLL_TIMEOUT="60",
               PARENCHYMA_LOG_LEVEL="warn")
    cmd = [mpirun(), "-np", str(np_), "--oversubscribe", "--allow-run-as-root", sys.executable,
           SCRIPT, mode]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    out = r.stdout + r.stderr
    if "SKIP: " in out:
        pytest.skip(re.search(r"SKIP: (.*)", out).group(1))
    assert r.returncode == 0, "%s ended with status %d:\n%s" % (" ".join(cmd), r.returncode, out)
    for rank in range(np_):
        assert re.search(r"rank %d of %d: ok, \d+ checks" % (rank, np_), out), out
    return out


@pytest.mark.parametrize("np_", [2, 3])
def test_coll_world_communicator(np_):
    run_ranks(np_, "world")


def test_coll_mpi4py_communicator():
    probe = subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True,
                           text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("mpi4py is not importable by %s (Debian: apt-get install python3-mpi4py; "
                    "pip install mpi4py)" % sys.executable)
    run_ranks(2, "mpi4py")


def test_coll_module_needs_no_mpi():
    # Importing parenchyma.coll starts nothing: MPI starts when a Communicator is made.
    import parenchyma
    from parenchyma import coll
    assert coll.Communicator.__doc__ and "mpi4py" in coll.Communicator.__doc__
    assert "coll" in parenchyma.__all__
    for op in ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
               "send", "recv", "barrier"):
        assert getattr(coll.Communicator, op).__doc__, op
