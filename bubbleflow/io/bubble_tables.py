"""The bubble tables of a flow index and the bubble tracker's state in its
snapshots: their HDF5 layout, written and read here (the rest of the files'
layout is :mod:`.layout`'s, which calls these).

In the index ``OUTDIR/<name>.h5`` (rows of
:class:`bubbleflow.flow.bubble_tracking.BubbleTracker`)::

    /bubbles/{step, time, id, area, centroid_x, centroid_y, velocity_x,
              velocity_y, diameter, circularity}
        one row per tracked bubble per sample, by sample then id (3-D:
        volume, centroid_z, velocity_z and sphericity in their places:
        bubble_columns); no layer (the gas above a free surface) has a row
    /bubbles/events/{step, time, kind, id, other}
        one row per event, by sample then kind; ``kind`` a code, the
        attribute ``kinds`` of the dataset naming the codes in order
        (created, merged, split, left, vanished); ``id``, ``other`` as
        EVENT_COLUMNS says (merged: the survivor and the bubble that ended
        in it; split: the parent and the piece), -1 for none

Every dataset carries ``units`` (COLUMN_UNITS; ``1`` for counts, ids and
codes); ``step``, ``id``, ``kind`` and ``other`` are int64, the rest
float64.  The tables are empty when the run tracks nothing
(``output.bubbles_every: 0``).

In each snapshot file ``step_<step>.h5``::

    /bubble_tracker/{reach, next_id, sampled, step, time, spacing, labels,
                     ids, volume, centroid, velocity}
        the tracker's state after the samples up to the snapshot
        (BubbleTracker.state: the last sample's label field, its regions'
        ids and measures), what ``--restart`` continues the tables from

Why the state is in the snapshot and not the index: it holds a label
field the size of the grid, written once with its checkpoint rather than
with every rewrite of the index.
"""
from __future__ import annotations

import numpy as np

from ..flow.bubble_tracking import (COLUMN_UNITS, EVENT_COLUMNS, EVENT_KINDS, STATE_KEYS,
                                    bubble_columns)

__all__ = ["BUBBLES", "EVENTS", "TRACKER", "KINDS_ATTR", "INTEGER_COLUMNS", "write_bubble_tables",
           "read_bubble_tables", "read_bubble_rows", "write_tracker_state", "read_tracker_state"]

#: The index's group of the bubble table, and its subgroup of the events.
BUBBLES, EVENTS = "bubbles", "events"
#: The snapshot files' group of the tracker's state.
TRACKER = "bubble_tracker"
#: The attribute of ``/bubbles/events/kind`` naming the codes in order.
KINDS_ATTR = "kinds"
#: The tables' integer columns (the others are float64).
INTEGER_COLUMNS = ("step", "id", "kind", "other")

_UNITS = "units"


def _columns(group, names, rows):
    """One dataset per column of ``rows`` (tuples in ``names`` order) in ``group``."""
    values = list(zip(*rows)) if rows else [()] * len(names)
    for name, column in zip(names, values):
        dtype = np.int64 if name in INTEGER_COLUMNS else np.float64
        ds = group.create_dataset(name, data=np.asarray(column, dtype=dtype))
        ds.attrs[_UNITS] = COLUMN_UNITS[name]


def write_bubble_tables(fh, ndim, rows, events):
    """``/bubbles`` and ``/bubbles/events`` of a flow index open for writing.

    Parameters
    ----------
    fh : h5py.File
    ndim : int
        The grid's dimension (which columns the bubble table has).
    rows : sequence of tuples
        The bubble table's rows, in :func:`~bubbleflow.flow.bubble_tracking.bubble_columns` order.
    events : sequence of tuples
        The events' rows, in :data:`~bubbleflow.flow.bubble_tracking.EVENT_COLUMNS` order.
    """
    group = fh.create_group(BUBBLES)
    _columns(group, bubble_columns(ndim), rows)
    _columns(group.create_group(EVENTS), EVENT_COLUMNS, events)
    group[EVENTS]["kind"].attrs[KINDS_ATTR] = ", ".join(EVENT_KINDS)


def read_bubble_tables(fh):
    """``(table, events)`` of a flow index open for reading: dicts of column
    name -> host array (the columns the file has); ``({}, {})`` without
    ``/bubbles``."""
    group = fh.get(BUBBLES)
    if group is None:
        return {}, {}
    table = {name: ds[()] for name, ds in group.items() if name != EVENTS}
    events = {name: ds[()] for name, ds in group[EVENTS].items()} if EVENTS in group else {}
    return table, events


def _rows(columns, names):
    if not columns or any(name not in columns for name in names):
        return []
    return list(zip(*(columns[name].tolist() for name in names)))


def read_bubble_rows(fh, ndim):
    """``(rows, events)`` of a flow index open for reading: the tables' rows
    as tuples in column order, of Python ints and floats as the tracker
    makes them (so that a resumed run writes them back bit for bit); empty
    lists without ``/bubbles``.

    Parameters
    ----------
    fh : h5py.File
    ndim : int
        The grid's dimension.
    """
    table, events = read_bubble_tables(fh)
    return _rows(table, bubble_columns(ndim)), _rows(events, EVENT_COLUMNS)


def _state_units(ndim):
    size = "m^2" if ndim == 2 else "m^3"
    return {"reach": "1", "next_id": "1", "sampled": "1", "step": "1", "time": "s",
            "spacing": "m", "labels": "1", "ids": "1", "volume": size, "centroid": "m",
            "velocity": "m/s"}


def write_tracker_state(fh, state, ndim):
    """The tracker's ``state`` (:meth:`~bubbleflow.flow.bubble_tracking.BubbleTracker.state`,
    host arrays) as ``/bubble_tracker`` of a snapshot file open for writing;
    ``ndim`` the grid's dimension (the units of ``volume``)."""
    group = fh.create_group(TRACKER)
    units = _state_units(ndim)
    for key in STATE_KEYS:
        value = np.asarray(state[key])
        options = dict(compression="gzip", compression_opts=1) if value.ndim >= 2 else {}
        group.create_dataset(key, data=value, **options).attrs[_UNITS] = units[key]


def read_tracker_state(fh):
    """The tracker's state in a snapshot file open for reading (a dict for
    :meth:`~bubbleflow.flow.bubble_tracking.BubbleTracker.from_state`), or
    None when the snapshot holds none (a run that tracked nothing)."""
    group = fh.get(TRACKER)
    if group is None:
        return None
    return {key: ds[()] for key, ds in group.items()}
