"""The fused GPU iteration of (deflated) preconditioned CG: ``engine``
(:class:`~.engine.FusedEngine`, found through the registry's device engines,
never imported by the Krylov loop) and its CUDA sources."""
