"""Linear algebra of the pressure equation, in the order a solve uses it.

``registry``     names, rules, options and costs of methods, variants,
                 preconditioners and deflations (standard library only)
``precond/``     preconditioners, one module each
``deflation/``   deflation spaces (``space``: ``Z``, ``A Z``, ``E``), the coarse
                 solve ``E^+`` (``coarse``) and their set-up kernels
``krylov/``      CG / PCG / DPCG written once against the engine interface:
                 ``system`` (make_system, the null-space gauge), ``engine``
                 (the array engine and the variants), ``device`` (engines that
                 run whole iterations on the device), ``stopping`` (the
                 stopping policy), ``cg`` (the loop), ``record``
``functions``    cg / pcg / dpcg with SciPy's signatures (choose the engine)
``engines``      which engine runs a solve (the fused one found in the registry)
``fused/``       the fused CUDA engine and its sources (imported only on demand)
``solver``       :class:`PressureSolver`: built once per grid, ``update`` per
                 operator, ``solve`` per right-hand side
"""
