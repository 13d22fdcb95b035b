"""Uniform cell-centred grids of any dimension, and their partitions into blocks.

A :class:`Grid` carries its dimension: ``cells`` and ``lengths`` are given
per axis in the order ``x, y[, z]``; arrays on the grid have the reversed
``shape`` in C order (``(ny, nx)`` in 2-D, ``(nz, ny, nx)`` in 3-D), so the
x index varies fastest.  ``Grid(nx, ny, lx, ly)`` is the 2-D shorthand.

A :class:`Partition` cuts a grid into equal boxes of cells along each axis:
the deflation subdomains and the tiles of a GPU engine are partitions of
one grid.  The ranks of a distributed solve hold slabs of whole planes
(:mod:`bubbleflow.mesh.ranks`), whose halos are contiguous.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["Grid", "Partition", "AXES", "array_axis", "face_sides", "vertical_heights",
           "interior_face_heights"]

AXES = ("x", "y", "z")


def array_axis(ndim, grid_axis):
    """The array axis of grid axis ``grid_axis`` (x = 0) of an ``ndim``-D
    grid: arrays hold the grid's axes reversed, x fastest."""
    return ndim - 1 - grid_axis


def face_sides(ndim, axis):
    """Index of the cells below and above the interior faces normal to grid
    axis ``axis`` (x = 0) in an ``ndim``-D array on the grid."""
    a = array_axis(ndim, axis)
    lower = tuple(slice(None, -1) if k == a else slice(None) for k in range(ndim))
    upper = tuple(slice(1, None) if k == a else slice(None) for k in range(ndim))
    return lower, upper


def vertical_heights(grid, xp=np, planes=None):
    """``(cells, faces)``: the heights of the cells of the planes ``planes =
    (lo, hi)`` of the vertical axis (None: all) and of the interior vertical
    faces between them, float64 on ``xp``, shaped to broadcast along array
    axis 0."""
    lo, hi = planes if planes is not None else (0, grid.shape[0])
    shape = (-1,) + (1,) * (grid.ndim - 1)
    cells = xp.asarray(np.asarray(grid.centres[-1], dtype=np.float64)[lo:hi]).reshape(shape)
    faces = xp.asarray(np.arange(lo + 1, hi) * grid.spacing[-1], dtype=np.float64).reshape(shape)
    return cells, faces


def interior_face_heights(grid, xp=np, planes=None):
    """The heights of every grid axis' interior faces on the planes
    ``planes`` (:func:`vertical_heights`): the cells' heights, along the
    vertical axis the faces' own."""
    cells, faces = vertical_heights(grid, xp, planes)
    return tuple(faces if a == grid.ndim - 1 else cells for a in range(grid.ndim))


