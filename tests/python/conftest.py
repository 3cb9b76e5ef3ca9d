# Shared fixtures for the Python package's tests: the backends present on this machine (a
# missing one is a skip with the reason) and a kernel cache of the tests' own.
import os
import tempfile

import pytest

if "PARENCHYMA_CACHE_DIR" not in os.environ:
    os.environ["PARENCHYMA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                                      "parenchyma-python-tests-cache")

import parenchyma  # noqa: E402  (after the environment is set: the registry reads it once)

_backends = {}


def get_backend(request):
    """Backend(request), once per session, or a skip saying why it is not available."""
    if request not in _backends:
        try:
            _backends[request] = parenchyma.Backend(request)
        except parenchyma.Error as e:
            _backends[request] = e
    b = _backends[request]
    if isinstance(b, parenchyma.Error):
        pytest.skip(f"backend {request!r} not available here: {b}")
    return b


@pytest.fixture(params=["native", "opencl"])
def backend(request):
    return get_backend(request.param)


@pytest.fixture
def native():
    return get_backend("native")


@pytest.fixture
def opencl():
    return get_backend("opencl")


def host_ptr(array):
    return array.__array_interface__["data"][0]
