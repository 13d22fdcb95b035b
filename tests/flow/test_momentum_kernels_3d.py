"""The momentum phase's 3-D CUDA kernels (flow.momentum3_cuda, called
through the variants of flow.momentum_cuda: properties,
the finite check and the time step's maxima, the interface force's coefficients, the explicit provisional velocity, the divergence and the pressure's
right-hand side, the correction) against their array code (flow.momentum).

Each variant is called directly (a silent fall-back to the array code cannot
pass for it) on the state of a few NumPy steps of the 3-D rising bubble and
the 3-D bubbly column at small non-cubic grids -- every face-density rule,
no-slip and free-slip walls, reduced and volumetric gravity, with and
without surface tension -- and compared with its reference on the same CuPy
arrays (the same bits; the correction's norms are sums in another order:
1e-12 relative) and on NumPy (1e-12 relative to the field's largest value:
NumPy's ``sin`` may round otherwise than CUDA's).  Run with ``pytest
--backend cupy`` on a GPU machine.
"""
import os

import numpy as np
import pytest
from helpers.twins import check_variant

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow import flow_solver, levelset, momentum

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL = 1e-12

RISING = ("rising_bubble_3d.yaml", "grid.nx=10", "grid.ny=12", "grid.nz=18")
COLUMN = ("bubbly_column_3d_flow.yaml", "grid.nx=12", "grid.ny=10", "grid.nz=20")
#: Case variants: face-density rules, wall types, gravity forms, surface tension.
CONFIGS = {
    "rising-reduced": RISING + ("momentum.gravity=reduced",),
    "rising-volumetric-freeslip-harmonic": RISING + (
        "momentum.gravity=volumetric", "boundaries.top=free_slip", "boundaries.front=free_slip",
        "operator.face_density=harmonic"),
    "column-reduced-arithmetic": COLUMN + ("operator.face_density=arithmetic",),
    "column-no-surface-tension": COLUMN + ("physics.surface_tension=0",),
}


@pytest.fixture(scope="module")
def flow_states():
    """``{config: (flow, state, dt)}``: a few NumPy steps (explicit viscosity)."""
    numpy = get_backend("numpy")
    out = {}
    for name, (file, *overrides) in CONFIGS.items():
        c = load_case(os.path.join(ROOT, "cases", file),
                      overrides + ["momentum.viscosity=explicit", "output.bubbles_every=0"])
        flow = flow_solver(c, numpy)
        state = flow.initial_state()
        for _ in range(3):
            state, rep = flow.step(state)
        out[name] = (flow, state, rep.dt)
    return out


def calls(flow, state, dt):
    """``[(label, twin, host args)]`` of the momentum phase on this state, as
    the flow makes them (the inputs made by the references)."""
    m = momentum
    props = (state.phi, flow.eps, flow.rho_l, flow.rho_g, flow.mu_l, flow.mu_g,
             flow.case.operator.face_density)
    H, rho, mu, faces = m.fluid_properties.reference(*props)
    forces = (levelset.smooth.reference(state.phi, flow.curvature_passes), flow.spacing,
              flow.sigma, flow.heights, flow.buoyancy, flow.y0)
    coef = m.interface_coefficients.reference(*forces)
    coef = None if coef is None else tuple(np.ascontiguousarray(c) for c in coef)
    reduced = (m.ReducedGravity(flow.gravity, flow.rho_g, flow.rho_l)
               if flow.buoyancy != 0 else None)
    gravity = 0.0 if flow.reduced_gravity else flow.gravity
    explicit = (state.velocity, H, mu, faces, coef, dt, flow.spacing, flow.signs, gravity,
                reduced)
    provisional = m.provisional_velocity.reference(*explicit)
    div_star, _ = m.pressure_rhs.reference(provisional, flow.spacing, dt)
    return [
        ("fluid_properties", m.fluid_properties, props),
        ("step_scalars", m.step_scalars, (state.velocity, state.phi, rho, mu, True, True)),
        ("step_scalars-inviscid", m.step_scalars,
         (state.velocity, state.phi, rho, mu, True, False)),
        ("step_scalars-fixed-dt", m.step_scalars,
         (state.velocity, state.phi, rho, mu, False, False)),
        ("interface_coefficients", m.interface_coefficients, forces),
        ("provisional_velocity", m.provisional_velocity, explicit),
        ("divergence", m.divergence, (provisional, flow.spacing)),
        ("pressure_rhs", m.pressure_rhs, (provisional, flow.spacing, dt)),
        ("correct_velocity", m.correct_velocity,
         (provisional, state.p, faces, div_star, dt, flow.spacing)),
        ("correct_velocity-slab", m.correct_velocity,
         (provisional, state.p, faces, None, dt, flow.spacing)),
    ]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_3d_momentum_kernels_match_their_reference(config, flow_states, cp):
    flow, state, dt = flow_states[config]
    assert flow.ndim == 3
    for label, concept, args in calls(flow, state, dt):
        check_variant(config, label, concept, args, cp, {"correct_velocity[1]"}, RTOL,
                      same=np.array_equal)


