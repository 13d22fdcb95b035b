"""One rank's slab of a whole field, in one process: the communicator a
:class:`bubbleflow.flow.slabs.SlabPadding` swaps through hands it the
neighbours' planes of the whole field, and its sums are the slab's own (the
caller adds the slabs' parts)."""


class PlanesOf:
    """The swap of a slab of ``whole`` (planes along array axis 0) and a
    sum over one rank."""

    def __init__(self, whole, slab):
        self.whole, self.slab = whole, slab

    def exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        if recv_lower is not None:
            ng = recv_lower.shape[0]
            recv_lower[...] = self.whole[self.slab.lo - ng:self.slab.lo]
        if recv_upper is not None:
            ng = recv_upper.shape[0]
            recv_upper[...] = self.whole[self.slab.hi:self.slab.hi + ng]

    def allreduce_sum(self, a):
        return a
