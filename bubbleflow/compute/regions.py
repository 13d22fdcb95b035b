"""Connected regions of a mask: the array library's labelling, one twin per backend.

:func:`label_regions` numbers the 4-connected regions of a boolean mask
(SciPy's ``ndimage.label`` on NumPy, CuPy's ``cupyx.scipy.ndimage.label`` on
the GPU, which keeps the field on the device).  The numbering may differ
between the two; callers that report regions order them by what they
describe, not by their numbers.

>>> import numpy as np
>>> labels, count = label_regions(np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=bool))
>>> count, labels.tolist()
(3, [[1, 0, 2], [1, 0, 0], [0, 0, 3]])
"""
from __future__ import annotations

import numpy as np

from .twins import twin

__all__ = ["label_regions"]


@twin
def label_regions(mask):
    """``(labels, count)``: ``labels`` an int32 array of ``mask``'s shape, 0
    outside the mask and ``1 .. count`` on its 4-connected regions."""
    from scipy import ndimage

    labels, count = ndimage.label(np.asarray(mask, dtype=bool))
    return labels.astype(np.int32, copy=False), int(count)


@label_regions.register("cupy")
def _label_regions_cupy(mask):
    import cupy as cp
    from cupyx.scipy import ndimage

    labels, count = ndimage.label(mask.astype(cp.bool_, copy=False))
    return labels.astype(cp.int32, copy=False), int(count)
