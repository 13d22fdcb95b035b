"""Preconditioners, found by name.

==============================  ============================================
``none``                        identity
``jacobi``                      ``D^-1``
``block_ic``                    IC(0) in blocks of ``m`` grid lines
``incomplete_poisson``          plain IP, ``(I - L D^-1)(I - D^-1 L^T)``
``incomplete_poisson_scaled``   IP on ``D^-1/2 A D^-1/2`` (default)
``multigrid``                   V-cycle on aggregated cells (Galerkin)
==============================  ============================================
"""
from .. import registry
from .base import Identity, Preconditioner
from .block_ic import BlockIC
from .incomplete_poisson import IncompletePoisson, ScaledIncompletePoisson
from .jacobi import Jacobi
from .multigrid import Multigrid

#: Names of the preconditioners (:data:`bubbleflow.linalg.registry.PRECONDITIONERS`).
PRECONDITIONERS = tuple(registry.PRECONDITIONERS)


def make_preconditioner(name, A, **options):
    """Build the preconditioner called ``name`` for operator ``A``.

    The class and the options it takes come from its registry entry
    (``block_lines`` for ``block_ic``; ``check`` for ``jacobi``); an option
    it does not take is an error.
    """
    entry = registry.preconditioner(name)
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        raise ValueError(f"preconditioner {name!r} takes no option {', '.join(unknown)}; "
                         f"its options: {', '.join(entry.options) or 'none'}")
    return registry.load(entry.factory)(A, **options)


__all__ = ["Preconditioner", "Identity", "Jacobi", "BlockIC", "IncompletePoisson",
           "ScaledIncompletePoisson", "Multigrid", "PRECONDITIONERS", "make_preconditioner"]
