"""Preconditioners, found by name.

==============================  ============================================
``none``                        identity
``jacobi``                      ``D^-1``
``block_ic``                    IC(0) in blocks of ``m`` grid lines
``incomplete_poisson``          the seed's IP, ``(I - L D^-1)(I - D^-1 L^T)``
``incomplete_poisson_scaled``   IP on ``D^-1/2 A D^-1/2`` (default)
==============================  ============================================
"""
from .base import Identity, Preconditioner
from .block_ic import BlockIC
from .incomplete_poisson import IncompletePoisson, ScaledIncompletePoisson
from .jacobi import Jacobi

PRECONDITIONERS = {
    "none": Identity,
    "jacobi": Jacobi,
    "block_ic": BlockIC,
    "incomplete_poisson": IncompletePoisson,
    "incomplete_poisson_scaled": ScaledIncompletePoisson,
}


def make_preconditioner(name, A, **options):
    """Build the preconditioner called ``name`` for operator ``A``.

    ``options`` go to the constructor (``block_lines`` for ``block_ic``;
    ``check`` for ``jacobi``).
    """
    try:
        cls = PRECONDITIONERS[name]
    except KeyError:
        raise ValueError(f"unknown preconditioner {name!r}; expected one of "
                         f"{', '.join(PRECONDITIONERS)}") from None
    if cls is BlockIC or cls is Jacobi:
        return cls(A, **options)
    return cls(A)


__all__ = ["Preconditioner", "Identity", "Jacobi", "BlockIC", "IncompletePoisson",
           "ScaledIncompletePoisson", "PRECONDITIONERS", "make_preconditioner"]
