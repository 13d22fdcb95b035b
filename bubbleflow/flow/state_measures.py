"""The gas's benchmark quantities of a flow state, summed on the device and
read in one transfer with whatever else the step reads.

The level set's sums (:func:`.bubble_measures.bubble_sums`) and, with a
volume fraction, the fraction's (:func:`.vof_diagnostics.gas_sums`) are
device arrays a step queues with its end; :meth:`StateMeasures.read` reads
them, the step's other device figures beside them, and turns them into the
quantities (with a volume fraction, its area or volume, centroid and rise
velocity replace the level set's).  On ranks the sums are the whole grid's
(the partition's ``padding`` reduces them).
"""
from __future__ import annotations

from . import bubble_measures, vof_diagnostics

__all__ = ["StateMeasures"]


class StateMeasures:
    """The sums and quantities of the gas of a state on a grid of
    ``spacing``, the level set's interface ``eps`` wide (see the module)."""

    def __init__(self, backend, spacing, eps, padding):
        self.backend, self.spacing, self.eps, self.padding = backend, spacing, eps, padding

    def sums(self, state):
        """The device sums of the state's quantities (a list)."""
        sums = [bubble_measures.bubble_sums(state.phi, state.velocity, self.spacing, self.eps,
                                            padding=self.padding)]
        if state.c is not None:
            sums.append(vof_diagnostics.gas_sums(state.c, state.velocity, self.spacing,
                                                 padding=self.padding))
        return sums

    def read(self, state, norms=None, extra=(), sums=None):
        """``(quantities, norms, extra)``: the state's quantities (host
        floats), the device array ``norms`` as a tuple of host floats and the
        device arrays ``extra`` (a list) on the host, in one transfer.
        ``sums``: the state's :meth:`sums`, where they were taken already."""
        sums = list(self.sums(state) if sums is None else sums)
        if norms is not None:
            sums.append(norms)
        sums.extend(extra)
        # One wait for the device, no packing kernel (Backend.to_host_many).
        host = self.backend.to_host_many(sums)
        host, extra = host[:len(host) - len(extra)], host[len(host) - len(extra):]
        d = bubble_measures.bubble_quantities(host[0], self.spacing)
        if state.c is not None:
            d.update(vof_diagnostics.gas_quantities(host[1], self.spacing))
        rest = host[2 if state.c is not None else 1:]
        return d, tuple(float(x) for x in (rest[0] if rest else ())), extra