class Grid:
    """A uniform cell-centred grid on the box ``[0, lx] x [0, ly] (x [0, lz])``.

    ``Grid(nx, ny, lx, ly)`` is the 2-D shorthand; :meth:`regular` makes a
    grid of any dimension: ``Grid.regular((nx, ny, nz), (lx, ly, lz))``.

    Parameters
    ----------
    nx, ny : int
        Cells in x and y.
    lx, ly : float
        Domain size in metres.

    Attributes
    ----------
    ndim : int
    cells : tuple of int
        Cells per axis, ``(nx, ny[, nz])``.
    lengths : tuple of float
        Domain size per axis (m).
    spacing : tuple of float
        Cell size per axis (m).
    shape : tuple of int
        Array shape, axes reversed: ``(ny, nx)`` or ``(nz, ny, nx)``.

    Examples
    --------
    >>> g = Grid(4, 2, 2.0, 1.0)
    >>> g.shape, g.spacing, g.size
    ((2, 4), (0.5, 0.5), 8)
    >>> Grid.regular((4, 2, 3), (1.0, 1.0, 1.5)).shape
    (3, 2, 4)
    """

    def __init__(self, nx, ny, lx=1.0, ly=1.0):
        self._set((nx, ny), (lx, ly))

    @classmethod
    def regular(cls, cells, lengths=None):
        """A grid of ``cells[a]`` cells of length ``lengths[a]`` (default 1) along axis ``a``."""
        grid = cls.__new__(cls)
        cells = tuple(cells)
        grid._set(cells, tuple(lengths) if lengths is not None else (1.0,) * len(cells))
        return grid

    def planes(self, lo, hi):
        """The grid of planes ``lo:hi`` of the last axis (array axis 0: a
        rank's slab), with this grid's very spacing (its own coordinates
        start at the slab)."""
        grid = Grid.__new__(Grid)
        cells = self.cells[:-1] + (hi - lo,)
        grid._set(cells, self.lengths[:-1] + (self.spacing[-1] * (hi - lo),))
        object.__setattr__(grid, "spacing", self.spacing)
        return grid

    def _set(self, cells, lengths):
        if not 1 <= len(cells) <= len(AXES) or len(lengths) != len(cells):
            raise ValueError(f"a grid needs 1 to {len(AXES)} axes and one length per axis; "
                             f"got cells {cells} and lengths {lengths}")
        cells = tuple(int(n) for n in cells)
        lengths = tuple(float(v) for v in lengths)
        if min(cells) < 1 or not all(v > 0 for v in lengths):
            raise ValueError("invalid grid " + " x ".join(map(str, cells)) + " on "
                             + " x ".join(map(str, lengths)))
        self.cells, self.lengths = cells, lengths
        self.spacing = tuple(v / n for n, v in zip(cells, lengths))
        # Cell-centre coordinates per axis (NumPy, on the host).
        self.centres = tuple((np.arange(n) + 0.5) * h for n, h in zip(cells, self.spacing))

    # ---------------------------------------------------------------- shape
    @property
    def ndim(self) -> int:
        return len(self.cells)

    @property
    def shape(self) -> tuple:
        return self.cells[::-1]

    @property
    def size(self) -> int:
        return math.prod(self.cells)

    def array_axis(self, axis) -> int:
        """The array axis of grid axis ``axis`` (an index or ``"x"``, ``"y"``, ``"z"``)."""
        a = AXES.index(axis) if isinstance(axis, str) else int(axis)
        if not 0 <= a < self.ndim:
            raise ValueError(f"axis {axis!r} not in a {self.ndim}-D grid")
        return array_axis(self.ndim, a)

    def faces_shape(self, axis) -> tuple:
        """Shape of the array of interior faces normal to ``axis``."""
        shape = list(self.shape)
        shape[self.array_axis(axis)] -= 1
        return tuple(shape)

    # ------------------------------------------------- 2-D (and 3-D) names
    nx = property(lambda self: self.cells[0])
    ny = property(lambda self: self.cells[1])
    nz = property(lambda self: self.cells[2])
    lx = property(lambda self: self.lengths[0])
    ly = property(lambda self: self.lengths[1])
    lz = property(lambda self: self.lengths[2])
    hx = property(lambda self: self.spacing[0], doc="Cell width (m).")
    hy = property(lambda self: self.spacing[1], doc="Cell height (m).")
    hz = property(lambda self: self.spacing[2])
    x = property(lambda self: self.centres[0])
    y = property(lambda self: self.centres[1])
    z = property(lambda self: self.centres[2])

    def mesh(self):
        """Cell-centre coordinates ``(X, Y[, Z])``, each of the grid's array shape."""
        return tuple(np.meshgrid(*self.centres[::-1], indexing="ij")[::-1])

    def partition(self, blocks):
        """The grid cut into ``blocks[a]`` equal boxes along axis ``a`` (:class:`Partition`)."""
        return Partition(self, blocks)

    def blocks_of_about(self, cells, max_blocks=None):
        """Block counts per axis whose boxes are about ``cells`` cells wide.

        Along each axis the count is the divisor of the axis's cells whose
        box width is nearest to ``cells`` (on a log scale: 8 and 32 are
        equally far from 16), so every box has the same cells; ties go to
        the smaller boxes.  Refining the grid then refines the partition.
        With ``max_blocks``, the width grows until there are at most that
        many boxes.
        """
        width = float(cells)
        while True:
            counts = tuple(blocks_near(n, width) for n in self.cells)
            if max_blocks is None or math.prod(counts) <= max_blocks:
                return counts
            width *= 1.25

    # ----------------------------------------------------------------- misc
    def __eq__(self, other):
        return isinstance(other, Grid) and (self.cells, self.lengths) == (other.cells, other.lengths)

    def __hash__(self):
        return hash((self.cells, self.lengths))

    def __setattr__(self, name, value):
        if name in getattr(self, "__dict__", {}):
            raise AttributeError(f"Grid is immutable: cannot set {name}")
        object.__setattr__(self, name, value)

    def __repr__(self):
        if self.ndim == 2:
            return f"Grid(nx={self.nx}, ny={self.ny}, lx={self.lx}, ly={self.ly})"
        return f"Grid.regular({self.cells}, {self.lengths})"

    @classmethod
    def from_config(cls, grid_cfg) -> "Grid":
        """The grid of a case's ``grid`` section: 3-D when it gives ``nz``."""
        nz = getattr(grid_cfg, "nz", None)
        if nz is None:
            return cls(int(grid_cfg.nx), int(grid_cfg.ny), float(grid_cfg.lx), float(grid_cfg.ly))
        lz = 1.0 if getattr(grid_cfg, "lz", None) is None else float(grid_cfg.lz)
        return cls.regular((int(grid_cfg.nx), int(grid_cfg.ny), int(nz)),
                           (float(grid_cfg.lx), float(grid_cfg.ly), lz))


