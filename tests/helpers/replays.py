"""A NumPy stand-in of a CUDA graph for KeyedReplays' tests on the CPU: the
captured call run again on the capture's buffers, its results written into
the arrays of the captured run, as a graph writes at the addresses it
captured."""


class Recorded:
    """The stand-in of a captured graph."""

    def __init__(self, run):
        self.run, self.result = run, run()

    def replay(self):
        leaves, _ = self.result
        again, _ = self.run()
        for dst, src in zip(leaves, again):
            if dst is not None:
                dst[...] = src
        return self.result


def record(run, comm=None, why=None):
    """A capture (KeyedReplays' ``capture``) that always succeeds: :class:`Recorded`."""
    return Recorded(run)
