"""From a case to a linear system: grid, level set, phases, operator, rhs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mesh.grid import Grid
from ..mesh.levelset import Circle, PhaseFields, build_levelset, geometry_circles, phase_fields
from ..flow.rest_projection import hydrostatic_part, rest_rhs
from ..operators.poisson import PoissonOperator, assemble_pressure_operator, gravity_rhs

__all__ = ["PressureProblem", "build_pressure_problem", "bubbly_column", "bubbly_column_phases",
           "bubbly_column_3d", "bubbly_column_3d_host", "bubbly_column_planes"]


@dataclass
class PressureProblem:
    """A two-phase pressure system ``A p = f`` and what it was built from.

    ``A`` and ``rhs`` are float64 whatever the case's ``precision``: that is
    the arithmetic of the solver (``PressureSolver(..., precision=...)``,
    which makes its own float32 copy), not a property of the system.
    ``hydrostatic``: what the answer lacks of the whole pressure (reduced
    gravity's ``-rho G (y - y0)``; None where the answer is the whole
    pressure), see :meth:`whole_pressure`.
    """

    grid: Grid
    phi: object              # (ny, nx), on the backend
    phases: PhaseFields      # on the backend
    A: PoissonOperator       # on the backend, float64
    rhs: object              # (ny, nx), on the backend, float64
    circles: list
    precision: str = "float64"   # the case's: pass it to PressureSolver
    planes: tuple = None         # (lo, hi): only these planes of grid were built
    hydrostatic: object = None   # (ny, nx), on the backend, or None

    def whole_pressure(self, solution, cells=slice(None)):
        """The whole pressure from the solve's ``solution`` (its shape kept):
        the hydrostatic part added where the system is reduced gravity's;
        ``cells``: the planes of this problem's that ``solution`` holds."""
        if self.hydrostatic is None:
            return solution
        return solution + self.hydrostatic[cells].reshape(solution.shape)

    def gauged(self, pressure):
        """The whole grid's ``pressure`` from :meth:`whole_pressure` gauged
        to zero mean, as the solve's own answers are (unchanged where it is
        the solve's answer)."""
        if self.hydrostatic is None:
            return pressure
        return pressure - pressure.mean()


def build_pressure_problem(case, backend, planes=None):
    """Assemble the pressure problem of a validated case on ``backend``:
    the level set, the phases and the operator built where the solve runs.

    ``planes=(lo, hi)``: only those planes of the vertical axis (array axis
    0; a rank's widened slab), whose host never holds the rest: ``phi``,
    the phases and ``rhs`` the whole problem's on those planes, ``A`` the
    operator of the planes' grid (the couplings of their faces, those of
    the whole operator); ``grid`` stays the whole grid."""
    grid = Grid.from_config(case.grid)
    circles = geometry_circles(case.geometry, grid)
    phi = build_levelset(grid, case.geometry.free_surface, circles, backend=backend,
                         planes=planes)
    fl = case.fluids
    phases = phase_fields(grid, phi, fl.liquid.density, fl.gas.density, fl.liquid.viscosity,
                          fl.gas.viscosity, rule=case.operator.face_density)
    # float64: a float32 system would solve another problem (the rounded
    # entries) and could not hold the answer to rtol; see PressureSolver.
    lo, hi = planes if planes is not None else (0, grid.shape[0])
    A = assemble_pressure_operator(grid if planes is None else grid.planes(lo, hi), phases,
                                   backend=backend, dtype=np.float64,
                                   storage=case.operator.storage)
    # The first projection of the fluid at rest in the case's form of gravity.
    form, G, fs = case.momentum.gravity, case.physics.gravity, case.geometry.free_surface
    rhs = rest_rhs(grid, phases, G, form, fl.liquid.density, fl.gas.density, fs, planes)
    return PressureProblem(grid=grid, phi=phi, phases=phases, A=A, rhs=rhs, circles=circles,
                           precision=case.precision, planes=planes,
                           hydrostatic=hydrostatic_part(grid, phases.rho, G, form, fl.liquid.density,
                                                       fl.gas.density, fs, planes))


def _column_geometry(dim, stack, below=0.0):
    """``(free surface, bubbles)`` of the bubbly column, ``stack`` units
    high, in coordinates whose vertical origin is ``below`` (a slab's grid):
    in 2-D 3 x 3 bubbles of radius 0.08 a unit, in 3-D 2 x 2 x 2 of 0.1."""
    if dim == 2:
        bubbles = [Circle(x, (y + k) - below, 0.08) for k in range(stack)
                   for y in (0.2, 0.4, 0.6) for x in (0.25, 0.5, 0.75)]
    else:
        bubbles = [Circle(bx, by, 0.1, z=(bz + k) - below) for k in range(stack)
                   for bz in (0.3, 0.6) for by in (0.3, 0.7) for bx in (0.3, 0.7)]
    return 0.85 + (stack - 1) - below, bubbles


def bubbly_column_phases(n=128, contrast=1000.0, rule="arithmetic", rho_liquid=1000.0, stack=1):
    """The geometry of :func:`bubbly_column` on the host, before any assembly.

    Returns ``(grid, phi, phases)``: the ``n x (stack n)`` grid, the level
    set and the phase fields, from which :func:`assemble_pressure_operator`
    builds the operator (``bubbleflow bench`` times that assembly on its
    own).  ``stack``: the column's unit square repeated upward, its bubbles
    in each, the free surface ``stack - 0.15`` high (the ranks' weak scaling:
    a unit a rank).
    """
    grid = Grid(n, stack * n, 1.0, float(stack))
    phi = build_levelset(grid, *_column_geometry(2, stack))
    phases = phase_fields(grid, phi, rho_liquid, rho_liquid / contrast, 1e-3, 1.8e-5, rule=rule)
    return grid, phi, phases


