"""compute.cuda.build_in_background's threads, on a stand-in for CuPy's
device calls (no device): each builder runs once in a thread of its own on
the caller's device, and a failure is kept where a list is given."""
import sys
import threading
from types import SimpleNamespace

from bubbleflow.compute import cuda


class _Device:
    """``cupy.cuda.Device(n)`` as a context: records the device each thread entered."""
    entered = []

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        _Device.entered.append((threading.current_thread().name, self.n))

    def __exit__(self, *exc):
        return False


def test_builders_run_side_by_side_on_the_callers_device(monkeypatch):
    stand_in = SimpleNamespace(cuda=SimpleNamespace(
        runtime=SimpleNamespace(getDevice=lambda: 3), Device=_Device))
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    _Device.entered = []
    ran, errors = [], []

    def first():
        ran.append("first")

    def broken():
        raise ValueError("no module")

    threads = cuda.build_in_background(first, broken, errors=errors)
    for t in threads:
        t.join(10)
    assert ran == ["first"]
    assert [type(e) for e in errors] == [ValueError]
    assert sorted(name for name, _ in _Device.entered) == sorted(t.name for t in threads)
    assert {n for _, n in _Device.entered} == {3}
    assert len({t.name for t in threads}) == 2 and all(t.daemon for t in threads)
    # Without a list a failure is dropped: the caller's own fetch meets it.
    for t in cuda.build_in_background(broken):
        t.join(10)
