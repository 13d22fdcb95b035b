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