@pytest.mark.parametrize("planes", [5, 16])
def test_3d_momentum_kernels_in_runs_of_planes(planes, flow_states, cp, monkeypatch):
    """The kernels whose threads take runs of planes (``BF_CELLS3_RUNS``),
    each z block a run of ``planes`` (these grids are small enough for one
    plane a block otherwise), the last run shorter (18 cells, 19 faces
    along z): the reference's bits."""
    from bubbleflow.compute import cuda

    monkeypatch.setattr(cuda, "MIN_BLOCKS_3D", 1)
    monkeypatch.setattr(cuda, "RUN_PLANES", planes)
    flow, state, dt = flow_states["rising-reduced"]
    assert state.phi.shape[0] == 18
    for label, concept, args in calls(flow, state, dt):
        check_variant(planes, label, concept, args, cp, {"correct_velocity[1]"}, RTOL,
                      same=np.array_equal)


def test_3d_fallbacks(cp):
    """The harmonic viscosity mean, float32 and grids of one cell along an
    axis: the variants decline."""
    m = momentum
    phi = cp.linspace(-1, 1, 4 * 5 * 6, dtype=cp.float64).reshape(4, 5, 6)
    args = (0.1, 1000.0, 1.0, 1.0, 0.1, "levelset")
    assert m.fluid_properties.variants["cupy"](phi, *args, "harmonic") is NotImplemented
    assert m.fluid_properties.variants["cupy"](phi.astype(cp.float32), *args) is NotImplemented
    assert m.fluid_properties.variants["cupy"](phi[:, :, :1], *args) is NotImplemented
    velocity = (cp.zeros((4, 5, 7)), cp.zeros((4, 6, 6)), cp.zeros((5, 5, 6)))
    assert m.divergence.variants["cupy"](velocity[::-1], (0.1,) * 3) is NotImplemented
    out = m.divergence.variants["cupy"](velocity, (0.1,) * 3)
    assert out is not NotImplemented and out.shape == (4, 5, 6)


@pytest.mark.parametrize("cells", [(18, 12, 10), (33, 17, 65), (64, 64, 160)])
def test_the_3d_divergence_norms_not_storing_the_divergence_keep_its_bits(cells, cp):
    """``[||div u*||, ||div u||]`` of the correction, the divergence made
    and summed in one pass: the bits of the divergence's kernel then the
    norms' (the largest grid's blocks stride over its cells)."""
    from bubbleflow.flow import momentum3_cuda, momentum_launch

    rng = np.random.default_rng(sum(cells))
    nz, ny, nx = cells
    velocity = tuple(cp.asarray(rng.standard_normal(shape))
                     for shape in ((nz, ny, nx + 1), (nz, ny + 1, nx), (nz + 1, ny, nx)))
    div_star = cp.asarray(rng.standard_normal(cells))
    spacing = (0.1, 0.07, 0.13)
    div, _ = momentum3_cuda.divergence_3d(velocity, spacing)
    want = momentum_launch.norms(div_star, div)
    got = momentum3_cuda._divergence_norms(div_star, velocity, spacing)
    assert bool(cp.array_equal(got, want)), (got, want)
