"""Uniform cell-centred grid on the rectangle [0, lx] x [0, ly]."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Grid"]


@dataclass(frozen=True)
class Grid:
    """A uniform cell-centred grid of ``nx`` x ``ny`` cells.

    Arrays on the grid have shape ``(ny, nx)`` in C order: cell ``(j, i)`` is
    row ``j`` (y index) and column ``i`` (x index), flat index ``j * nx + i``.

    Parameters
    ----------
    nx, ny : int
        Number of cells in x and y.
    lx, ly : float
        Domain size in metres.
    """

    nx: int
    ny: int
    lx: float = 1.0
    ly: float = 1.0
    x: np.ndarray = field(init=False, repr=False, compare=False)
    y: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.nx < 1 or self.ny < 1 or self.lx <= 0 or self.ly <= 0:
            raise ValueError(f"invalid grid {self.nx} x {self.ny} on {self.lx} x {self.ly}")
        object.__setattr__(self, "x", (np.arange(self.nx) + 0.5) * self.hx)
        object.__setattr__(self, "y", (np.arange(self.ny) + 0.5) * self.hy)

    @property
    def hx(self) -> float:
        """Cell width (m)."""
        return self.lx / self.nx

    @property
    def hy(self) -> float:
        """Cell height (m)."""
        return self.ly / self.ny

    @property
    def shape(self) -> tuple:
        return (self.ny, self.nx)

    @property
    def size(self) -> int:
        return self.nx * self.ny

    def mesh(self):
        """Cell-centre coordinates ``(X, Y)``, each of shape ``(ny, nx)``."""
        return np.meshgrid(self.x, self.y)

    @classmethod
    def from_config(cls, grid_cfg) -> "Grid":
        return cls(int(grid_cfg.nx), int(grid_cfg.ny), float(grid_cfg.lx), float(grid_cfg.ly))
