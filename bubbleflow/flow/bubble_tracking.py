"""Every bubble tracked: an identity per bubble across the samples of a run,
its measures at every sample, and the events of its life.

A :class:`BubbleTracker` is fed the gas regions of successive samples
(:func:`.gas_regions.state_regions` of the whole grid's state, every few
steps) and links each sample's regions to the previous sample's:

* **overlap**: a region continues the previous regions it shares core cells
  with (the two samples' label fields compared cell by cell).  Each
  previous bubble, the largest first, goes to its largest successor: if
  that one is free it takes the bubble's id; if a larger predecessor took
  it already, the bubble ends there, ``merged`` into the survivor; if it
  is a layer, the bubble ``left``.  A region no predecessor went to but
  which overlaps previous bubbles is a piece ``split`` off the one it
  overlaps most: a fresh id, that one recorded as its parent.
* **nearest centroid**, for a bubble that moved farther than its own size
  between samples: a previous bubble overlapping nothing is matched to the
  nearest region overlapping nothing, measured from its predicted centroid
  (previous centroid plus previous velocity times the samples' time apart),
  within ``reach`` of its diameters; the nearest pairs first.
* a previous bubble still unmatched ``left`` if its predicted centroid lies
  outside the domain (an open boundary), else it ``vanished`` (its gas
  thinned below half a cell, or dissolved); a region still without an id is
  ``created`` (at the first sample, every bubble; later, a bubble pinched
  off a layer or one nothing explains).

Layers (regions reaching the domain's top plane of cells: the gas above a
free surface, or a bubble spread under the lid) get no id and no row: a
bubble whose largest successor is a layer has ``left`` through the free
surface.  Ids are positive integers, never reused; -1 means none.

Tables.  :meth:`BubbleTracker.rows` are the bubble table's rows, one per
bubble per sample (:func:`bubble_columns`), :meth:`BubbleTracker.events` the
events table's (:data:`EVENT_COLUMNS`), both since the tracker was made or
restored; :meth:`BubbleTracker.drain` hands them over to a writer that
keeps them (the tracker then forgets them: a long run's rows live in one
place).  :data:`COLUMN_UNITS` names every column's units for the writer.

Restart.  :meth:`BubbleTracker.state` is the tracker as a dict of NumPy
arrays (the previous sample's label field among them: the next overlap
needs it) and :meth:`BubbleTracker.from_state` makes it again; the restored
tracker links the next samples as the original would.

In a flow run (:mod:`bubbleflow.apps.bubble_sampling`): every
``output.bubbles_every`` steps the stepper's :meth:`.navier_stokes.FlowSolver.regions`
(the whole grid's, on rank 0 of the ranks) go to :meth:`BubbleTracker.update`,
the drained rows and events to the index's ``/bubbles`` tables, and
:meth:`BubbleTracker.state` into every snapshot, from which ``--restart``
restores the tracker.  ``bubbles_every: auto`` is :func:`sample_interval`:
every step where a sample is cheap beside a step (NumPy: about 5 % at
80 x 160), every :data:`AUTO_SAMPLE_EVERY` ``["cupy"]`` steps on a GPU,
where labelling and measuring take a few host round trips and many small
launches: about 40 % of a step at h = 1/160 and 50 % at 2048 x 4096 on an
H200, so 4-5 % sampling every 10 steps (``docs/performance_records.md``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..compute import cuda
from ..compute.backend import array_module, backend_of
from ..compute.twins import twin
from .gas_regions import ball_diameter

__all__ = ["BubbleTracker", "sample_interval", "AUTO_SAMPLE_EVERY", "bubble_columns", "EVENT_KINDS", "EVENT_COLUMNS", "COLUMN_UNITS",
           "STATE_KEYS", "pair_counts"]

#: Steps between samples of ``output.bubbles_every: auto``, per backend.
AUTO_SAMPLE_EVERY = {"numpy": 1, "cupy": 10}


def sample_interval(every, backend):
    """Steps between the tracker's samples: ``output.bubbles_every`` as
    set, or for ``"auto"`` the backend's :data:`AUTO_SAMPLE_EVERY`."""
    if every == "auto":
        return AUTO_SAMPLE_EVERY.get(backend.name, 1)
    return int(every)


#: The events' kinds; an event row holds the kind's position here.
EVENT_KINDS = ("created", "merged", "split", "left", "vanished")

#: An event row: ``id`` the bubble the event is about (``merged``: the
#: survivor; ``split``: the parent), ``other`` the second bubble (``merged``:
#: the one that ended in it; ``split``: the piece's fresh id), -1 for none.
#: A merge of k bubbles into one is k - 1 rows, a split into k pieces k - 1.
EVENT_COLUMNS = ("step", "time", "kind", "id", "other")

