"""Level set, random layouts and phase fields."""
import numpy as np
import pytest
from types import SimpleNamespace

from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import (Circle, build_levelset, heaviside, phase_fields,
                                 place_random_bubbles)


def test_signed_distance_of_one_bubble_and_surface():
    g = Grid(64, 64)
    X, Y = g.mesh()
    phi = build_levelset(g, None, [Circle(0.5, 0.5, 0.2)])
    np.testing.assert_allclose(phi, np.hypot(X - 0.5, Y - 0.5) - 0.2)
    phi = build_levelset(g, 0.6)
    np.testing.assert_allclose(phi, 0.6 - Y)
    # A droplet in the gas above the surface is liquid.
    phi = build_levelset(g, 0.3, [Circle(0.5, 0.7, 0.1, gas=False)])
    assert phi[int(0.7 * 64), 32] > 0 and phi[int(0.5 * 64), 32] < 0


def test_random_bubbles_reproducible_inside_and_apart():
    g = Grid(64, 64)
    spec = SimpleNamespace(count=12, radius=0.05, seed=3, min_gap=0.01, region=(0.1, 0.9, 0.1, 0.7))
    a = place_random_bubbles(spec, g)
    b = place_random_bubbles(spec, g)
    assert a == b and len(a) == 12
    for i, c in enumerate(a):
        assert 0.1 + 0.05 <= c.x <= 0.9 - 0.05 and 0.1 + 0.05 <= c.y <= 0.7 - 0.05
        for d in a[i + 1:]:
            assert np.hypot(c.x - d.x, c.y - d.y) >= 0.11 - 1e-12
    other = place_random_bubbles(SimpleNamespace(**{**vars(spec), "seed": 4}), g)
    assert other != a
    with pytest.raises(ValueError, match="could place only"):
        place_random_bubbles(SimpleNamespace(count=200, radius=0.1, seed=0, min_gap=0.0, region=None), g)


def test_heaviside_and_face_density_rules():
    eps = 0.1
    phi = np.linspace(-0.3, 0.3, 61)
    H = heaviside(phi, eps)
    assert H[0] == 0 and H[-1] == 1 and H[30] == pytest.approx(0.5)
    assert np.all(np.diff(H) >= 0)
    g = Grid(8, 8)
    phi = build_levelset(g, 0.5)
    for rule in ("arithmetic", "harmonic", "levelset"):
        ph = phase_fields(g, phi, 1000.0, 1.0, 1e-3, 1e-5, rule=rule)
        assert ph.rho_x.shape == (8, 7) and ph.rho_y.shape == (7, 8)
        assert ph.rho.min() >= 1.0 and ph.rho.max() <= 1000.0
    # Across the surface (between rows 3 and 4) the rules differ as they should.
    a = phase_fields(g, phi, 1000.0, 1.0, 1e-3, 1e-5, "arithmetic").rho_y[3, 0]
    h = phase_fields(g, phi, 1000.0, 1.0, 1e-3, 1e-5, "harmonic").rho_y[3, 0]
    assert a == pytest.approx(500.5) and h == pytest.approx(2000 / 1001)
    with pytest.raises(ValueError):
        phase_fields(g, phi, 1000.0, 1.0, 1e-3, 1e-5, "geometric")


def _swarm(rng, count, nd):
    """Bubbles and droplets at random, some overlapping, some past the walls."""
    return [Circle(float(rng.uniform(-0.1, 1.1)), float(rng.uniform(-0.1, 1.1)),
                   float(rng.uniform(0.01, 0.15)), gas=bool(rng.random() < 0.7),
                   z=float(rng.uniform(-0.1, 1.9)) if nd == 3 else None) for _ in range(count)]


@pytest.mark.parametrize("grid", [Grid(97, 131, 1.0, 1.4), Grid.regular((23, 19, 41), (1.0, 0.9, 1.8))])
@pytest.mark.parametrize("surface", [1.2, None])
def test_the_blocked_build_has_the_bits_of_the_whole_grid_passes(grid, surface, monkeypatch):
    """On the host the level set is filled a few planes at a time, shapes
    too far from a block skipped there: the same bits as the passes over
    the whole grid, one shape at a time (a last block shorter than the
    others included)."""
    from bubbleflow.mesh import levelset

    monkeypatch.setattr(levelset, "BUILD_PLANES", 6)
    circles = _swarm(np.random.default_rng(7), 40, grid.ndim)
    got = build_levelset(grid, surface, circles)
    want = levelset._build.reference(grid, surface, tuple(circles), None, 0, grid.shape[0])
    assert got.shape == grid.shape and np.array_equal(got, want)
    # Gas and liquid both there.
    assert (got < 0).any() and (got > 0).any()


def test_the_level_set_is_built_on_the_backend(backend):
    grid = Grid(64, 96, 1.0, 1.5)
    circles = _swarm(np.random.default_rng(3), 12, 2)
    phi = build_levelset(grid, 1.1, circles, backend=backend)
    assert type(phi) is type(backend.xp.zeros(1))
    np.testing.assert_allclose(backend.to_host(phi), build_levelset(grid, 1.1, circles),
                               rtol=0, atol=1e-15)


@pytest.mark.parametrize("grid", [Grid(40, 57, 1.0, 1.4), Grid.regular((11, 9, 30), (1.0, 0.9, 1.8))])
def test_a_slab_of_planes_has_the_whole_grids_bits(grid, monkeypatch):
    """A rank's planes built alone: those rows of the whole grid's level
    set, bit for bit, on the host's builder and on the whole-grid passes."""
    from bubbleflow.mesh import levelset

    monkeypatch.setattr(levelset, "BUILD_PLANES", 4)
    circles = _swarm(np.random.default_rng(11), 15, grid.ndim)
    whole = build_levelset(grid, 1.1, circles)
    for lo, hi in ((0, 7), (5, 19), (grid.shape[0] - 3, grid.shape[0])):
        assert np.array_equal(build_levelset(grid, 1.1, circles, planes=(lo, hi)), whole[lo:hi])
        assert np.array_equal(levelset._build.reference(grid, 1.1, tuple(circles), None, lo, hi),
                              whole[lo:hi])
    with pytest.raises(ValueError, match="planes 3:2"):
        build_levelset(grid, 1.1, circles, planes=(3, 2))
