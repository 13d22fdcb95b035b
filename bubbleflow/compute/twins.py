"""Twins: one concept, a reference implementation and registered variants.

Every CUDA kernel of bubbleflow has a twin in array code (NumPy, which also
runs on CuPy), and the tests compare the two.  Instead of an ``if cupy:``
at every call site, the array code is declared the *reference* of a concept
with :func:`twin`, and the CUDA variant registers itself on it under the
backend name::

    @twin
    def ips_coefficients(S, W, C, E, N):          # array code, any backend
        ...

    @ips_coefficients.register("cupy")
    def _ips_coefficients_cuda(S, W, C, E, N):   # one kernel
        ...

A call dispatches on the backend of its array arguments
(:func:`bubbleflow.compute.backend.backend_of`; an argument with a
``backend`` attribute, such as an operator, counts with that backend; tuples
and lists are looked into).  A variant that cannot take a particular call
(a dtype or a layout it has no kernel for) returns ``NotImplemented`` and the
reference runs instead.  ``.reference`` is the array-code twin, for tests.

Example
-------
>>> import numpy as np
>>> @twin
... def double(x):
...     return 2 * x
>>> @double.register("cupy")
... def _double_cuda(x):
...     raise AssertionError("not on NumPy arrays")
>>> double(np.ones(2))
array([2., 2.])
>>> double.reference is double.__wrapped__
True
"""
from __future__ import annotations

import functools

from .backend import Backend, backend_of

__all__ = ["twin", "Twin", "backend_name"]


def backend_name(*args) -> str:
    """The backend name of ``args``: ``"cupy"`` if any array among them (or
    inside a tuple or list of them, or an object's ``backend``, or a
    :class:`Backend` itself) is on CuPy, else ``"numpy"``."""
    for a in args:
        name = _TYPE_NAMES.get(type(a))
        if name is None:
            b = getattr(a, "backend", None)
            if isinstance(a, Backend):
                name = a.name
            elif isinstance(b, Backend):
                name = b.name
            elif isinstance(a, (tuple, list)):
                name = backend_name(*a)
            else:
                name = backend_of(a).name
                if type(a).__module__.partition(".")[0] in _TYPED_MODULES:
                    # NumPy's and CuPy's arrays and scalars, Python's numbers:
                    # the answer is the type's (a dispatch is on every kernel
                    # call's path).
                    _TYPE_NAMES[type(a)] = name
        if name != "numpy":
            return name
    return "numpy"


# type -> backend name, for the types whose backend follows from the type alone.
_TYPE_NAMES: dict = {}
_TYPED_MODULES = ("numpy", "cupy", "cupyx", "builtins")


class Twin:
    """A concept's reference implementation plus its registered variants."""

    def __init__(self, reference):
        self.reference = reference
        self.variants = {}
        functools.update_wrapper(self, reference)

    def register(self, backend: str):
        """Decorator: ``fn`` is this concept's variant for ``backend``."""
        def deco(fn):
            self.variants[backend] = fn
            return fn
        return deco

    def variant(self, backend: str):
        """The function a call on ``backend`` tries first."""
        return self.variants.get(backend, self.reference)

    def __call__(self, *args, **kwargs):
        fn = self.variants.get(backend_name(*args, *kwargs.values()))
        if fn is not None:
            out = fn(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return self.reference(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        # As a method: bind like a function would.
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __repr__(self):
        return f"<twin {self.__qualname__} ({', '.join(['reference', *self.variants])})>"


def twin(reference):
    """Declare ``reference`` (array code) a concept with backend variants."""
    return Twin(reference)