#: Units of every column of the bubble and event tables ("1": a count or a
#: code; ``area`` is the 2-D table's size, ``volume`` the 3-D one's).
COLUMN_UNITS = {
    "step": "1", "time": "s", "id": "1", "kind": "1", "other": "1",
    "area": "m^2", "volume": "m^3",
    "centroid_x": "m", "centroid_y": "m", "centroid_z": "m",
    "velocity_x": "m/s", "velocity_y": "m/s", "velocity_z": "m/s",
    "diameter": "m", "circularity": "1", "sphericity": "1",
}

#: The keys of :meth:`BubbleTracker.state`.
STATE_KEYS = ("reach", "next_id", "sampled", "step", "time", "spacing", "labels", "ids",
              "volume", "centroid", "velocity")

_CREATED, _MERGED, _SPLIT, _LEFT, _VANISHED = range(len(EVENT_KINDS))


def bubble_columns(ndim):
    """The bubble table's columns of an ``ndim``-D run: ``step, time, id,
    area`` (``volume`` in 3-D), the centroid and the mean velocity per grid
    axis, ``diameter`` and ``circularity`` (``sphericity`` in 3-D)."""
    if ndim not in (2, 3):
        raise ValueError(f"bubble table of a {ndim}-D grid: expected 2 or 3")
    axes = "xyz"[:ndim]
    return (("step", "time", "id", "area" if ndim == 2 else "volume")
            + tuple("centroid_" + a for a in axes) + tuple("velocity_" + a for a in axes)
            + ("diameter", "circularity" if ndim == 2 else "sphericity"))


@dataclass
class _Sample:
    """What the next sample is linked to: the label field and, per region,
    its id (-1 for a layer), volume, centroid and velocity."""

    step: int
    time: float
    spacing: tuple
    labels: object
    ids: np.ndarray
    volume: np.ndarray
    centroid: np.ndarray
    velocity: np.ndarray


#: Up to this many (previous region, region) pairs the overlaps are counted
#: in a dense table (no sort, no host synchronisation before its one read).
DENSE_OVERLAPS = 1 << 16


def _overlaps(previous_labels, labels, previous_count, count):
    """``(i, j, cells)``: the pairs of a previous region ``i`` and a region
    ``j`` (both from 0) sharing ``cells`` core cells, host arrays."""
    xp = array_module(labels)
    backend = backend_of(labels)
    prev = xp.asarray(previous_labels)
    size = (previous_count + 1) * (count + 1)
    if size <= DENSE_OVERLAPS:
        table = np.asarray(backend.to_host(pair_counts(prev, labels, previous_count, count)),
                           dtype=np.int64)
        i, j = np.nonzero(table)
        return i, j, table[i, j]
    both = (prev > 0) & (labels > 0)
    code = prev[both].astype(xp.int64) * (count + 1) + labels[both].astype(xp.int64)
    codes, cells = xp.unique(code, return_counts=True)
    codes, cells = backend.to_host_many([codes, cells])
    codes = np.asarray(codes, dtype=np.int64)
    return codes // (count + 1) - 1, codes % (count + 1) - 1, np.asarray(cells, dtype=np.int64)


@twin
def pair_counts(previous_labels, labels, previous_count, count):
    """The ``(previous_count, count)`` table of how many cells hold each
    pair of a previous region and a region (labels from 1; 0, no region,
    is left out)."""
    xp = array_module(labels)
    code = (previous_labels.astype(xp.int64) * (count + 1) + labels.astype(xp.int64)).ravel()
    table = xp.bincount(code, minlength=(previous_count + 1) * (count + 1))
    return table.reshape(previous_count + 1, count + 1)[1:, 1:]


_kernel = cuda.float64_kernels(__name__, "bubble_tracking.cu")


@pair_counts.register("cupy")
def _pair_counts_cupy(previous_labels, labels, previous_count, count):
    # One pass, the empty cells skipped and a warp's equal pairs added once
    # (bubble_tracking.cu); integer adds, the same in any order.
    import cupy as cp

    prev = cp.ascontiguousarray(previous_labels, dtype=cp.int32).ravel()
    flat = cp.ascontiguousarray(labels, dtype=cp.int32).ravel()
    table = cp.zeros(max(previous_count * count, 1), dtype=cp.uint64)
    if flat.size and previous_count and count:
        cuda.launch_1d(_kernel("bf_pair_counts"), flat.size, (
            prev, flat, np.int64(flat.size), np.int32(count), table))
    return table[:previous_count * count].reshape(previous_count, count)


