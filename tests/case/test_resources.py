"""Memory estimate and check: a grid that cannot fit is refused before any array exists."""
import os
import tracemalloc

import pytest

from bubbleflow.compute.backend import CupyBackend, get_backend
from bubbleflow.case.config import CaseError, load_case
from bubbleflow.case.resources import (
    ARRAYS_PER_CELL, SAFETY, available_memory, check_memory, estimate_memory, memory_refusal,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMN = os.path.join(ROOT, "cases", "bubbly_column.yaml")


def column(n, *extra):
    return load_case(COLUMN, [f"grid.nx={n}", f"grid.ny={n}", "solver.deflation.subdomains=[8,8]",
                              *extra])


def test_estimate_scales_with_cells_and_mode():
    small, big = estimate_memory(column(64)), estimate_memory(column(128))
    assert big["grid_arrays"] == 4 * small["grid_arrays"]
    assert small["grid_arrays"] == 64 * 64 * ARRAYS_PER_CELL["pressure"] * 8
    flow = estimate_memory(load_case(os.path.join(ROOT, "cases", "two_phase.yaml")))
    assert flow["arrays_per_cell"] == ARRAYS_PER_CELL["flow"] > ARRAYS_PER_CELL["pressure"]


def test_huge_grid_refused_with_a_small_free_figure():
    case = column(16000)
    numpy = get_backend("numpy")
    with pytest.raises(CaseError) as info:
        check_memory(case, numpy, available=8 * 2 ** 30)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{COLUMN}:9: grid: 16000 x 16000 needs about 61 GiB")
    assert ("GiB on the host, more than the 6.4 GiB a run may take (80 % of the 8 GiB free); "
            "expected a smaller grid") in msg
    # The same case passes where the memory is there (with the margin).
    est = check_memory(case, numpy, available=int(estimate_memory(case)["total"] / SAFETY) + 1)
    assert est["available"] is not None


def test_check_is_cheap_and_reads_the_host():
    numpy = get_backend("numpy")
    free, device = available_memory(numpy)
    assert device == "the host" and free is not None and free > 0
    tracemalloc.start()
    try:
        check_memory(column(64), numpy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1e6


def test_cupy_free_memory_is_asked_of_the_gpu():
    class Runtime:
        @staticmethod
        def memGetInfo():
            return 2 * 2 ** 30, 80 * 2 ** 30

    class Pool:
        def total_bytes(self):
            return 2 ** 30

        def used_bytes(self):
            return 0

    class FakeCupy:
        class cuda:
            runtime = Runtime

        @staticmethod
        def get_default_memory_pool():
            return Pool()

    class FakeBackend(CupyBackend):
        def __init__(self):
            self.xp, self.device_name = FakeCupy, "Fake GPU"

    assert available_memory(FakeBackend()) == (3 * 2 ** 30, "the GPU (Fake GPU)")
    with pytest.raises(CaseError, match=r"needs about .* GiB on the GPU \(Fake GPU\), more than "
                                        r"the 2.4 GiB a run may take \(80 % of the 3 GiB free\)"):
        check_memory(column(8192), FakeBackend())


def _peak(n, tmp_path):
    """tracemalloc peak (bytes) of ``bubbleflow run`` of the column at ``n x n`` on NumPy."""
    from bubbleflow.apps.cli import main

    tracemalloc.start()
    try:
        rc = main(["run", COLUMN, "--backend", "numpy", "-o", str(tmp_path / str(n)), "-q",
                   "--no-progress", "--set", f"grid.nx={n}", "--set", f"grid.ny={n}"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 0
    return peak


def test_estimate_within_a_factor_two_of_a_real_numpy_run(tmp_path):
    # The grid-sized part is what matters for large grids: compare the growth
    # from 256^2 to 512^2 (fixed costs cancel; a first small run puts the
    # one-off costs of a process, imports and caches, before both), and the
    # whole at 512^2.
    _peak(32, tmp_path)
    small, big = _peak(256, tmp_path), _peak(512, tmp_path)
    est_small, est_big = (estimate_memory(column(n))["total"] for n in (256, 512))
    assert 0.5 < (est_big - est_small) / (big - small) < 2.0, (est_small, est_big, small, big)
    assert 0.5 < est_big / big < 2.0, (est_big, big)


def test_a_rank_weighs_its_slab_against_its_share_of_the_memory():
    """Under mpiexec a rank holds its slab (``cells``) and shares its
    device's free memory with the ranks on that device (``sharing``): a grid
    the whole of which would not fit passes where each rank's slab does, and
    a refusal names the ranks, the rank's figure and the sharing."""
    numpy = get_backend("numpy")
    case = column(4096)
    whole = estimate_memory(case)["total"]
    half = 4096 * 2049
    available = int(0.75 * whole / SAFETY)
    est, refusal = memory_refusal(case, numpy, available=available)
    assert refusal is not None and est["cells"] == 4096 ** 2
    est, refusal = memory_refusal(case, numpy, available=available, cells=half, ranks=2)
    assert refusal is None and est["cells"] == half
    _, refusal = memory_refusal(case, numpy, available=available, cells=half, sharing=2, ranks=2)
    problem, expected = refusal
    assert problem.startswith("4096 x 4096 on 2 ranks needs about 2.01 GiB a rank (8.39e+06 cells "
                              "of its slab) on the host, more than the "), problem
    assert problem.endswith("GiB a rank may take (80 % of the "
                            f"{available / 2 ** 30:.3g} GiB free, shared by 2 ranks)"), problem
    assert expected.startswith("a smaller grid or more ranks (about ")
