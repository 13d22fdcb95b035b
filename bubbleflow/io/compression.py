"""How a result's fields are stored: compressed or not, in what chunks.

Chosen by measurement (``scripts/compression_study.py``; figures in
``docs/performance_records.md``, "Writing the fields"): on the machines measured the
disk takes a field an order of magnitude or more faster than a single
thread can gzip it, so

* a pressure case, whose one write comes after the solve and before the
  command ends, writes its fields uncompressed (``none``: at the disk's
  speed, two to three times the bytes);
* a flow run, whose snapshots are written in a background thread while the
  next steps go on, compresses them with gzip at level 1 (a third of the
  bytes, written in the time of the steps between two snapshots).

A gzip field of more than one chunk has its chunks compressed by a pool of
threads (zlib releases the interpreter while it compresses) and written
as they are (``write_direct_chunk``), in order: the file is what HDF5's
own deflate filter writes, and any HDF5 reader reads it; the pool leaves
one core to the steps that go on meanwhile (:func:`compression_threads`).

``output.compression: auto`` (the default) is that choice by mode;
``none`` or ``gzip`` (``output.compression_level`` 1-9) set it.  Gzip's
chunks are blocks of whole rows of about :data:`CHUNK_BYTES` (faster to
write than h5py's automatic chunks, and a better ratio, as measured); byte
shuffling is left out (it wrote slower for a small gain).  Only gzip is
offered: stock HDF5 and ParaView read it without a plugin, which LZF or
Blosc would need.
"""
from __future__ import annotations

import math
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..compute.host_cores import spare_cores

__all__ = ["Compression", "COMPRESSIONS", "AUTO_COMPRESSION", "CHUNK_BYTES", "write_field",
           "compression_threads"]

#: ``output.compression``'s values.
COMPRESSIONS = ("auto", "none", "gzip")
#: What ``auto`` is for each mode of case.
AUTO_COMPRESSION = {"pressure": "none", "flow": "gzip"}
#: The bytes of one gzip chunk (whole rows along the first axis).
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Compression:
    """How to store a field: ``method`` ``none`` or ``gzip``, gzip's
    ``level``."""

    method: str = "gzip"
    level: int = 1

    @classmethod
    def for_output(cls, output, mode):
        """The storage an ``output`` section (its ``compression`` and
        ``compression_level``) sets for a case of ``mode``."""
        method = output.compression
        if method == "auto":
            method = AUTO_COMPRESSION[mode]
        return cls(method, int(output.compression_level))

    def options(self, shape, itemsize=8):
        """``h5py.Group.create_dataset`` keywords for a dataset of ``shape``."""
        if self.method == "none" or not shape or math.prod(shape) == 0:
            return {}
        row = itemsize * math.prod(shape[1:])
        rows = max(1, min(int(shape[0]), CHUNK_BYTES // max(row, 1)))
        return dict(compression="gzip", compression_opts=self.level,
                    chunks=(rows,) + tuple(shape[1:]))


def compression_threads():
    """Threads that compress a field's chunks: :func:`.host_cores.spare_cores`
    (one core left to the steps)."""
    return spare_cores()


def write_field(group, name, data, compression):
    """``group[name]`` made from the array ``data``, stored as
    ``compression`` (a :class:`Compression`) says; returns the dataset.

    With gzip, the chunks (:meth:`Compression.options`: blocks of whole rows)
    are compressed with zlib at the level set, by :func:`compression_threads`
    threads, and written in order with ``write_direct_chunk``: the bytes
    HDF5's deflate filter would store, the last chunk filled out with zeros
    past the array's end (as a reader never looks there)."""
    options = compression.options(data.shape, data.dtype.itemsize)
    chunks = options.get("chunks")
    if not options or chunks[0] >= data.shape[0]:
        return group.create_dataset(name, data=data, **options)
    data = np.ascontiguousarray(data)              # (the chunks are read as raw bytes)
    ds = group.create_dataset(name, shape=data.shape, dtype=data.dtype, **options)
    rows, level = chunks[0], compression.level
    starts = range(0, data.shape[0], rows)
    tail = (0,) * (data.ndim - 1)

    def packed(start):
        block = data[start:start + rows]
        if block.shape[0] < rows:
            full = np.zeros(chunks, dtype=data.dtype)
            full[:block.shape[0]] = block
            block = full
        return zlib.compress(memoryview(block).cast("B"), level)

    with ThreadPoolExecutor(max_workers=compression_threads()) as pool:
        for start, blob in zip(starts, pool.map(packed, starts)):
            ds.id.write_direct_chunk((start,) + tail, blob)
    return ds
