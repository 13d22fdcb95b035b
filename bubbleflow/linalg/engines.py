"""Which engine runs a solve: the selection, kept out of the Krylov loop.

The loop (:mod:`bubbleflow.linalg.krylov`) always has its array engine; an
engine that runs whole iterations on the device is given to it by a
``select(system)`` function.  :func:`selector` makes one for the ``engine``
argument of :func:`~bubbleflow.cg` / :func:`~bubbleflow.dpcg` (a new device
engine per solve); :class:`~bubbleflow.PressureSolver` builds its own once
(:func:`device_engine_for`) and reuses it.  The device engines are found by
name in :data:`bubbleflow.linalg.registry.DEVICE_ENGINES` and imported lazily,
so a CPU-only machine never loads them.
"""
from __future__ import annotations

from . import registry

__all__ = ["selector", "device_engine_for", "ENGINE_CHOICES"]

#: The ``engine`` argument of :func:`~bubbleflow.cg` and :func:`~bubbleflow.dpcg`.
ENGINE_CHOICES = ("auto", "generic", "fused")

_FUSED_ONLY = ("engine='fused' needs CuPy float64, the grid operator, a preconditioner among "
               + "/".join(name for name, entry in registry.PRECONDITIONERS.items()
                          if "fused" in entry.engines)
               + ", A-DEF2, and tiles that divide the grid")


_FUSED_ON_RANKS_ONLY = ("engine='fused' on a rank's slab needs CuPy float64, CG, Jacobi PCG or "
                        "the slab multigrid's PCG without deflation, and NCCL between the "
                        "ranks (or one rank)")


def device_engine_for(A, prec_obj, prec_name, deflation, variant, b, previous=None,
                      name="fused"):
    """The device engine ``name`` for this system, or None where it does not
    apply (another backend or dtype, a preconditioner it cannot apply, ...).

    ``b``: the right-hand side, or any array of its backend and dtype.
    ``previous``: an engine built for an earlier operator of the same grid,
    updated and returned where it fits (its buffers, kernels and launch plan
    kept).
    """
    from ..compute.backend import backend_of

    if backend_of(b).name not in registry.DEVICE_ENGINE_BACKENDS[name]:
        return None
    # A rank's rows (a distributed operator, one rank or several): the
    # engine's rank form, its sums reduced through the operator's communicator.
    table = registry.RANK_DEVICE_ENGINES if getattr(A, "comm", None) is not None \
        else registry.DEVICE_ENGINES
    factory = registry.load(table[name])
    if previous is None:
        return factory(A, prec_obj, prec_name, deflation, variant, b)
    return factory(A, prec_obj, prec_name, deflation, variant, b, previous=previous)


def selector(engine="auto"):
    """``select(system)`` for the Krylov loop, or None for ``"generic"``.

    ``"auto"``: the fused engine where it applies, else the array engine;
    ``"fused"``: the fused engine or a ValueError.
    """
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"engine={engine!r}; expected "
                         + ", ".join(repr(e) for e in ENGINE_CHOICES[:-1])
                         + f" or {ENGINE_CHOICES[-1]!r}")
    if engine == "generic":
        return None

    def select(system):
        device = device_engine_for(system.A, system.prec_obj, system.prec_name,
                                   system.deflation, system.variant, system.b)
        if device is None and engine == "fused":
            raise ValueError(_FUSED_ON_RANKS_ONLY if system.comm is not None else _FUSED_ONLY)
        return device
    return select
