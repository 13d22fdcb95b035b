"""
Pressure of the bubbly column with the SciPy-style solvers
==========================================================

The standard pressure problem: the unit square, water up to 0.85 m, air
above it and 3 x 3 air bubbles of radius 0.08 m, at a density contrast of
1000.  :func:`bubbleflow.bubbly_column` builds its operator, right-hand side
(a fluid at rest under gravity) and level set; :func:`bubbleflow.cg` and
:func:`bubbleflow.dpcg` solve it with SciPy's argument names and return
``(x, info)``, where ``info`` is SciPy's integer (0: converged) carrying the
solve's record.
"""

# %%
# The problem on a 64 x 64 grid
# -----------------------------
import matplotlib.pyplot as plt
import numpy as np

from bubbleflow import bubbly_column, cg, dpcg, make_deflation, make_preconditioner

n = 64
A, b, phi = bubbly_column(n, contrast=1e3)
print(f"{A.shape[0]} unknowns, level set {phi.shape} (y, x)")

# %%
# Three solvers, one tolerance
# ----------------------------
# Plain CG, CG preconditioned by multigrid, and deflated PCG with the scaled
# incomplete-Poisson preconditioner and level-set-subdomain deflation: the
# grid cut into 16 x 16 blocks (4 cells wide here, less than a bubble's
# diameter), each block's liquid and gas parts a deflation vector of their own.
rtol = 1e-8
x_cg, info_cg = cg(A, b, rtol=rtol)
x_mg, info_mg = cg(A, b, rtol=rtol, M=make_preconditioner("multigrid", A))
D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(16, 16))
M = make_preconditioner("incomplete_poisson_scaled", A)
x_dp, info_dp = dpcg(A, b, rtol=rtol, M=M, deflation=D)
print(f"deflation space: {D.k} vectors")

for name, info in (("CG", info_cg), ("CG + multigrid", info_mg), ("DPCG", info_dp)):
    print(f"{name:15s} info {int(info)}, {info.iterations} iterations, "
          f"true relative residual {info.residual:.2e}")

# %%
# The three answers agree: the operator is singular (constants in its null
# space) and each solver returns the zero-mean pressure.
print(f"max |x_dpcg - x_cg| / max |x_cg| = "
      f"{np.abs(x_dp - x_cg).max() / np.abs(x_cg).max():.1e}")

# %%
# The finer the blocks, the more deflation vectors and the fewer iterations
# (each one with a larger coarse system to solve).
for blocks in ((4, 4), (8, 8), (16, 16)):
    Dk = make_deflation("levelset_subdomains", A, phi=phi, subdomains=blocks)
    _, info = dpcg(A, b, rtol=rtol, M=M, deflation=Dk)
    print(f"{blocks[0]:2d} x {blocks[1]:2d} blocks: {Dk.k:3d} vectors, "
          f"{info.iterations} iterations")

# %%
# The pressure and the convergence history
# ----------------------------------------
# ``info.residual_history`` holds the relative recursive residual of every
# iteration.
p = x_dp.reshape(phi.shape)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4.2))
extent = (0.0, 1.0, 0.0, 1.0)
im = ax0.imshow(p, origin="lower", extent=extent, cmap="viridis")
ax0.contour(phi, levels=[0.0], colors="white", linewidths=1.0, extent=extent, origin="lower")
fig.colorbar(im, ax=ax0, label="p (zero mean)")
ax0.set(xlabel="x (m)", ylabel="y (m)", title="pressure, interface in white")
for name, info in (("CG", info_cg), ("CG + multigrid", info_mg), ("DPCG", info_dp)):
    ax1.semilogy(info.residual_history, label=f"{name} ({info.iterations})")
ax1.axhline(rtol, color="gray", linestyle=":", label="rtol")
ax1.set(xlabel="iteration", ylabel="relative residual", title="convergence")
ax1.legend()
fig.tight_layout()
plt.show()
