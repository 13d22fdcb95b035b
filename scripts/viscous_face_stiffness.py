"""The explicit viscous stress's stiffness at faces across the interface,
against the cells' largest kinematic viscosity.

    python3 scripts/viscous_face_stiffness.py [--width 1.5]

For the fluids of Hysing's case 1 (also the 3-D rising bubble's) and case 2,
each face-density rule (``operator.face_density``) and viscosity mean
(``momentum.viscosity_mean``): a plane interface normal to x crosses a row
of cells at every offset within a cell (400 of them); the cells' and
faces' properties are :func:`bubbleflow.flow.momentum.fluid_properties`'s
with the interface width ``--width`` cells.  A face's diffusivity is
``(mu_lo + mu_hi) / (2 rho_f)``: the explicit operator's diagonal at a face
across a plane interface, scaled so that one fluid gives its ``mu / rho``.
Prints the largest over the offsets beside the cells' largest ``mu / rho``,
which the explicit viscous limit takes (``case.time_step.step_limits``).
Host only, NumPy.
"""
import argparse
import os
import sys

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.flow.momentum import fluid_properties  # noqa: E402

#: (name, rho_l, rho_g, mu_l, mu_g).
FLUIDS = (("case 1 / rising 3-D", 1000.0, 100.0, 10.0, 1.0),
          ("case 2", 1000.0, 1.0, 10.0, 0.1))
RULES = ("levelset", "harmonic", "arithmetic")
MEANS = ("arithmetic", "harmonic")


def faces_largest(rho_l, rho_g, mu_l, mu_g, rule, mean, width, offsets=401):
    """The largest face diffusivity over the interface's offsets in a cell
    (cells of side 1)."""
    x = np.arange(-8, 8) + 0.5
    largest = 0.0
    for s in np.linspace(0.0, 1.0, offsets):
        phi = np.repeat((x - s)[None, :], 3, axis=0)     # liquid (phi > 0) towards +x
        _, _, mu, faces = fluid_properties(phi, width, rho_l, rho_g, mu_l, mu_g, rule, mean)
        nu = 0.5 * (mu[1, 1:] + mu[1, :-1]) / faces[0][1]
        largest = max(largest, float(nu.max()))
    return largest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=float, default=1.5,
                    help="the interface's half-width eps in cells (default 1.5)")
    args = ap.parse_args(argv)
    print(f"{'fluids':20s} {'face density':12s} {'viscosity':10s} {'faces':>8s} {'cells':>8s} "
          f"{'ratio':>6s}")
    for name, rho_l, rho_g, mu_l, mu_g in FLUIDS:
        cells = max(mu_l / rho_l, mu_g / rho_g)
        for rule in RULES:
            for mean in MEANS:
                faces = faces_largest(rho_l, rho_g, mu_l, mu_g, rule, mean, args.width)
                print(f"{name:20s} {rule:12s} {mean:10s} {faces:8.4f} {cells:8.4f} "
                      f"{faces / cells:6.2f}")


if __name__ == "__main__":
    main()
