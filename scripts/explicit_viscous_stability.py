"""The explicit viscous step's stability at the flow's viscous time-step limit.

    python3 scripts/explicit_viscous_stability.py CASE.yaml [--set K=V ...] [--scales 1 1.1 1.2]

A flow with ``momentum.viscosity: explicit`` takes ``u* = u + dt L u`` (``L u
= div(2 mu D u) / rho_f`` on the interior faces, the other terms aside) and
projects ``u*``.  For the case's initial interface this builds that step as
a linear map, ``u -> P (u + dt L u)`` (``P`` the variable-density projection
of the flow's pressure operator, solved directly), and finds by ARPACK its
most negative eigenvalues at ``dt`` = each scale times the viscous limit
(:func:`bubbleflow.case.time_step.step_limits`, with the cells' largest
``mu / rho``).  The step is stable where none is below -1.  (The map is
self-adjoint in the face-density-weighted product on divergence-free
fields: its eigenvalues are real; the slowest modes, near 1, are the
stable end.)  Host only (NumPy, SciPy); a few minutes for 2-D grids of
80 x 160 and 3-D ones of 16 x 16 x 32.
"""
import argparse
import os
import sys

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.config import load_case  # noqa: E402
from bubbleflow.case.time_step import step_limits  # noqa: E402
from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.flow import momentum  # noqa: E402
from bubbleflow.flow.navier_stokes import FlowSolver  # noqa: E402
from bubbleflow.mesh.grid import array_axis  # noqa: E402


class ProjectedViscousStep:
    """``u -> P (u + dt L u)`` on the interior faces of a case's initial
    state, as a flat map (``matvec``) for a given ``dt``."""

    def __init__(self, case):
        import scipy.sparse.linalg as sla

        self.solver = s = FlowSolver(case, get_backend("numpy"))
        state = s.initial_state()
        _, rho, self.mu, self.rho_f = s.properties(state.phi)
        nd = s.ndim
        self.shapes = [u.shape for u in state.velocity]
        self.inner = []
        for a in range(nd):
            sl = [slice(None)] * nd
            sl[array_axis(nd, a)] = slice(1, -1)
            self.inner.append(tuple(sl))
        self.sizes = [np.zeros(sh)[sl].size for sh, sl in zip(self.shapes, self.inner)]
        self.n = sum(self.sizes)
        A = s.partition.operator(self.rho_f, np.float64, case.operator.storage,
                                 s.width).to_scipy().tolil()
        A[0, :] = 0.0           # Neumann walls: one cell pinned (b is compatible)
        A[0, 0] = 1.0
        self.lu = sla.splu(A.tocsc())
        self.nu = float((self.mu / rho).max())
        self.limit = step_limits(case, nu=self.nu, h=s.h)["viscous"].dt
        self.dt = self.limit

    def _unpack(self, x):
        out, o = [], 0
        for sh, sl, m in zip(self.shapes, self.inner, self.sizes):
            u = np.zeros(sh)
            u[sl] = x[o:o + m].reshape(u[sl].shape)
            o += m
            out.append(u)
        return tuple(out)

    def _project(self, velocity):
        s = self.solver
        div, b = momentum.pressure_rhs(velocity, s.spacing, self.dt)
        rhs = b.ravel().copy()
        rhs[0] = 0.0
        p = self.lu.solve(rhs).reshape(b.shape)
        return momentum.correct_velocity(velocity, p, self.rho_f, div, self.dt, s.spacing)[0]

    def matvec(self, x):
        s = self.solver
        velocity = self._unpack(x)
        forces = momentum.viscous_forces(velocity, self.mu, s.spacing, s.signs)
        stepped = []
        for u, f, rf, sl in zip(velocity, forces, self.rho_f, self.inner):
            v = u.copy()
            v[sl] = u[sl] + self.dt * f / rf
            stepped.append(v)
        return np.concatenate([u[sl].ravel() for u, sl in
                               zip(self._project(tuple(stepped)), self.inner)])


def most_negative(step, count=3):
    """The ``count`` most negative eigenvalues of ``step`` (real parts)."""
    import scipy.sparse.linalg as sla

    op = sla.LinearOperator((step.n, step.n), matvec=step.matvec, dtype=np.float64)
    values = sla.eigs(op, k=count, which="SR", return_eigenvectors=False, tol=1e-8,
                      maxiter=20000)
    return np.sort(values.real)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 1.1, 1.2])
    a = ap.parse_args(argv)
    case = load_case(a.case, a.sets)
    step = ProjectedViscousStep(case)
    cells = "x".join(str(n) for n in case.grid.cells)
    print(f"# {a.case} {' '.join(a.sets)}: {cells} cells, {step.n} face unknowns, "
          f"largest mu/rho {step.nu:.4g}, viscous limit {step.limit:.4g} s")
    print(f"{'dt / limit':>10s} {'most negative eigenvalue':>26s}  stable")
    for scale in a.scales:
        step.dt = scale * step.limit
        low = most_negative(step)[0]
        print(f"{scale:10.2f} {low:26.4f}  {'yes' if low >= -1.0 else 'no'}")


if __name__ == "__main__":
    main()
