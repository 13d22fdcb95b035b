"""Key paths of a case: ``("geometry", "bubbles", 2, "radius")`` spelt
``"geometry.bubbles[2].radius"`` and back, and the first path where two case
dicts differ."""
from __future__ import annotations

import re
from collections.abc import Mapping

def dotted(path):
    """``("geometry", "bubbles", 2, "radius")`` -> ``"geometry.bubbles[2].radius"``."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += ("." if out else "") + str(seg)
    return out


_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)((?:\[\d+\])*)\Z")


def split_dotted(key):
    """Inverse of :func:`dotted`; None if ``key`` is not a well-formed path."""
    if not isinstance(key, str) or not key:
        return None
    path = []
    for part in key.split("."):
        m = _SEGMENT.match(part)
        if not m:
            return None
        path.append(m.group(1))
        # An index of thousands of digits is no list's (int() refuses it).
        indexes = re.findall(r"\[(\d{1,18})\]", m.group(2))
        if "".join(f"[{i}]" for i in indexes) != m.group(2):
            return None
        path.extend(int(i) for i in indexes)
    return tuple(path)


def first_difference(a, b, skip=(), _path=()):
    """First place where two nested case dicts differ.

    Returns ``(dotted key path, value in a, value in b)``, or None when they
    agree outside the key paths (tuples) in ``skip``.
    """
    if _path in skip:
        return None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in list(a) + [k for k in b if k not in a]:
            d = first_difference(a.get(k), b.get(k), skip, _path + (k,))
            if d:
                return d
        return None
    return None if a == b else (".".join(map(str, _path)), a, b)
