"""The compile cache (compute.cuda): an object is built once per key and
device, also when threads ask for it at once (a background prefetch and the
caller); a failed build is not kept; the kernels' sources are listed for
prefetch by the dimensions that use them, and on a GPU a prefetch compiles
them in the background."""
import threading
import time

import pytest

from bubbleflow.compute import cuda


@pytest.fixture
def host_device(monkeypatch):
    monkeypatch.setattr(cuda, "_device_id", lambda: 0)
    yield
    cuda.clear_cache()


def test_threads_asking_at_once_share_one_build(host_device):
    calls = []
    started = threading.Event()

    def build():
        calls.append(1)
        started.set()
        time.sleep(0.2)
        return object()

    got = []
    first = threading.Thread(target=lambda: got.append(cuda._cached(("slow",), build)))
    first.start()
    started.wait(5)
    second = cuda._cached(("slow",), build)       # waits for the build under way
    first.join(5)
    assert len(calls) == 1 and got == [second]
    assert cuda._cached(("slow",), build) is second and len(calls) == 1


def test_a_failed_build_is_not_kept(host_device):
    def broken():
        raise RuntimeError("nvrtc: error")

    with pytest.raises(RuntimeError, match="nvrtc"):
        cuda._cached(("broken",), broken)
    assert cuda._cached(("broken",), lambda: "built") == "built"


def test_a_waiting_thread_sees_the_builders_error(host_device):
    started, release = threading.Event(), threading.Event()

    def failing():
        started.set()
        release.wait(5)
        raise ValueError("bad source")

    errors = []

    def waiter():
        try:
            cuda._cached(("failing",), failing)
        except ValueError as exc:
            errors.append(exc)

    builder = threading.Thread(target=waiter)
    builder.start()
    started.wait(5)
    other = threading.Thread(target=waiter)
    other.start()
    time.sleep(0.05)
    release.set()
    builder.join(5)
    other.join(5)
    assert len(errors) == 2


def test_sources_are_listed_by_the_dimensions_that_use_them():
    import bubbleflow.flow.momentum_cuda  # noqa: F401 - registers its sources
    import bubbleflow.flow.vof_cuda  # noqa: F401

    dims = {name: ndims for _, name, _, ndims in cuda._SOURCES}
    assert dims["vof3.cu"] == (3,) and dims["vof.cu"] == (2,)
    assert dims["momentum.cu"] == (2, 3) and dims["momentum3.cu"] == (3,)


@pytest.mark.gpu
def test_prefetch_compiles_in_the_background(cupy_backend):
    import bubbleflow.flow.vof_cuda  # noqa: F401

    cuda.clear_cache()
    jobs = cuda.prefetch(3)
    assert sum(job.result(300) for job in jobs) >= 4
    code = "typedef double T;\n" + cuda.source("bubbleflow.flow.vof_cuda", "vof3.cu")
    key = ("module", code, ("--fmad=false",), cuda._device_id())
    assert key in cuda._CACHE and not isinstance(cuda._CACHE[key], cuda.Future)
    assert cuda.module(code, ("--fmad=false",)) is cuda._CACHE[key]