def blocks_near(n, cells):
    """The divisor ``p`` of ``n`` whose width ``n / p`` is nearest to
    ``cells`` on a log scale (ties: the larger ``p``); ``n`` cells, ``cells``
    at least 1.

    >>> blocks_near(160, 16), blocks_near(40, 16), blocks_near(7, 16)
    (10, 2, 1)
    """
    n, cells = int(n), float(cells)
    if n < 1 or not cells >= 1:
        raise ValueError(f"blocks_near({n}, {cells}): expected n >= 1 and cells >= 1")
    divisors = [p for p in range(1, n + 1) if n % p == 0]
    return min(divisors, key=lambda p: (abs(math.log(n / p / cells)), -p))


class Partition:
    """A grid cut into boxes: ``blocks[a]`` boxes along axis ``a`` (x first).

    Cell ``c`` of an axis with ``n`` cells and ``b`` boxes lies in box
    ``floor(c * b / n)``, so boxes differ by at most one cell when ``b`` does
    not divide ``n``.  Boxes are numbered with x fastest, like the cells.

    Examples
    --------
    >>> p = Grid(6, 4).partition((3, 2))
    >>> p.count, p.box_shape
    (6, (2, 2))
    >>> p.labels()
    array([[0, 0, 1, 1, 2, 2],
           [0, 0, 1, 1, 2, 2],
           [3, 3, 4, 4, 5, 5],
           [3, 3, 4, 4, 5, 5]])
    """

    def __init__(self, grid, blocks):
        blocks = tuple(int(b) for b in blocks)
        if len(blocks) != grid.ndim:
            raise ValueError(f"{len(blocks)} block counts for a {grid.ndim}-D grid")
        if any(b < 1 or b > n for b, n in zip(blocks, grid.cells)):
            raise ValueError(f"blocks {blocks} do not fit the grid's cells {grid.cells}")
        self.grid, self.blocks = grid, blocks

    @property
    def count(self) -> int:
        """Number of boxes."""
        return math.prod(self.blocks)

    @property
    def even(self) -> bool:
        """Every box has the same cells (the blocks divide the cells)."""
        return all(n % b == 0 for n, b in zip(self.grid.cells, self.blocks))

    @property
    def box_shape(self) -> tuple:
        """Array shape of a box (of the largest boxes when uneven)."""
        return tuple(-(-n // b) for n, b in zip(self.grid.cells, self.blocks))[::-1]

    def edges(self, axis) -> np.ndarray:
        """Cell indices where the boxes along grid axis ``axis`` start, and the end."""
        a = AXES.index(axis) if isinstance(axis, str) else int(axis)
        n, b = self.grid.cells[a], self.blocks[a]
        return -((-np.arange(b + 1) * n) // b)            # ceil(k n / b)

    def box_sizes(self) -> np.ndarray:
        """Cells per box, ``(count,)`` int64 on the host, in the boxes' order
        (x fastest): the outer product of the box widths along each axis.

        >>> Grid(5, 2).partition((2, 2)).box_sizes()
        array([3, 2, 3, 2])
        """
        size = np.ones(1, dtype=np.int64)
        for a in reversed(range(self.grid.ndim)):              # the slowest axis first
            size = (size[:, None] * np.diff(self.edges(a))[None, :]).ravel()
        return size

    def labels(self, xp=np, planes=None):
        """The box of every cell: an int64 array of the grid's shape, on
        ``xp``; with ``planes = (lo, hi)``, of those planes of the last grid
        axis (array axis 0) only: a rank's slab."""
        label, stride = None, 1
        last = len(self.blocks) - 1
        for a, (n, b) in enumerate(zip(self.grid.cells, self.blocks)):
            lo, hi = planes if a == last and planes is not None else (0, n)
            index = (xp.arange(lo, hi, dtype=xp.int64) * b) // n
            index = index.reshape((hi - lo,) + (1,) * a) * stride
            label = index if label is None else index + label
            stride *= b
        return label

    def __repr__(self):
        return f"<Partition {' x '.join(map(str, self.blocks))} of {self.grid!r}>"
