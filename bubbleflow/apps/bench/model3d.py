"""What the 3-D rows of ``bubbleflow bench --dim 3`` count: bytes per
iteration (the floor's traffic) and the memory a size needs (the check
before any work).

The 2-D model (:func:`bubbleflow.linalg.registry.model_bytes_per_iteration`)
counts the five diagonals or two face-coupling arrays of the 5-point
operator; the 3-D operator holds three face-coupling arrays (or, with
``--storage diagonals``, seven diagonals), and its preconditioners are
built from the couplings.  Here the bytes are counted on
the solver itself, from the arrays it holds.
"""
from __future__ import annotations

import numpy as np

from ...linalg.registry import VECTOR_ARRAYS, deflation, preconditioner

__all__ = ["bytes_per_iteration_3d", "arrays_per_cell_3d",
           "OURS_ARRAYS", "PEER_ARRAYS", "PYAMG_ARRAYS", "HOST_PROBLEM_ARRAYS",
           "HOST_BUILD_ARRAYS"]

#: float64 grid arrays (8 bytes per cell each) alive at the peak of our
#: set-up plus solve on the device, the inputs (three face-density arrays,
#: the level set) and the right-hand side included: the operator's three
#: face couplings, the CG vectors and temporaries, the preconditioner
#: (multigrid's hierarchy and cycle buffers, or scaled incomplete Poisson's
#: three scaled couplings) and, on the GPU, the fused engine's own copies
#: (x, two r, two p, w, y, three couplings).  The CuPy pool's peak measured
#: by the bench on the GPU (192 B/cell at 512^3 without the inputs: 24
#: arrays), plus the inputs and the right-hand side, rounded up: an estimate.
OURS_ARRAYS = 30
#: ... for the CG + Jacobi peers: the inputs, the operator, the 7-point CSR
#: matrix (88 bytes a row: 11 arrays) and its build's temporaries (values
#: and pattern before compression), then CG's vectors.
PEER_ARRAYS = 30
#: ... for the PyAMG peers (on the host): the CSR matrix and the AMG
#: hierarchy, whose set-up holds several times the matrix.
PYAMG_ARRAYS = 90
#: Host arrays the problem keeps during the run: level set, three face
#: densities, right-hand side.
HOST_PROBLEM_ARRAYS = 5
#: Host arrays at the peak of building the problem (coordinates, level set
#: and its temporaries, densities, faces, right-hand side).
HOST_BUILD_ARRAYS = 12


def arrays_per_cell_3d(peers, on_device):
    """``(device, host)``: float64 arrays per cell a 3-D run needs at its
    peak on the device and on the host (``device`` None where the device is
    the host).  Ours and each peer run one after the other, each released
    before the next: the largest count where they run, beside the problem's
    arrays on the host."""
    host_peers = [PYAMG_ARRAYS if p.startswith("pyamg") else PEER_ARRAYS
                  for p in peers if p != "cupy_cg"]
    device_peers = [PEER_ARRAYS for p in peers if p == "cupy_cg"]
    if on_device:
        device = max([OURS_ARRAYS] + device_peers)
        return device, max([HOST_BUILD_ARRAYS] + [HOST_PROBLEM_ARRAYS + a for a in host_peers])
    host = HOST_PROBLEM_ARRAYS + max([OURS_ARRAYS] + host_peers + device_peers)
    return None, max(HOST_BUILD_ARRAYS, host)


def _preconditioner_bytes(M, name, n_cells):
    """Bytes one application of the preconditioner ``M`` (named ``name``) moves."""
    vectors = 2 * 8 * n_cells                                   # r read, y written
    if name == "none":
        return 0
    if name == "jacobi":
        return vectors + int(M.inv_diagonal.nbytes)
    if name == "multigrid":
        return M.bytes_per_apply()
    faces = getattr(M, "faces", None)
    if name == "incomplete_poisson_scaled" and faces is not None:
        # Two passes, the upper then the lower neighbours: each reads its
        # input, D^-1/2 and the three scaled couplings and writes its output.
        per_pass = sum(int(f.nbytes) for f in faces) + int(M.inv_sqrt_diagonal.nbytes)
        return 2 * per_pass + 2 * vectors
    return 8 * n_cells * preconditioner(name).arrays              # the 2-D count


def bytes_per_iteration_3d(solver):
    """Bytes one PCG iteration of ``solver`` (a
    :class:`~bubbleflow.linalg.solver.PressureSolver` on a 3-D operator)
    must move, each array read once and written once per operation, float64
    vectors.  Counted:

    * the operator ``w = A p``: its face couplings (three arrays, one
      value per interior face, in the inner operator's precision) or, with
      ``--storage diagonals``, its seven diagonals, ``p`` read, ``w`` written;
    * the preconditioner ``y = M^-1 r``: Jacobi, its inverse diagonal, ``r``
      and ``y``; scaled incomplete Poisson, two passes of ``D^-1/2``, the
      three scaled couplings, input and output; multigrid,
      :meth:`~bubbleflow.linalg.precond.multigrid.Multigrid.bytes_per_apply`; another (a 2-D one that runs in
      3-D), the registry's 2-D count;
    * CG's vector work: three dot products, the ``x``, ``r`` and ``p``
      updates (:data:`~bubbleflow.linalg.registry.VECTOR_ARRAYS` arrays, as
      in 2-D);
    * with a deflation (where one runs in 3-D), the registry's A-DEF2 count
      (its 2-D one).

    Not counted: temporaries of the array code that a fused kernel would not
    write, halo re-reads, the host checks.
    """
    A = solver.A_inner
    n = int(np.prod(A.grid_shape))
    stored = A.entries() if A.storage == "diagonals" else A.couplings()
    operator = sum(int(c.nbytes) for c in stored) + 2 * 8 * n
    prec = _preconditioner_bytes(solver.M, solver.preconditioner_name, n)
    defl = 8 * n * deflation(solver.deflation_name).arrays
    return int(operator + prec + 8 * n * VECTOR_ARRAYS + defl)
