"""The root attributes every bubbleflow result carries: made when it is written, read back.

Their names are :mod:`.layout`'s (``bubbleflow_version``, ``case``,
``backend``...).  A pressure result and a flow run's index both store what
:func:`header_attrs` gives and a ``created`` stamp (:func:`created_stamp`), so
that every file says what made it, from which case, and when.
"""
from __future__ import annotations

import datetime as _dt

import h5py

from .layout import BACKEND, CASE, DEVICE, FACE_DENSITY, PRECISION, VERSION

__all__ = ["header_attrs", "created_stamp", "read_attrs"]


def header_attrs(*, version, case_yaml, backend, device, precision, face_density):
    """The root attributes every result carries (a flow writer adds its own)."""
    return {VERSION: version, CASE: case_yaml, BACKEND: backend, DEVICE: device,
            PRECISION: precision, FACE_DENSITY: face_density}


def created_stamp():
    """The ``created`` attribute of a new file: now, UTC, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read_attrs(path):
    """The root attributes of ``path`` (a dict; raises what h5py raises)."""
    with h5py.File(path, "r") as fh:
        return {k: fh.attrs[k] for k in fh.attrs}
