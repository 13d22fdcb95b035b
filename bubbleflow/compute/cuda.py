"""One way to build CUDA code: sources shipped as files, one compile cache.

CUDA sources are ``*.cu`` files that live beside the Python module of the
concept they serve (the operator's apply beside the operator, the
preconditioner's passes beside the preconditioner) and ship with the package.
:func:`source` reads one and resolves its ``#include "name.cuh"`` lines: the
file is looked up beside the source, then here in ``bubbleflow/compute/``,
where ``common.cuh`` keeps the helpers shared by every module (warp and block
sums).  Each file is inlined once, so the text handed to the compiler is
self-contained and is the key of the cache.

Every compiled object -- :func:`module` (``cupy.RawModule``),
:func:`raw_kernel` (``cupy.RawKernel``), :func:`elementwise` and
:func:`reduction` (``cupy.ElementwiseKernel`` / ``cupy.ReductionKernel``) --
comes from one memoised cache keyed by what was compiled, the options and the
current device.  CuPy is imported inside these functions only: a machine
without a GPU reads sources but never imports CuPy.

Example
-------
>>> from bubbleflow.compute import cuda
>>> text = cuda.source(__name__, "common.cuh")
>>> "warp_sum" in text
True
>>> cuda.defines(M=4, REVERSE=0)
'#define M 4\\n#define REVERSE 0\\n'
"""
from __future__ import annotations

import functools
import os
import queue
import re
import sys
import threading
from concurrent.futures import Future

from . import workers
from .host_cores import spare_cores

__all__ = ["CTYPE", "source", "defines", "module", "function", "raw_kernel", "elementwise",
           "reduction", "kernel_cache", "clear_cache", "launch_1d", "rows_grid", "grid_2d",
           "grid_3d", "RUN_PLANES", "MIN_BLOCKS_3D",
           "float64_nd", "float64_2d", "float64_3d", "float64_kernels", "prefetch",
           "build_in_background"]

#: C type of a NumPy dtype name, for the ``typedef ... T;`` of typed sources.
CTYPE = {"float64": "double", "float32": "float"}

_HERE = os.path.dirname(os.path.abspath(__file__))
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)

# The one compile cache: (kind, what was compiled, options, device id) ->
# object, or a Future while another thread builds it.
_CACHE: dict = {}
_LOCK = threading.Lock()


def _directory(anchor: str) -> str:
    """The folder of ``anchor``: a module name (``__name__``) or a file path."""
    mod = sys.modules.get(anchor)
    if mod is not None and getattr(mod, "__file__", None):
        return os.path.dirname(os.path.abspath(mod.__file__))
    if os.path.exists(anchor):
        return anchor if os.path.isdir(anchor) else os.path.dirname(os.path.abspath(anchor))
    raise ValueError(f"source anchor {anchor!r}: neither an imported module nor a path")


def _find(name: str, directory: str) -> str:
    for folder in (directory, _HERE):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"CUDA include {name!r}: not in {directory} nor in {_HERE}")


def _resolve(path: str, seen: set) -> str:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    directory = os.path.dirname(path)

    def inline(match):
        inc = _find(match.group(1), directory)
        if inc in seen:
            return ""
        seen.add(inc)
        return _resolve(inc, seen)

    return _INCLUDE.sub(inline, text)


@functools.lru_cache(maxsize=None)
def _source(path: str) -> str:
    return _resolve(path, {path})


def source(anchor: str, name: str) -> str:
    """The text of the CUDA source ``name`` beside ``anchor`` (a module's
    ``__name__`` or a file path), its ``#include "..."`` lines replaced by the
    files they name (beside it, else in ``bubbleflow/compute/``), each once.
    Other includes (``<...>``) are left to the compiler."""
    return _source(_find(name, _directory(anchor)))


def defines(**macros) -> str:
    """``#define NAME value`` lines, one per keyword, in the order given."""
    return "".join(f"#define {k} {v}\n" for k, v in macros.items())


def cache_directory() -> str:
    """Where CuPy keeps compiled kernels on disk for every later process:
    ``CUPY_CACHE_DIR``, else its default ``~/.cupy/kernel_cache``."""
    return os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")


def cache_is_empty() -> bool:
    """Whether CuPy's kernel cache holds nothing yet: a first GPU run on
    this machine (or with a new ``CUPY_CACHE_DIR``) compiles every kernel
    it calls."""
    try:
        with os.scandir(cache_directory()) as entries:
            return next(entries, None) is None
    except OSError:
        return True


def _device_id() -> int:
    import cupy

    return cupy.cuda.runtime.getDevice()


def _cached(key, build):
    """The cached object of ``key`` on the current device, built once: a
    build under way in another thread (:func:`prefetch`) is waited for, not
    repeated."""
    key = key + (_device_id(),)
    with _LOCK:
        obj = _CACHE.get(key)
        owner = obj is None
        if owner:
            obj = _CACHE[key] = Future()
    if not isinstance(obj, Future):
        return obj
    if not owner:
        return obj.result()
    try:
        value = build()
    except BaseException as exc:
        with _LOCK:
            _CACHE.pop(key, None)
        obj.set_exception(exc)
        raise
    with _LOCK:
        _CACHE[key] = value
    obj.set_result(value)
    return value


