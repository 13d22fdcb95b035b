"""Small dense factorisations run on one CPU BLAS thread (compute/blas.py)."""
import numpy as np
import pytest

from bubbleflow.compute import blas
from bubbleflow.compute.backend import get_backend


class FakeBLAS:
    def __init__(self, n):
        self.n, self.calls = n, []

    def get(self):
        return self.n

    def put(self, n):
        self.calls.append(n)
        self.n = n


@pytest.fixture
def fake(monkeypatch):
    lib = FakeBLAS(4)
    monkeypatch.setattr(blas, "_controls", lambda: [(lib.get, lib.put)])
    return lib


def test_small_orders_run_on_one_thread_and_the_count_comes_back(fake):
    seen = []
    with blas.single_threaded(10):
        seen.append(fake.n)
    assert seen == [1] and fake.n == 4 and fake.calls == [1, 4]
    with pytest.raises(RuntimeError):
        with blas.single_threaded(10):
            raise RuntimeError("inside")
    assert fake.n == 4                              # restored after an error too


def test_large_orders_keep_every_thread(fake):
    with blas.single_threaded(blas.SMALL_DENSE + 1):
        assert fake.n == 4
    assert fake.calls == []


def test_the_coarse_inverse_runs_on_one_thread(fake, monkeypatch):
    from bubbleflow.linalg.deflation import dense_inverses

    from scipy.linalg import lapack

    inside = []
    real = lapack.dpotrf
    monkeypatch.setattr(lapack, "dpotrf",
                        lambda a, **kw: (inside.append(fake.n), real(a, **kw))[1])
    A = np.diag(np.arange(1.0, 6.0)) + 0.1
    inv = dense_inverses._unsymmetrised_inverse(get_backend("numpy"), A)
    assert inside == [1] and fake.n == 4
    assert np.allclose(inv @ A, np.eye(5))


def test_the_real_libraries_are_found_and_restored():
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS too)

    controls = blas._controls()
    name = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    if "openblas" not in name.lower():
        pytest.skip(f"NumPy's BLAS is {name}, not OpenBLAS")
    assert controls                                  # NumPy's OpenBLAS at least
    before = [get() for get, _ in controls]
    with blas.single_threaded(8):
        assert all(get() == 1 for get, _ in controls)
    assert [get() for get, _ in controls] == before
