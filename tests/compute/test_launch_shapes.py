"""Launch shapes of the CUDA twins, host arithmetic only (no device)."""
from bubbleflow.compute import cuda


def test_reduce_blocks_cover_the_items_up_to_the_cap():
    for threads in (128, 256):
        for n in (0, 1, threads - 1, threads, threads + 1, 1000 * threads, 5000 * threads + 3):
            blocks = cuda.reduce_blocks(n, threads)
            assert 1 <= blocks <= cuda.REDUCE_BLOCKS
            # One block a `threads` items until the cap; past it the blocks stride.
            assert blocks == cuda.REDUCE_BLOCKS or blocks * threads >= n > (blocks - 1) * threads \
                or n == 0


def test_reduce_blocks_default_is_256_threads():
    assert cuda.reduce_blocks(257) == 2
    assert cuda.reduce_blocks(256 * cuda.REDUCE_BLOCKS + 1) == cuda.REDUCE_BLOCKS


def _runs(nz, gz):
    """The planes each z block of a BF_CELLS3_RUNS launch takes (the macro's arithmetic)."""
    per = -(-nz // gz)
    return [max(0, min(z * per + per, nz) - z * per) for z in range(gz)]


def test_grid_3d_runs_cover_every_plane_once():
    for shape in ((256, 256, 512), (257, 256, 512), (128, 128, 256), (10, 12, 19), (64, 64, 37),
                  (1, 1, 1), (300, 600_000, 2)):
        for planes in (1, 5, 16, 64):
            (gx, gy, gz), block = cuda.grid_3d(*shape, (32, 8), planes)
            nx, ny, nz = shape
            assert block == (32, 8)
            assert gx * 32 >= nx > (gx - 1) * 32
            assert gy == min(-(-ny // 8), 65535)
            runs = _runs(nz, gz)
            assert sum(runs) == nz and max(runs) <= planes


def test_grid_3d_shortens_runs_rather_than_leave_blocks_out():
    (gx, gy, gz), _ = cuda.grid_3d(256, 256, 512, (32, 8))
    assert gz * cuda.RUN_PLANES == 512                 # the whole run: 8192 blocks
    (gx, gy, gz), _ = cuda.grid_3d(128, 128, 256, (32, 8))
    assert gx * gy * gz >= cuda.MIN_BLOCKS_3D and max(_runs(256, gz)) < cuda.RUN_PLANES
    (gx, gy, gz), _ = cuda.grid_3d(16, 16, 16, (32, 8))
    assert gz == 16                                    # one plane a block: too few cells