def module(code: str, options=()):
    """``cupy.RawModule(code=code, options=options)``, compiled once per device."""
    options = tuple(options)

    def build():
        import cupy

        mod = cupy.RawModule(code=code, options=options)
        mod.compile()               # now, in the thread that builds it
        return mod

    return _cached(("module", code, options), build)


def function(code: str, name: str, options=()):
    """The kernel ``name`` of :func:`module` ``(code, options)``."""
    return module(code, options).get_function(name)


def raw_kernel(code: str, name: str, options=()):
    """``cupy.RawKernel(code, name, options=options)``, compiled once per device."""
    options = tuple(options)

    def build():
        import cupy

        return cupy.RawKernel(code, name, options=options)

    return _cached(("raw_kernel", code, name, options), build)


def elementwise(in_params: str, out_params: str, operation: str, name: str, **kwargs):
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name, **kwargs)``,
    built once per device (keyword values must be hashable)."""
    def build():
        import cupy

        return cupy.ElementwiseKernel(in_params, out_params, operation, name, **kwargs)

    key = ("elementwise", in_params, out_params, operation, name, tuple(sorted(kwargs.items())))
    return _cached(key, build)


def reduction(in_params: str, out_params: str, map_expr: str, reduce_expr: str,
              post_map_expr: str, identity, name: str, **kwargs):
    """``cupy.ReductionKernel(...)`` with the same arguments, built once per
    device (keyword values must be hashable)."""
    def build():
        import cupy

        return cupy.ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr,
                                    identity, name, **kwargs)

    key = ("reduction", in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
           name, tuple(sorted(kwargs.items())))
    return _cached(key, build)


def kernel_cache(build):
    """Memoise ``build(*args)``, a function that returns compiled code, on its
    (hashable) arguments and the current device.

    The one cache above is keyed by the whole source text; a call site that
    fetches its kernel at every call (every matvec, every set-up) would hash
    and compare that text each time.  Decorating the call site's builder
    puts its short key in front: one dictionary lookup per fetch.
    """
    memo = {}
    _MEMOS.append(memo)

    @functools.wraps(build)
    def cached(*args):
        key = args + (_device_id(),)
        obj = memo.get(key)
        if obj is None:
            obj = memo[key] = build(*args)
        return obj
    return cached


_MEMOS: list = []


def clear_cache():
    """Forget every compiled object (tests)."""
    with _LOCK:
        _CACHE.clear()
    for memo in _MEMOS:
        memo.clear()
    _BUILT.clear()


def float64_kernels(anchor: str, name: str, options=(), ndims=(2, 3), first=False):
    """A getter ``get(kernel_name)`` of the kernels of the source ``name``
    beside ``anchor`` (:func:`source`), compiled with ``typedef double T;``
    and ``options``: memoised on the kernel's name and the device.  The
    source is listed for :func:`prefetch` by the grid dimensions ``ndims``
    whose runs use it; ``first``: at the head of the list (a case build
    calls it before any step)."""
    options = tuple(options)
    entry = (anchor, name, options, tuple(ndims))
    if first:
        _SOURCES.insert(0, entry)
    else:
        _SOURCES.append(entry)

    @kernel_cache
    def get(kernel_name):
        return function("typedef double T;\n" + source(anchor, name), kernel_name,
                        options=options)
    return get


# The sources of float64_kernels getters: (anchor, name, options, ndims).
_SOURCES: list = []


def prefetch(ndim):
    """Compile, on background workers (:mod:`.workers`), every
    :func:`float64_kernels` source that runs of ``ndim``-D grids use and
    that is not compiled yet, while the caller builds its case: the first
    call of a kernel then finds its module compiled, or waits for the build
    under way.  The compiler runs outside Python's lock, so the builds
    overlap each other and the caller (CuPy's own kernels compile in the
    caller's thread).  At most one worker a spare core; a process that ends
    first does not wait for them.  Returns the workers' jobs, each giving
    the number of sources it took (``job.result()``)."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    sources = [(a, n, o) for a, n, o, dims in _SOURCES if ndim in dims]
    work = queue.SimpleQueue()
    for entry in sources:
        work.put(entry)

    def drain():
        taken = 0
        with cupy.cuda.Device(device):
            while True:
                try:
                    anchor, name, options = work.get_nowait()
                except queue.Empty:
                    return taken
                taken += 1
                try:
                    module("typedef double T;\n" + source(anchor, name), options)
                except Exception:       # the caller's own call raises it again
                    pass

    return [workers.submit(drain, name="bubbleflow-prefetch")
            for _ in range(min(len(sources), spare_cores()))]


#: The keys (:func:`_builder_key`) of the background builders that have run.
_BUILT: set = set()


def _builder_key(build, device):
    """A ``functools.partial`` builder's function and arguments with the
    device, or None where they cannot be a key (then it always runs)."""
    if not isinstance(build, functools.partial):
        return None
    key = (build.func, build.args, tuple(sorted(build.keywords.items())), device)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def build_in_background(*builders, errors=None):
    """Call each of ``builders`` (functions of no argument that build
    compiled code through this module's caches) on a background worker
    (:mod:`.workers`) of its own: a caller that needs several modules one
    after the other starts them side by side, and each later fetch finds
    its module built or waits for the build under way (:func:`_cached`).
    A builder's failure is left to the caller's own fetch to raise
    (appended to the list ``errors`` where one is given).  Each runs on the
    current device, but for a ``functools.partial`` builder that has run on
    it already; returns the jobs queued (:class:`.workers.Job`), named
    after their builders."""
    import cupy

    device = cupy.cuda.runtime.getDevice()

    def work(build, key):
        with cupy.cuda.Device(device):
            try:
                build()
            except Exception as exc:    # noqa: BLE001 - the caller's own fetch raises it
                if errors is not None:
                    errors.append(exc)
            else:
                if key is not None:
                    _BUILT.add(key)

    # A builder already run on this device finds its code in the caches: no
    # job for it (a job costs more than the lookup).
    jobs = [(b, _builder_key(b, device)) for b in builders]
    return [workers.submit(work, *job,
                           name=f"bubbleflow-build-{getattr(job[0], '__name__', 'module')}")
            for job in jobs if job[1] is None or job[1] not in _BUILT]


#: The most blocks of a two-pass reduction's first pass: the second pass,
#: one block, reads one partial result a block.
REDUCE_BLOCKS = 1024


def reduce_blocks(n, threads=256):
    """Blocks of a two-pass reduction's first pass over ``n`` items: one a
    ``threads`` items, at least one, at most :data:`REDUCE_BLOCKS` (the
    blocks then stride)."""
    return max(1, min(-(-n // threads), REDUCE_BLOCKS))


def launch_1d(kernel, n, args, threads=256):
    """Launch a grid-stride kernel over ``n`` items."""
    blocks = max(1, min((n + threads - 1) // threads, 65535 * 8))
    kernel((blocks,), (threads,), args)


def rows_grid(nx, ny, threads=256):
    """Grid of the per-cell kernels that take a grid line per grid row:
    blocks along a row, a grid row per grid line (the kernels loop when there
    are more than 65535 lines)."""
    return (-(-nx // threads), min(ny, 65535))


def grid_2d(nx, ny, block):
    """Launch shape ``(grid, block)`` of a kernel over ``nx`` by ``ny`` points
    with 2-d ``block``s (the kernels stride in y past 65535 block rows)."""
    bx, by = block
    return (max(1, -(-nx // bx)), max(1, min(-(-ny // by), 65535))), tuple(block)


#: Blocks a :func:`grid_3d` launch keeps where its grid has the cells: a
#: thread's run of planes is shortened rather than leave SMs idle.
MIN_BLOCKS_3D = 2048


#: Planes a run of a ``BF_CELLS3_RUNS`` kernel's thread takes at most (measured:
#: 4 to 32 within a few per cent of each other, 1 up to 30 % slower).
RUN_PLANES = 16


def grid_3d(nx, ny, nz, block, planes=None):
    """Launch shape ``(grid, block)`` of a ``BF_CELLS3_RUNS`` kernel over
    ``nx`` by ``ny`` by ``nz`` points with 2-d ``block``s: blocks over x and
    y (they stride in y past 65535 block rows), each z block a run of at
    most ``planes`` (default :data:`RUN_PLANES`) consecutive planes
    (``common.cuh`` says when that pays), shorter where the launch would have
    fewer than :data:`MIN_BLOCKS_3D` blocks."""
    planes = RUN_PLANES if planes is None else planes
    bx, by = block
    gx, gy = max(1, -(-nx // bx)), max(1, min(-(-ny // by), 65535))
    run = max(1, min(planes, (gx * gy * nz) // MIN_BLOCKS_3D))
    return (gx, gy, max(1, -(-nz // run))), tuple(block)


def float64_nd(ndim, *arrays):
    """The arrays as C-contiguous ``ndim``-d float64 CuPy arrays (copied only
    where not contiguous), or None where one is not an ``ndim``-d float64
    array: the CUDA twin then returns ``NotImplemented`` and the array code
    runs."""
    import cupy

    if not all(getattr(a, "dtype", None) == "float64" and getattr(a, "ndim", 0) == ndim
               for a in arrays):
        return None
    return [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays]


def float64_2d(*arrays):
    """:func:`float64_nd` of 2-d arrays."""
    return float64_nd(2, *arrays)


def float64_3d(*arrays):
    """:func:`float64_nd` of 3-d arrays."""
    return float64_nd(3, *arrays)