def bubbly_column(n=128, contrast=1000.0, backend="numpy", rule="arithmetic", storage="diagonals",
                  rho_liquid=1000.0, gravity=9.81, dtype=np.float64, stack=1):
    """The standard solver problem of ``docs``/benchmarks: unit square, ``n x n``
    cells, water to 0.85, gas above, 3 x 3 gas bubbles of radius 0.08;
    ``contrast = rho_liquid / rho_gas``; ``stack``: the square repeated
    upward (:func:`bubbly_column_phases`).

    Returns ``(A, b, phi)``: operator, right-hand side (flat) and level set.
    """
    from ..compute.backend import get_backend

    backend = get_backend(backend)
    grid, phi, phases = bubbly_column_phases(n, contrast, rule=rule, rho_liquid=rho_liquid,
                                            stack=stack)
    A = assemble_pressure_operator(grid, phases, backend=backend, dtype=dtype, storage=storage)
    b = backend.xp.asarray(gravity_rhs(grid, gravity).ravel(), dtype=dtype)
    return A, b, phi


def bubbly_column_3d_host(n=32, contrast=1000.0, rho_liquid=1000.0, gravity=9.81, stack=1):
    """The parts of :func:`bubbly_column_3d` on the host, before any assembly:
    ``(grid, phi, phases, rhs)``: the level set, the :class:`PhaseFields`
    (``phases.faces`` the face densities normal to x, y and z; ``bubbleflow
    bench --dim 3`` times the operator's assembly from them on its own) and
    ``rhs`` flat, float64.  ``stack``: the unit cube repeated upward, its
    bubbles in each, the free surface ``stack - 0.15`` high."""
    grid = Grid.regular((n, n, stack * n), (1.0, 1.0, float(stack)))
    phi = build_levelset(grid, *_column_geometry(3, stack))
    phases = phase_fields(grid, phi, rho_liquid, rho_liquid / contrast, 1.0e-3, 1.8e-5)
    return grid, phi, phases, gravity_rhs(grid, gravity).ravel()


def bubbly_column_3d(n=32, contrast=1000.0, backend="numpy", rho_liquid=1000.0, gravity=9.81,
                     dtype=np.float64, stack=1):
    """The standard solver problem in 3-D: the unit cube, ``n^3`` cells,
    water to ``z = 0.85``, gas above, 2 x 2 x 2 gas bubbles of radius 0.1
    at ``x, y`` in {0.3, 0.7} and ``z`` in {0.3, 0.6}; ``contrast =
    rho_liquid / rho_gas``.  Sharp cell densities (a cell is liquid where the
    level set is >= 0) and arithmetic face densities, as the 2-D column.
    ``stack``: the cube repeated upward (:func:`bubbly_column_3d_host`).

    Returns ``(A, b, phi)``: the matrix-free 7-point operator, the
    right-hand side of a fluid at rest (``+g/hz`` in the bottom layer,
    ``-g/hz`` in the top one; flat) and the level set ``(n, n, n)``
    (host, axes ``z, y, x``).

    >>> A, b, phi = bubbly_column_3d(8)
    >>> A.grid_shape, b.shape, abs(float(b.sum())) < 1e-9
    ((8, 8, 8), (512,), True)
    """
    from ..compute.backend import get_backend

    backend = get_backend(backend)
    grid, phi, phases, f = bubbly_column_3d_host(n, contrast, rho_liquid, gravity, stack)
    A = PoissonOperator.from_faces(phases.faces, grid, backend=backend, dtype=dtype,
                                   densities=True)
    return A, backend.xp.asarray(f, dtype=dtype), phi


def bubbly_column_planes(n, lo, hi, dim=2, contrast=1000.0, stack=1, rho_liquid=1000.0,
                         gravity=9.81):
    """Planes ``lo:hi`` (array axis 0, the vertical) of :func:`bubbly_column`
    (``dim`` 2) or :func:`bubbly_column_3d` (``dim`` 3), ``stack`` units
    high, built without the rest of the grid: a rank's widened slab, whose
    host never holds the whole problem.

    Returns ``(couplings, rhs, phi)`` on the host: the face couplings of the
    planes' grid per axis (x first; along the vertical its ``hi - lo - 1``
    inner faces, those of the whole grid's operator), the right-hand side
    and the level set of the planes ``(hi - lo, ...)``.
    """
    whole = (Grid(n, stack * n, 1.0, float(stack)) if dim == 2
             else Grid.regular((n, n, stack * n), (1.0, 1.0, float(stack))))
    grid = whole.planes(lo, hi)
    # The planes' grid starts at plane lo: the geometry shifted down to it.
    phi = build_levelset(grid, *_column_geometry(dim, stack, below=lo * whole.spacing[-1]))
    phases = phase_fields(grid, phi, rho_liquid, rho_liquid / contrast, 1.0e-3, 1.8e-5)
    A = PoissonOperator.from_faces(phases.faces, grid, backend="numpy", dtype=np.float64,
                                   densities=True)
    # The whole grid's rhs is a function of the plane alone (walls first and last).
    rhs = gravity_rhs(Grid.regular((1,) * (dim - 1) + (whole.cells[-1],),
                                   (1.0,) * (dim - 1) + (whole.lengths[-1],)), gravity)
    rhs = np.broadcast_to(rhs[lo:hi], grid.shape).copy()
    return A.couplings(), rhs, phi
