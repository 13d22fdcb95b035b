"""Shared test fixtures.

The whole suite runs on NumPy by default.  ``pytest --backend cupy`` runs it
with the CuPy backend (on the GPU machine); tests marked ``gpu`` compare CuPy
against NumPy and are skipped where no GPU is usable.
"""
import pytest

from bubbleflow.compute.backend import BackendUnavailable, get_backend

# Scripts the tests start in subprocesses (they act on import).
collect_ignore = ["helpers"]


def pytest_addoption(parser):
    parser.addoption("--backend", default="numpy", choices=["numpy", "cupy"],
                     help="array backend the suite runs on (default numpy)")


def _gpu_usable():
    try:
        get_backend("cupy")
        return True
    except BackendUnavailable:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_usable():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a usable CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def backend(request):
    """The backend the suite runs on (``--backend``)."""
    name = request.config.getoption("--backend")
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(f"backend {name} unavailable: {exc}")


@pytest.fixture(scope="session")
def cupy_backend():
    try:
        return get_backend("cupy")
    except BackendUnavailable as exc:
        pytest.skip(f"cupy unavailable: {exc}")


@pytest.fixture(scope="module")
def cp(cupy_backend):
    """CuPy itself, for the kernel tests' device arrays (skips without it)."""
    return cupy_backend.xp