class BubbleTracker:
    """Identities of the gas regions across samples (the module docstring
    gives the rules).

    Parameters
    ----------
    reach : float
        How far a bubble overlapping nothing may be found from its
        predicted centroid, in its own diameters.

    Examples
    --------
    >>> import numpy as np
    >>> from bubbleflow.flow.gas_regions import gas_regions
    >>> c = np.zeros((8, 8)); c[2:4, 2:4] = 1.0
    >>> velocity = (np.zeros((8, 9)), np.zeros((9, 8)))
    >>> tracker = BubbleTracker()
    >>> tracker.update(0, 0.0, gas_regions(c, velocity, (0.1, 0.1))).tolist()
    [1]
    >>> [EVENT_KINDS[int(e[2])] for e in tracker.events()]
    ['created']
    """

    def __init__(self, reach=2.0):
        reach = float(reach)
        if not reach >= 0.0:
            raise ValueError(f"reach={reach!r}: expected a distance >= 0, in diameters")
        self.reach = reach
        self.next_id = 1
        self.previous = None
        self._rows, self._events = [], []

    # ------------------------------------------------------------- linking
    def update(self, step, time, regions):
        """Link a sample's regions to the previous sample's and record the
        sample's rows and events.

        Parameters
        ----------
        step : int
        time : float
            The sample's step and time (s).
        regions : GasRegions
            The sample's regions (:func:`.gas_regions.gas_regions`).

        Returns
        -------
        numpy.ndarray of int64
            The id of each region (region ``k`` is ``labels == k + 1``), -1
            for the layers.
        """
        prev = self.previous
        if prev is not None and tuple(prev.labels.shape) != tuple(regions.labels.shape):
            raise ValueError(f"regions of a grid of shape {tuple(regions.labels.shape)}: "
                             f"expected {tuple(prev.labels.shape)}, the tracker's grid")
        ids = np.full(regions.count, -1, dtype=np.int64)
        events = []
        if prev is not None:
            pairs = _overlaps(prev.labels, regions.labels, len(prev.ids), regions.count)
            self._by_overlap(prev, regions, pairs, ids, events)
            self._by_centroid(prev, regions, pairs, float(time) - prev.time, ids, events)
        for j in np.flatnonzero((ids < 0) & ~regions.layer):
            ids[j] = self._fresh()
            events.append((_CREATED, int(ids[j]), -1))
        self._record(int(step), float(time), regions, ids, events)
        self.previous = _Sample(int(step), float(time), tuple(regions.spacing), regions.labels,
                                ids.copy(), regions.volume.copy(), regions.centroid.copy(),
                                regions.velocity.copy())
        return ids

    def _fresh(self):
        self.next_id += 1
        return self.next_id - 1

    def _by_overlap(self, prev, regions, pairs, ids, events):
        """Ids through shared cells: continuations, merges, bubbles gone
        into a layer, split-off pieces (``ids`` and ``events`` filled)."""
        successors, predecessors = {}, {}
        for i, j, cells in zip(*pairs):
            if prev.ids[i] < 0:
                continue
            successors.setdefault(i, []).append((j, cells))
            if not regions.layer[j]:
                predecessors.setdefault(j, []).append((i, cells))
        taken_by = {}
        for i in sorted(successors, key=lambda i: (-prev.volume[i], prev.ids[i])):
            j = max(successors[i], key=lambda s: (regions.volume[s[0]], s[1], -s[0]))[0]
            if regions.layer[j]:
                events.append((_LEFT, int(prev.ids[i]), -1))
            elif j in taken_by:
                events.append((_MERGED, int(prev.ids[taken_by[j]]), int(prev.ids[i])))
            else:
                taken_by[j] = i
                ids[j] = prev.ids[i]
        for j in sorted(predecessors):
            if ids[j] < 0:
                parent = max(predecessors[j], key=lambda p: (p[1], prev.volume[p[0]], -p[0]))[0]
                ids[j] = self._fresh()
                events.append((_SPLIT, int(prev.ids[parent]), int(ids[j])))

    def _by_centroid(self, prev, regions, pairs, dt, ids, events):
        """Ids of the bubbles overlapping nothing, by nearest predicted
        centroid within ``reach`` diameters; the rest of them ``left`` or
        ``vanished``."""
        lonely = np.ones(prev.ids.size, dtype=bool)
        lonely[pairs[0]] = False
        gone = np.flatnonzero(lonely & (prev.ids >= 0))
        fresh = np.ones(regions.count, dtype=bool)
        fresh[pairs[1]] = False
        arrived = np.flatnonzero(fresh & ~regions.layer)
        predicted = prev.centroid[gone] + prev.velocity[gone] * dt
        found = np.zeros(gone.size, dtype=bool)
        if gone.size and arrived.size:
            gap = np.linalg.norm(predicted[:, None, :] - regions.centroid[None, arrived, :], axis=2)
            reach = self.reach * ball_diameter(prev.volume[gone], len(prev.spacing))
            taken = np.zeros(arrived.size, dtype=bool)
            for flat in np.argsort(gap, axis=None, kind="stable"):
                a, b = divmod(int(flat), arrived.size)
                if gap[a, b] > reach[a]:
                    continue
                if not (found[a] or taken[b]):
                    found[a] = taken[b] = True
                    ids[arrived[b]] = prev.ids[gone[a]]
        lengths = np.asarray(regions.lengths)
        for a in np.flatnonzero(~found):
            outside = bool(np.any((predicted[a] < 0.0) | (predicted[a] > lengths)))
            events.append((_LEFT if outside else _VANISHED, int(prev.ids[gone[a]]), -1))

    def _record(self, step, time, regions, ids, events):
        diameter, shape = regions.diameter, regions.shape_factor
        for j in sorted(np.flatnonzero(ids >= 0), key=lambda j: ids[j]):
            self._rows.append((step, time, int(ids[j]), float(regions.volume[j]),
                               *(float(x) for x in regions.centroid[j]),
                               *(float(v) for v in regions.velocity[j]),
                               float(diameter[j]), float(shape[j])))
        for kind, bubble, other in sorted(events):
            self._events.append((step, time, kind, bubble, other))

    # -------------------------------------------------------------- tables
    def rows(self):
        """The bubble table's rows since the tracker was made or restored
        (less those :meth:`drain` handed over): tuples in
        :func:`bubble_columns` order, by sample then id."""
        return list(self._rows)

    def events(self):
        """The events table's rows since the tracker was made or restored
        (less those :meth:`drain` handed over): tuples ``(step, time, kind,
        id, other)`` (:data:`EVENT_COLUMNS`, ``kind`` a position in
        :data:`EVENT_KINDS`), by sample then kind."""
        return list(self._events)

    def drain(self):
        """``(rows, events)``: those of :meth:`rows` and :meth:`events` not
        handed over yet, in their order; the tracker forgets them (the
        caller keeps them)."""
        rows, events = self._rows, self._events
        self._rows, self._events = [], []
        return rows, events

    # ------------------------------------------------------------- restart
    def state(self):
        """The tracker as plain arrays (:data:`STATE_KEYS`), host copies:
        what :meth:`from_state` needs to link the next sample as this
        tracker would.  The rows and events already given are not part of
        it (the writer holds them)."""
        p = self.previous
        out = {"reach": np.array(self.reach), "next_id": np.array(self.next_id, dtype=np.int64),
               "sampled": np.array(p is not None)}
        if p is None:
            empty = np.zeros(0)
            out.update(step=np.array(-1, dtype=np.int64), time=np.array(np.nan),
                       spacing=empty, labels=np.zeros(0, dtype=np.int32),
                       ids=np.zeros(0, dtype=np.int64), volume=empty,
                       centroid=np.zeros((0, 0)), velocity=np.zeros((0, 0)))
            return out
        out.update(step=np.array(p.step, dtype=np.int64), time=np.array(p.time),
                   spacing=np.asarray(p.spacing, dtype=np.float64),
                   labels=np.array(backend_of(p.labels).to_host(p.labels), dtype=np.int32),
                   ids=p.ids.copy(), volume=p.volume.copy(), centroid=p.centroid.copy(),
                   velocity=p.velocity.copy())
        return out

    @classmethod
    def from_state(cls, state):
        """The tracker :meth:`state` describes.

        Parameters
        ----------
        state : mapping
            :data:`STATE_KEYS` -> arrays (as :meth:`state` gives them, or
            read back from a file).

        Returns
        -------
        BubbleTracker
        """
        missing = [k for k in STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"bubble tracker state: key {missing[0]!r} missing; "
                             f"expected the keys {', '.join(STATE_KEYS)}")
        tracker = cls(reach=float(np.asarray(state["reach"])))
        tracker.next_id = int(np.asarray(state["next_id"]))
        if not bool(np.asarray(state["sampled"])):
            return tracker
        ids = np.array(state["ids"], dtype=np.int64)
        spacing = tuple(float(h) for h in np.asarray(state["spacing"]))
        labels = np.array(state["labels"], dtype=np.int32)
        if labels.ndim != len(spacing) or int(labels.max(initial=0)) > ids.size:
            raise ValueError(f"bubble tracker state: labels of shape {labels.shape} up to "
                             f"{int(labels.max(initial=0))}; expected a {len(spacing)}-D field "
                             f"numbering at most the {ids.size} regions of 'ids'")
        tracker.previous = _Sample(
            int(np.asarray(state["step"])), float(np.asarray(state["time"])), spacing, labels,
            ids, np.array(state["volume"], dtype=np.float64),
            np.array(state["centroid"], dtype=np.float64).reshape(ids.size, len(spacing)),
            np.array(state["velocity"], dtype=np.float64).reshape(ids.size, len(spacing)))
        return tracker
