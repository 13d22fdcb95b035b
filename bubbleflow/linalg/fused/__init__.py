"""The device engines of the Krylov solve: whole CG iterations in fused CUDA
kernels, found through the registry's device engines (never imported by
the Krylov loop).

``protocol``   :class:`~.protocol.DeviceEngine`, what every engine shares:
               the Krylov loop's protocol, CUDA graph capture, the run of
               iterations on the device
``kernels``    the fused iteration's kernels (``fused.cu``) and their variants
``stages``     the iteration's stages as launches (the launch table)
``graphs``     the launch table's CUDA graphs (whole iterations, or split
               around a library call)
``iteration``  :class:`~.iteration.FusedIteration`, the fused iteration's
               host side shared by the 2-D and 3-D engines
``layout``     the 2-D kernels' tiles, row bands and column walks
``engine``     :class:`~.engine.FusedEngine`, the 2-D grid (deflated or not)
``engine3d``   :class:`~.engine3d.FusedEngine3D`, the 3-D grid, and the
               registry's factory for both
``ranks``      :class:`~.ranks.RankFusedEngine`, one rank's slab of a
               distributed operator (``ranks.cu``)
"""
