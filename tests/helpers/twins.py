"""What the tests of the CUDA twins share: host arguments moved to the
device, a call's outputs flattened to host arrays, the comparison of a
device field with a host one relative to its largest value, and the check
of a variant's call against its reference on both backends."""
import numpy as np


def on_device(x, cp):
    """``x`` with its NumPy arrays (in plain tuples too) on the device."""
    if isinstance(x, np.ndarray):
        return cp.asarray(x)
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(on_device(a, cp) for a in x)
    return x


def outputs(label, result):
    """``[(label, host array or None)]`` of one call's result."""
    if isinstance(result, tuple):
        return [item for k, r in enumerate(result) for item in outputs(f"{label}[{k}]", r)]
    if result is None:
        return [(label, None)]
    return [(label, np.asarray(result.get() if hasattr(result, "get") else result))]


def relative(got, ref):
    """The largest difference of two host arrays over ``ref``'s largest value."""
    assert got.shape == ref.shape and got.dtype == ref.dtype
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300)) if ref.size else 0.0


def close(name, got, ref, rtol):
    """``got`` (device) within ``rtol`` of ``ref`` (host), relative to the
    largest value of ``ref``; the difference printed (``pytest -rP``)."""
    got = got.get()
    diff = relative(got, ref)
    print(f"maxdiff {name}: {diff:.3e} (equal bits: {np.array_equal(got, ref)})")
    assert diff <= rtol


def same_bits(a, b):
    """The same dtype, shape and bits (``-0.0`` and ``0.0`` differ)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def check_variant(tag, label, concept, args, cp, sums, rtol, same=same_bits):
    """Call ``concept``'s CuPy variant on ``args`` moved to the device and
    compare each output with the reference on the same CuPy arrays (``same``:
    by default the same bits; within ``rtol`` for the outputs named in
    ``sums``, sums in another order) and on NumPy (within ``rtol``); the
    differences printed.  Returns the largest of each comparison."""
    dev = on_device(args, cp)
    got = concept.variants["cupy"](*dev)
    assert got is not NotImplemented, label
    on_gpu = outputs(label, concept.reference(*dev))
    on_cpu = outputs(label, concept.reference(*args))
    assert len(outputs(label, got)) == len(on_gpu), label
    worst_bits = worst_host = 0.0
    for (name, g), (_, r), (_, h) in zip(outputs(label, got), on_gpu, on_cpu):
        if r is None:
            assert g is None, name
            continue
        bits, host = relative(g, r), relative(g, h)
        equal = bool(same(g, r))
        print(f"maxdiff {tag} {name}: {bits:.2e} against the reference on CuPy "
              f"(equal bits: {equal}), {host:.2e} against NumPy")
        if name.split("-")[0] in sums or name in sums:
            assert bits <= rtol, name
        else:
            assert equal, name
        assert host <= rtol, name
        worst_bits, worst_host = max(worst_bits, bits), max(worst_host, host)
    return worst_bits, worst_host


def variant(concept):
    """The CuPy variant of a twin, to call directly: a silent fall-back to
    the array code cannot pass for it."""
    return concept.variants["cupy"]
