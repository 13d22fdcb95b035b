"""How a result's fields are stored: compressed or not, in what chunks.

Chosen by measurement (``scripts/compression_study.py`` and the records in
``docs/performance_records.md``, "Writing the fields"): gzip at its fastest
level shrinks a field of smooth values (the level set, the pressure, the
velocities) little, at a small part of a disk's speed a thread, while a
field of a few distinct values (the density, the volume fraction) shrinks
tens to hundreds of times, about as fast as a disk writes.  So ``adaptive``, what ``output.compression: auto`` is for
both a pressure case and a flow's snapshots, compresses a sample of each
field first (:data:`SAMPLE_CHUNKS` places of :data:`SAMPLE_BYTES`) and
stores the field with gzip where the sample shrank at least
:data:`ADAPTIVE_MIN_RATIO` times, else uncompressed (at the disk's speed).
The choice depends on the values only, so a run writes the same storage
on every machine.

A field is read to the host and written in blocks of whole rows of about
:data:`BLOCK_BYTES` (:meth:`.compute.backend.Backend.host_blocks`: from a
GPU, the next block's copy runs while this one is written), so a field is
never copied to the host whole.  A gzip field of more than one chunk has
its chunks compressed by a pool of threads (zlib releases the interpreter
while it compresses) and written as they are (``write_direct_chunk``), in
order: the file is what HDF5's own deflate filter writes, and any HDF5
reader reads it; the pool leaves one core to the steps that go on
meanwhile (:func:`compression_threads`).

``output.compression: auto`` (the default) is that choice; ``none`` or
``gzip`` (``output.compression_level`` 1-9) set it.  Gzip's
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

from ..compute.backend import backend_of
from ..compute.host_cores import spare_cores

__all__ = ["Compression", "COMPRESSIONS", "AUTO_COMPRESSION", "CHUNK_BYTES", "BLOCK_BYTES",
           "ADAPTIVE_MIN_RATIO", "SAMPLE_CHUNKS", "SAMPLE_BYTES", "write_field",
           "compression_threads"]

#: ``output.compression``'s values.
COMPRESSIONS = ("auto", "none", "gzip")
#: What ``auto`` is for each mode of case.
AUTO_COMPRESSION = {"pressure": "adaptive", "flow": "adaptive"}
#: The bytes of one gzip chunk (whole rows along the first axis).
CHUNK_BYTES = 1 << 20
#: The bytes of a block a field is read to the host and written in (whole
#: gzip chunks).
BLOCK_BYTES = 32 << 20
#: ``adaptive`` stores a field with gzip where its sample shrank at least
#: this many times.
ADAPTIVE_MIN_RATIO = 4.0
#: Places of a field, spread over it, that ``adaptive`` compresses to choose,
#: and the bytes it compresses at each.
SAMPLE_CHUNKS = 8
SAMPLE_BYTES = 64 << 10


@dataclass(frozen=True)
class Compression:
    """How to store a field: ``method`` ``none``, ``gzip`` or ``adaptive``
    (gzip where a sample of the field's chunks shrinks enough), gzip's
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
        """``h5py.Group.create_dataset`` keywords for a gzip dataset of
        ``shape`` (none for ``none``)."""
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
    """``group[name]`` made from the array ``data`` (on the host or a GPU),
    stored as ``compression`` (a :class:`Compression`) says; returns the
    dataset.

    The field goes to the file in blocks of whole rows
    (:data:`BLOCK_BYTES`).  With gzip, the chunks (:meth:`Compression.options`:
    blocks of whole rows) are compressed with zlib at the level set, by
    :func:`compression_threads` threads, and written in order with
    ``write_direct_chunk``: the bytes HDF5's deflate filter would store, the
    last chunk filled out with zeros past the array's end (as a reader never
    looks there).  ``adaptive`` is gzip where the field's sample
    (:data:`SAMPLE_CHUNKS` places of :data:`SAMPLE_BYTES`) shrinks at least
    :data:`ADAPTIVE_MIN_RATIO` times, else ``none``."""
    backend = backend_of(data)
    if data.ndim == 0 or data.size == 0:
        return group.create_dataset(name, data=backend.to_host(data))
    if compression.method == "adaptive":
        method = "gzip" if _sample_shrinks(data, compression, backend) else "none"
        compression = Compression(method, compression.level)
    options = compression.options(data.shape, data.dtype.itemsize)
    row_bytes = data.dtype.itemsize * math.prod(data.shape[1:])
    if not options:
        ds = group.create_dataset(name, shape=data.shape, dtype=data.dtype)
        for start, block in backend.host_blocks(data, max(BLOCK_BYTES // max(row_bytes, 1), 1)):
            ds.write_direct(np.ascontiguousarray(block),
                            dest_sel=np.s_[start:start + block.shape[0]])
        return ds
    chunks = options["chunks"]
    rows, level = chunks[0], compression.level
    if rows >= data.shape[0]:
        return group.create_dataset(name, data=backend.to_host(data), **options)
    ds = group.create_dataset(name, shape=data.shape, dtype=data.dtype, **options)
    tail = (0,) * (data.ndim - 1)
    block_rows = rows * max(BLOCK_BYTES // (rows * max(row_bytes, 1)), 1)

    def packed(block, start):
        part = np.ascontiguousarray(block[start:start + rows])    # (read as raw bytes)
        if part.shape[0] < rows:
            full = np.zeros(chunks, dtype=data.dtype)
            full[:part.shape[0]] = part
            part = full
        return zlib.compress(memoryview(part).cast("B"), level)

    with ThreadPoolExecutor(max_workers=compression_threads()) as pool:
        for first, block in backend.host_blocks(data, block_rows):
            starts = range(0, block.shape[0], rows)
            for start, blob in zip(starts, pool.map(lambda s: packed(block, s), starts)):
                ds.id.write_direct_chunk((first + start,) + tail, blob)
    return ds


def _sample_shrinks(data, compression, backend):
    """Does gzip at ``compression.level`` shrink ``data`` at least
    :data:`ADAPTIVE_MIN_RATIO` times, judged from :data:`SAMPLE_CHUNKS`
    places spread over its first axis, :data:`SAMPLE_BYTES` of each (the
    whole of a smaller field)?"""
    per_row = math.prod(data.shape[1:])
    count = max(SAMPLE_BYTES // (data.dtype.itemsize * max(per_row, 1)), 1)
    values = max(SAMPLE_BYTES // data.dtype.itemsize, 1)
    picks = sorted({int(k) for k in np.linspace(0, data.shape[0] - 1,
                                                min(SAMPLE_CHUNKS, data.shape[0]))})
    parts = [np.ascontiguousarray(part) for part in                 # (one wait for a GPU)
             backend.to_host_many([data[k:k + count].reshape(-1)[:values] for k in picks])]
    packed = sum(len(zlib.compress(memoryview(part).cast("B"), compression.level))
                 for part in parts)
    return sum(part.nbytes for part in parts) >= ADAPTIVE_MIN_RATIO * packed
