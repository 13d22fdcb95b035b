"""The momentum kernels against their array code: ms per call on the GPU.

    python3 scripts/momentum_kernels_timing.py [--grids 160x320,1024x2048,2048x4096]
                                               [--repeat N]

For each grid (nx x ny cells on [0, 1] x [0, ny/nx]; three bubbles under a
free surface, water and air, face velocities of both signs, a smooth
pressure) times every twin of :mod:`bubbleflow.flow.momentum`: the array
code on CuPy (``.reference``) and the CUDA variant (``flow.momentum_cuda``),
each call synchronised and timed on the host (``perf_counter``; the median
of ``--repeat`` calls after two warm-up calls), so launch and transfer
overheads count.  Each is set beside its bandwidth floor: the bytes the call
must move once (its input fields read, its output written, a face field
counted as a cell field) over the copy bandwidth measured in the same run
(:func:`bubbleflow.apps.bench.measure.copy_bandwidth`).  ``diff`` is the
largest difference between the two, relative to the largest value (0: the
same bits).  ``piped ms``: the CUDA variant's calls issued back to back and
synchronised once (inside a step nothing waits between calls: where this is
above the kernel's own time, the host's launch overhead sets it).  The
``step`` rows time the calls of one explicit and one implicit step (the
implicit one without its viscous solves) in sequence, synchronised at the
end.
"""
import argparse
import time

import numpy as np

from bubbleflow.apps.bench.measure import copy_bandwidth
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow import momentum as m

#: Fields each call must read and write once.
FIELDS = {"fluid_properties": 6,         # phi -> H, rho, mu, rho_x, rho_y
          "step_scalars": 5,             # u, v, phi, rho, mu -> four numbers
          "advection_terms": 7,          # u, v, rho_x, rho_y, mu -> adv_u, adv_v
          "interface_coefficients": 3,   # phi -> cx, cy
          "provisional_velocity": 23,    # the advection, then per component
                                         # u, v, mu, H, rho_f, adv, c -> u*
          "implicit_rhs": 12,            # per component u, v, mu, rho_f, adv -> rhs
          "implicit_velocity": 12,       # per component x, u, H, c, rho_f -> u*
          "pressure_rhs": 4,             # u*, v* -> div, b
          "norms": 2,                    # b, r -> two numbers
          "correct_velocity": 8}         # u*, v*, p, rho_x, rho_y, div -> u, v
#: The calls of one step, explicit and implicit viscosity (besides the solves).
STEP = {"explicit": ["fluid_properties", "step_scalars", "interface_coefficients",
                     "provisional_velocity", "pressure_rhs", "norms", "correct_velocity"],
        "implicit": ["fluid_properties", "step_scalars", "advection_terms",
                     "interface_coefficients", "implicit_rhs", "implicit_velocity", "pressure_rhs",
                     "norms", "correct_velocity"]}
#: Water and air, surface tension, gravity (the bubbly column's fluids).
RHO_L, RHO_G, MU_L, MU_G, SIGMA, G = 1000.0, 1.0, 1e-3, 1.8e-5, 0.0728, 9.81


def fields(xp, nx, ny):
    """phi (three bubbles under a free surface), u, v, p and the cell size."""
    h = 1.0 / nx
    x = (xp.arange(nx) + 0.5) * h
    y = (xp.arange(ny) + 0.5) * h
    X, Y = x[None, :], y[:, None]
    Ly = ny * h
    phi = 0.8 * Ly - Y + 0 * X
    for cx, cy, r in [(0.3, 0.3, 0.12), (0.7, 0.35, 0.1), (0.5, 0.6, 0.08)]:
        phi = xp.minimum(phi, xp.sqrt((X - cx) ** 2 + (Y - cy * Ly) ** 2) - r)
    xu = xp.arange(nx + 1) * h
    yv = xp.arange(ny + 1) * h
    u = 0.1 * xp.sin(2 * np.pi * xu[None, :]) * xp.cos(2 * np.pi * y[:, None] / Ly + 1.0)
    v = -0.1 * xp.cos(2 * np.pi * x[None, :] + 0.7) * xp.sin(2 * np.pi * yv[:, None] / Ly)
    u[:, 0] = u[:, -1] = 0.0
    v[0] = v[-1] = 0.0
    p = 100.0 * xp.cos(3 * X) * xp.sin(2 * Y / Ly)
    return phi, u, v, p, h


