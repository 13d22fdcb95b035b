"""The n-D grid and its partition into boxes."""
import numpy as np
import pytest

from bubbleflow.mesh.grid import Grid


def test_2d_shorthand_and_regular_agree():
    g, r = Grid(40, 80, 1.0, 2.0), Grid.regular((40, 80), (1.0, 2.0))
    assert g == r and hash(g) == hash(r)
    assert g.shape == (80, 40) and g.spacing == (0.025, 0.025) and g.ndim == 2
    X, Y = g.mesh()
    X0, Y0 = np.meshgrid(g.x, g.y)
    assert np.array_equal(X, X0) and np.array_equal(Y, Y0)
    assert g.faces_shape("x") == (80, 39) and g.faces_shape("y") == (79, 40)


def test_3d_grid():
    g = Grid.regular((4, 3, 2), (1.0, 1.5, 0.5))
    assert g.shape == (2, 3, 4) and g.size == 24 and g.hz == 0.25
    X, Y, Z = g.mesh()
    assert X.shape == Y.shape == Z.shape == (2, 3, 4)
    assert np.array_equal(X[0, 0], g.x) and np.array_equal(Y[0, :, 0], g.y)
    assert np.array_equal(Z[:, 0, 0], g.z)
    assert g.faces_shape("z") == (1, 3, 4)


@pytest.mark.parametrize("cells,blocks", [((64, 64), (8, 8)), ((37, 23), (5, 4)),
                                          ((9, 5), (1, 3)), ((10, 7), (10, 7))])
def test_partition_matches_its_edges(cells, blocks):
    p = Grid(*cells).partition(blocks)
    lab = p.labels()
    assert lab.shape == (cells[1], cells[0]) and lab.max() == p.count - 1
    ex, ey = p.edges("x"), p.edges("y")
    for bj in range(blocks[1]):
        for bi in range(blocks[0]):
            box = lab[ey[bj]:ey[bj + 1], ex[bi]:ex[bi + 1]]
            assert box.size and (box == bj * blocks[0] + bi).all()
    assert p.even == all(n % b == 0 for n, b in zip(cells, blocks))


def test_partition_3d_and_errors():
    p = Grid.regular((4, 4, 4)).partition((2, 2, 2))
    lab = p.labels()
    assert lab[0, 0, 0] == 0 and lab[0, 0, 3] == 1 and lab[0, 3, 0] == 2 and lab[3, 0, 0] == 4
    assert np.bincount(lab.ravel()).tolist() == [8] * 8
    with pytest.raises(ValueError):
        Grid(4, 4).partition((5, 1))
    with pytest.raises(ValueError):
        Grid(4, 4).partition((2, 2, 2))
    with pytest.raises(ValueError):
        Grid(0, 4)
    with pytest.raises(AttributeError):
        Grid(4, 4).cells = (1, 1)
