"""What the tests of the CUDA twins share: host arguments moved to the
device, a call's outputs flattened to host arrays, and the comparison of a
device field with a host one relative to its largest value."""
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
