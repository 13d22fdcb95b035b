"""compute.cuda.build_in_background's jobs, on a stand-in for CuPy's
device calls (no device): each builder runs once on a background worker of
its own, on the caller's device, and a failure is kept where a list is
given."""
import sys
import threading
from types import SimpleNamespace

from bubbleflow.compute import cuda, workers


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
    assert len({t.name for t in threads}) == 2 and not any(t.is_alive() for t in threads)
    # The workers outlive their jobs (daemons waiting for the next one).
    live = {t.name: t for t in threading.enumerate()}
    assert all(live[name].daemon for name in workers.worker_names())
    # Without a list a failure is dropped: the caller's own fetch meets it.
    for t in cuda.build_in_background(broken):
        t.join(10)


def test_a_partial_builder_that_has_run_on_the_device_gets_no_thread(monkeypatch):
    """A ``functools.partial`` builder runs once a device: the next call
    with the same function and arguments starts no thread (its code is in
    the caches); a failed one, another device or a plain function runs
    again."""
    from functools import partial

    device = [3]
    stand_in = SimpleNamespace(cuda=SimpleNamespace(
        runtime=SimpleNamespace(getDevice=lambda: device[0]), Device=_Device))
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    monkeypatch.setattr(cuda, "_BUILT", set())
    ran = []

    def build(name, degree=2):
        ran.append((name, degree))

    def broken(name):
        raise ValueError(name)

    def run(*builders):
        threads = cuda.build_in_background(*builders, errors=[])
        for t in threads:
            t.join(10)
        return len(threads)

    assert run(partial(build, "down"), partial(broken, "up")) == 2
    assert run(partial(build, "down"), partial(broken, "up")) == 1      # the failed one again
    assert run(partial(build, "down", degree=3)) == 1                   # other arguments
    device[0] = 4
    assert run(partial(build, "down")) == 1                             # another device
    assert run(lambda: ran.append("plain")) == 1 and run(lambda: ran.append("plain")) == 1
    assert ran.count(("down", 2)) == 2 and ran.count(("down", 3)) == 1
    device[0] = 3
    assert run(partial(build, "down", degree=3)) == 0
    cuda.clear_cache()
    assert run(partial(build, "down", degree=3)) == 1                   # caches cleared