def calls(xp, nx, ny):
    """``{name: (concept, args)}`` of every twin on one state (reduced gravity)."""
    phi, u, v, p, h = fields(xp, nx, ny)
    eps, dt = 1.5 * h, 0.25 * h
    velocity, spacing = (u, v), (h, h)
    heights = (((xp.arange(ny) + 0.5) * h)[:, None], (xp.arange(1, ny) * h)[:, None])
    props = (phi, eps, RHO_L, RHO_G, MU_L, MU_G, "levelset")
    H, rho, mu, faces = m.fluid_properties.reference(*props)
    signs = ((1.0, 1.0), (-1.0, -1.0))
    adv = m.advection_terms.reference(velocity, faces, mu, spacing, signs)
    coef_args = (phi, spacing, SIGMA, heights, G * (RHO_L - RHO_G), 0.8 * ny * h)
    coef = m.interface_coefficients.reference(*coef_args)
    reduced = m.ReducedGravity(G, RHO_G, RHO_L)
    explicit = (velocity, H, mu, faces, coef, dt, spacing, signs, 0.0, reduced)
    provisional = m.provisional_velocity.reference(*explicit)
    div_star, b = m.pressure_rhs.reference(provisional, spacing, dt)
    solutions = (provisional[0][:, 1:-1].ravel(), provisional[1][1:-1, :].ravel())
    return {
        "fluid_properties": (m.fluid_properties, props),
        "step_scalars": (m.step_scalars, (velocity, phi, rho, mu, True, True)),
        "advection_terms": (m.advection_terms, (velocity, faces, mu, spacing, signs)),
        "interface_coefficients": (m.interface_coefficients, coef_args),
        "provisional_velocity": (m.provisional_velocity, explicit),
        "implicit_rhs": (m.implicit_rhs, (velocity, mu, faces, adv, dt, spacing)),
        "implicit_velocity": (m.implicit_velocity, (solutions, velocity, H, faces, coef, dt,
                                                    spacing, 0.0, reduced)),
        "pressure_rhs": (m.pressure_rhs, (provisional, spacing, dt)),
        "norms": (m.norms, (b, div_star)),
        "correct_velocity": (m.correct_velocity, (provisional, p, faces, div_star, dt, spacing)),
    }


def wall_ms(backend, fn, repeat):
    for _ in range(2):
        fn()
    backend.synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        backend.synchronize()
        times.append(1e3 * (time.perf_counter() - t))
    return float(np.median(times))


def pipelined_ms(backend, fn, repeat):
    """ms per call of ``fn`` issued ``repeat`` times back to back, one
    synchronisation at the end: what a call costs inside a step, where
    nothing waits between calls (the host's launch overhead, when that is
    more than the device's work)."""
    fn()
    backend.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    backend.synchronize()
    return 1e3 * (time.perf_counter() - t) / repeat


def _flat(backend, r):
    if isinstance(r, dict):
        return [np.array([r[k] for k in sorted(r)])]
    if isinstance(r, (tuple, list)):
        return [a for x in r for a in _flat(backend, x)]
    return [np.atleast_1d(backend.to_host(r)).astype(np.float64)]


def difference(backend, a, b):
    worst = 0.0
    for x, y in zip(_flat(backend, a), _flat(backend, b)):
        ok = ~(np.isnan(x) & np.isnan(y))
        if ok.any():
            scale = max(np.abs(y[ok]).max(), 1e-300)
            worst = max(worst, float(np.abs(x[ok] - y[ok]).max() / scale))
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", default="160x320,1024x2048,2048x4096")
    ap.add_argument("--repeat", type=int, default=0, help="calls timed (default: by grid size)")
    args = ap.parse_args(argv)
    backend = get_backend("cupy")
    xp = backend.xp
    grids = [tuple(int(s) for s in g.split("x")) for g in args.grids.split(",")]
    nmax = max(nx * ny for nx, ny in grids)
    bandwidth, _ = copy_bandwidth(backend, 8 * nmax)
    print(f"device: {xp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; "
          f"copy bandwidth {bandwidth / 1e9:.0f} GB/s ({8 * nmax / 2 ** 20:.0f} MiB copied)")
    print(f"{'operation':24s} {'grid':>10s} {'array ms':>9s} {'cuda ms':>9s} {'ratio':>7s} "
          f"{'floor ms':>9s} {'cuda/floor':>10s} {'piped ms':>9s} {'diff':>9s}")
    for nx, ny in grids:
        repeat = args.repeat or (20 if nx * ny <= 2 ** 20 else 5)
        named = calls(xp, nx, ny)
        for name, (concept, cargs) in named.items():
            kernel = concept.variant("cupy")
            diff = difference(backend, kernel(*cargs), concept.reference(*cargs))
            ref_ms = wall_ms(backend, lambda: concept.reference(*cargs), repeat)
            cuda_ms = wall_ms(backend, lambda: kernel(*cargs), repeat)
            piped = pipelined_ms(backend, lambda: kernel(*cargs), repeat)
            floor_ms = 1e3 * FIELDS[name] * 8 * nx * ny / bandwidth
            print(f"{name:24s} {f'{nx}x{ny}':>10s} {ref_ms:9.3f} {cuda_ms:9.3f} "
                  f"{ref_ms / cuda_ms:7.1f} {floor_ms:9.4f} {cuda_ms / floor_ms:10.1f} {piped:9.3f} "
                  f"{diff:9.1e}", flush=True)
        for scheme, names in STEP.items():
            seq = [named[n] for n in names]
            ref_ms = wall_ms(backend, lambda: [c.reference(*a) for c, a in seq], repeat)
            cuda_ms = wall_ms(backend, lambda: [c.variant("cupy")(*a) for c, a in seq], repeat)
            floor_ms = sum(1e3 * FIELDS[n] * 8 * nx * ny / bandwidth for n in names)
            print(f"{'step, ' + scheme:24s} {f'{nx}x{ny}':>10s} {ref_ms:9.3f} {cuda_ms:9.3f} "
                  f"{ref_ms / cuda_ms:7.1f} {floor_ms:9.4f} {cuda_ms / floor_ms:10.1f}", flush=True)
        named = None
        backend.release_memory()

if __name__ == "__main__":
    main()
