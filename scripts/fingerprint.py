"""Fingerprints of standard solves and a short flow run: iterations and hashes
of the answers, to show a refactor changes no bit.  Usage:
    python3 scripts/fingerprint.py BACKEND OUT.json [PKGROOT]
PKGROOT (default .) is put first on sys.path (an old checkout for side by side);
compare two outputs with scripts/fingerprint_compare.py."""
import hashlib, json, os, subprocess, sys, tempfile, time
backend, out = sys.argv[1], sys.argv[2]
root = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 else ".")
sys.path.insert(0, root)
import numpy as np
import bubbleflow as bf

def h(a):
    a = np.ascontiguousarray(np.asarray(a.get() if hasattr(a, "get") else a))
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]

res = {}
combos = [("cg", "none", "none", "adef2"), ("pcg", "jacobi", "none", "adef2"),
          ("pcg", "incomplete_poisson_scaled", "none", "adef2"), ("pcg", "block_ic", "none", "adef2"),
          ("pcg", "incomplete_poisson", "none", "adef2"),
          ("dpcg", "jacobi", "subdomains", "adef2"), ("dpcg", "incomplete_poisson_scaled", "levelset_subdomains", "adef2"),
          ("dpcg", "block_ic", "levelset_subdomains", "adef2"), ("dpcg", "jacobi", "stripes", "adef2"),
          ("dpcg", "incomplete_poisson_scaled", "levelset_subdomains", "def1"),
          ("dpcg", "jacobi", "levelset_subdomains", "adef2")]
for n, contrast, storage in [(64, 1e3, "diagonals"), (128, 1e3, "diagonals"), (128, 1e5, "matrix_free"), (256, 1e3, "diagonals")]:
    A, b, phi = bf.bubbly_column(n, contrast, backend=backend, storage=storage)
    for method, M, defl, variant in combos:
        if n == 256 and method == "cg":
            continue
        t = time.perf_counter()
        S = bf.PressureSolver(A, method=method, preconditioner=M, deflation=defl, phi=phi,
                              subdomains=(8, 8), variant=variant, rtol=1e-9, maxiter=20000)
        x, r = S.solve(b)
        x2, r2 = S.solve(b * 0.5 + 1e-3, x0=x)   # a second solve on the same object, with x0
        key = f"{n} {contrast:g} {storage} {method} {M} {defl} {variant}"
        res[key] = dict(it=r.iterations, it2=r2.iterations, res=repr(r.residual), reason=r.reason,
                        engine=r.engine, x=h(x), x2=h(x2), hist=h(r.residual_history))
        print(key, res[key]["it"], res[key]["it2"], r.engine, f"{time.perf_counter()-t:.2f}s", flush=True)
# the SciPy-style functions
A, b, phi = bf.bubbly_column(64, 1e3, backend=backend)
x, r = bf.cg(A, b, rtol=1e-8, M="jacobi")
res["cg jacobi 64"] = dict(it=r.iterations, x=h(x))
x, r = bf.dpcg(A, b, rtol=1e-8, M="incomplete_poisson_scaled", deflation=bf.make_deflation("subdomains", A, subdomains=(8, 8)))
res["dpcg ips 64"] = dict(it=r.iterations, x=h(x))
# a short flow run through the CLI
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, PYTHONPATH=root)
    mod = "bubbleflow.cli" if os.path.exists(os.path.join(root, "bubbleflow", "cli.py")) else "bubbleflow"
    cmd = [sys.executable, "-m", mod, "run", os.path.join(root, "cases", "two_phase.yaml"), "-o", d, "--backend", backend,
           "--set", "time.end=0.05", "--set", "output.interval=0.025", "--quiet", "--no-progress"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
    if p.returncode:
        print(p.stdout, p.stderr)
    import h5py
    with h5py.File(os.path.join(d, "two_phase.h5"), "r") as f:
        fl = {}
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and "seconds" not in name and "wall" not in name:
                fl[name] = h(obj[()]) if obj.dtype.kind in "fiub" else "str"
        f.visititems(visit)
        res["flow"] = fl
json.dump(res, open(out, "w"), indent=1, sort_keys=True)
print("wrote", out, len(res))
