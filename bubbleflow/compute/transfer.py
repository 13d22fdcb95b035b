"""Moving arrays between backends: the host/device policy in one place.

Code above the compute layer asks for an array *on* a backend and never
tests which backend it is.
"""
from __future__ import annotations

import numpy as np

from .backend import backend_of

__all__ = ["on_backend", "to_host", "on_device", "upload"]


def on_backend(a, backend, dtype=None):
    """``a`` as an array of ``backend`` (``dtype`` when given), moved only
    when it lives elsewhere (a CuPy array asked for on NumPy is copied to
    the host; a host array asked for on CuPy is sent in one transfer)."""
    if backend.name == "numpy":
        a = backend_of(a).to_host(a)
    return backend.xp.asarray(a, dtype=dtype)


def to_host(a, backend):
    """``a`` (an array or sparse matrix of ``backend``) on the host: a copy
    from the device, or ``a`` itself on NumPy."""
    return a.get() if backend.name == "cupy" else a


def on_device(backend) -> bool:
    """Does ``backend`` run on a GPU (the fused iteration and its set-up)?"""
    return backend.name == "cupy"


def upload(backend, arrays):
    """The NumPy arrays of the dict ``arrays`` on the backend, same keys: on
    CuPy packed into one host buffer and sent in one transfer, then viewed
    (each piece 16-byte aligned); on NumPy the arrays themselves."""
    if backend.name == "numpy" or not arrays:
        return dict(arrays)
    xp = backend.xp
    offsets, total = {}, 0
    for key, a in arrays.items():
        offsets[key] = total
        total += -(-a.nbytes // 16) * 16
    buf = np.empty(max(total, 16), dtype=np.uint8)
    for key, a in arrays.items():
        a = np.ascontiguousarray(a)
        buf[offsets[key]: offsets[key] + a.nbytes] = a.reshape(-1).view(np.uint8)
    dbuf = xp.asarray(buf)
    out = {}
    for key, a in arrays.items():
        o = offsets[key]
        out[key] = dbuf[o: o + a.nbytes].view(a.dtype).reshape(a.shape)
    return out
