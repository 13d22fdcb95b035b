"""How the fields are stored (output.compression): the options of each
setting, the defaults by mode, and runs that write what they say."""
import os
import zlib

import h5py
import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.io.compression import AUTO_COMPRESSION, CHUNK_BYTES, Compression
from helpers.cli import ROOT, run_cli


def test_gzip_chunks_whole_rows_of_about_a_mebibyte():
    gz = Compression("gzip", 4)
    options = gz.options((4096, 4096))
    assert options == dict(compression="gzip", compression_opts=4, chunks=(32, 4096))
    assert 32 * 4096 * 8 == CHUNK_BYTES
    assert gz.options((10, 20))["chunks"] == (10, 20)               # smaller than a chunk
    assert gz.options((64, 128, 128))["chunks"] == (8, 128, 128)    # 3-D: whole planes
    assert gz.options((3, 300000))["chunks"] == (1, 300000)         # a row above a chunk
    assert gz.options((0, 5)) == {} and Compression("none").options((64, 64)) == {}


def test_auto_is_adaptive_for_a_pressure_case_and_a_flow():
    assert AUTO_COMPRESSION == {"pressure": "adaptive", "flow": "adaptive"}
    for case_file, mode in (("bubbly_column.yaml", "pressure"), ("two_phase.yaml", "flow")):
        case = load_case(os.path.join(ROOT, "cases", case_file))
        assert case.output.compression == "auto" and case.mode == mode
        assert Compression.for_output(case.output, mode) == Compression(
            AUTO_COMPRESSION[mode], 1)


def fields_of(path):
    with h5py.File(path, "r") as fh:
        return {name: (ds.compression, ds.compression_opts, ds.chunks, ds[()])
                for name, ds in fh["fields"].items() if isinstance(ds, h5py.Dataset)}


def test_a_pressure_case_stores_each_field_as_it_pays_or_as_set(tmp_path):
    """``auto``: the density (two values) with gzip level 1, the pressure
    uncompressed; ``none`` and ``gzip`` as set; the same bits every way."""
    common = ["run", "cases/bubbly_column.yaml", "--backend", "numpy", "-q",
              "--set", "grid.nx=64", "--set", "grid.ny=64"]
    runs = {"auto": [], "none": ["--set", "output.compression=none"],
            "packed": ["--set", "output.compression=gzip", "--set", "output.compression_level=4"]}
    fields = {}
    for label, extra in runs.items():
        res = run_cli(*common, "-o", str(tmp_path / label), *extra)
        assert res.returncode == 0, res.stderr
        fields[label] = fields_of(tmp_path / label / "bubbly_column.h5")
    auto, plain, packed = fields["auto"], fields["none"], fields["packed"]
    assert auto["rho"][:3] == ("gzip", 1, (64, 64)) and auto["p"][:3] == (None, None, None)
    assert {name: f[:3] for name, f in plain.items()} == {n: (None, None, None) for n in plain}
    assert {name: f[:3] for name, f in packed.items()} == {n: ("gzip", 4, (64, 64)) for n in packed}
    for name in plain:                                      # the same bits every way
        assert np.array_equal(plain[name][3], packed[name][3])
        assert np.array_equal(plain[name][3], auto[name][3])
    size = {label: os.path.getsize(tmp_path / label / "bubbly_column.h5") for label in runs}
    assert size["packed"] < size["auto"] < size["none"]


def test_adaptive_compresses_a_field_whose_sample_shrinks_enough(tmp_path):
    """``adaptive`` over fields of several chunks: two values (a phase
    field, 2-D and 3-D, whose planes are larger than a sample) with gzip,
    noise and a field of two values in a tenth of its rows uncompressed;
    each reads back exact."""
    from bubbleflow.io.compression import write_field

    rng = np.random.default_rng(8)
    phases = np.where(rng.random((300, 2048)) < 0.01, 1.2, 1000.0)
    noise = rng.standard_normal((300, 2048))
    cube = np.where(rng.random((40, 96, 96)) < 0.01, 1.2, 1000.0)
    mixed = rng.standard_normal((300, 2048))
    mixed[::10] = 1000.0
    rows = Compression("gzip").options(noise.shape)["chunks"][0]
    with h5py.File(tmp_path / "f.h5", "w") as fh:
        stored = {name: write_field(fh, name, data, Compression("adaptive", 1))
                  for name, data in (("phases", phases), ("noise", noise), ("cube", cube),
                                     ("mixed", mixed))}
        a = stored["phases"]
        assert (a.compression, a.compression_opts, a.chunks) == ("gzip", 1, (rows, 2048))
        assert stored["cube"].compression == "gzip"
        assert (stored["noise"].compression, stored["noise"].chunks) == (None, None)
        assert stored["mixed"].compression is None
        for name, data in (("phases", phases), ("noise", noise), ("cube", cube),
                           ("mixed", mixed)):
            assert np.array_equal(stored[name][()], data)


@pytest.mark.parametrize("method", ["adaptive", "gzip", "none"])
def test_a_scalar_or_an_empty_field_is_written_as_it_is(tmp_path, method):
    from bubbleflow.io.compression import write_field

    with h5py.File(tmp_path / "f.h5", "w") as fh:
        scalar = write_field(fh, "scalar", np.float64(2.5), Compression(method, 1))
        empty = write_field(fh, "empty", np.zeros((0, 4)), Compression(method, 1))
        assert scalar[()] == 2.5 and scalar.shape == ()
        assert empty.shape == (0, 4) and empty.compression is None


def test_a_field_is_streamed_in_blocks_of_rows(tmp_path, monkeypatch):
    """Fields larger than a block go to the file block by block (the block
    made small here): gzip and uncompressed, 2-D and 3-D, the same values."""
    import bubbleflow.io.compression as compression

    monkeypatch.setattr(compression, "BLOCK_BYTES", 3 * CHUNK_BYTES)
    rng = np.random.default_rng(9)
    for shape in ((517, 2048), (41, 64, 256)):
        data = np.round(rng.standard_normal(shape), 2)
        with h5py.File(tmp_path / "f.h5", "w") as fh:
            for method in ("gzip", "none"):
                ds = compression.write_field(fh, method, data, Compression(method, 1))
                assert ds.compression == (method if method == "gzip" else None)
                assert np.array_equal(ds[()], data)


@pytest.mark.gpu
def test_a_gpu_field_is_written_as_its_host_copy(tmp_path, cupy_backend, monkeypatch):
    """A CuPy field streamed to the file through pinned blocks: the same
    dataset, bit for bit, as its host copy written, for each method."""
    import bubbleflow.io.compression as compression

    cp = cupy_backend.xp
    monkeypatch.setattr(compression, "BLOCK_BYTES", 2 * CHUNK_BYTES)
    rng = np.random.default_rng(10)
    host = np.where(rng.random((700, 1024)) < 0.05, rng.standard_normal((700, 1024)), 3.0)
    dev = cp.asarray(host)
    with h5py.File(tmp_path / "f.h5", "w") as fh:
        for method in ("gzip", "none", "adaptive"):
            a = compression.write_field(fh, "dev_" + method, dev, Compression(method, 1))
            b = compression.write_field(fh, "host_" + method, host, Compression(method, 1))
            assert (a.compression, a.chunks) == (b.compression, b.chunks)
            assert np.array_equal(a[()], host) and np.array_equal(b[()], host)


@pytest.mark.parametrize("setting", [None, "none", "gzip"])
def test_a_flows_snapshots_store_each_field_as_it_pays_or_as_set(tmp_path, setting):
    """``auto``: the density with gzip level 1, the smooth fields of a
    moving flow uncompressed; ``none`` and ``gzip`` every field as set."""
    extra = ["--set", f"output.compression={setting}"] if setting else []
    res = run_cli("run", "cases/two_phase.yaml", "--backend", "numpy", "-q", "--set",
                  "grid.nx=16", "--set", "grid.ny=32", "--set", "time.end=0.05",
                  "-o", str(tmp_path), *extra)
    assert res.returncode == 0, res.stderr
    last = sorted((tmp_path / "two_phase.snapshots").rglob("*.h5"))[-1]     # (not at rest)
    with h5py.File(last, "r") as fh:
        assert fh.attrs["time"] > 0.0
        stored = {name: (fh[name].compression, fh[name].compression_opts)
                  for name in ("rho", "phi", "p", "velocity")}
    if setting is None:
        assert stored == {"rho": ("gzip", 1), "phi": (None, None), "p": (None, None),
                          "velocity": (None, None)}
    else:
        expected = ("gzip", 1) if setting == "gzip" else (None, None)
        assert set(stored.values()) == {expected}


@pytest.mark.parametrize("shape,dtype", [((70, 40, 33), np.float64), ((131, 2048), np.float64),
                                         ((9, 16, 16, 3), np.float64), ((257, 1024), np.float32),
                                         ((5, 7), np.float64), ((1, 300000), np.float64)])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_field_written_chunk_by_chunk_reads_back_as_hdf5s_own_gzip(tmp_path, monkeypatch,
                                                                    shape, dtype, threads):
    """The chunks compressed by the pool and written directly: the dataset
    HDF5's deflate filter declares, the same values on reading (the last
    chunk short of the array's end too), the same decompressed chunks as
    h5py's own gzip write, whatever the number of threads."""
    import bubbleflow.io.compression as compression

    monkeypatch.setattr(compression, "compression_threads", lambda: threads)
    rng = np.random.default_rng(3)
    data = (np.cumsum(rng.standard_normal(shape), axis=-1) * 1e-3).astype(dtype)
    data.flat[::7] = 0.0                                    # runs that compress
    gz = Compression("gzip", 3)
    with h5py.File(tmp_path / "direct.h5", "w") as fh:
        compression.write_field(fh, "f", data, gz)
    with h5py.File(tmp_path / "filter.h5", "w") as fh:
        fh.create_dataset("f", data=data, **gz.options(data.shape, data.dtype.itemsize))
    with h5py.File(tmp_path / "direct.h5", "r") as a, h5py.File(tmp_path / "filter.h5", "r") as b:
        da, db = a["f"], b["f"]
        assert (da.compression, da.compression_opts, da.chunks, da.dtype) == \
            (db.compression, db.compression_opts, db.chunks, db.dtype)
        assert da.compression == "gzip" and da.compression_opts == 3
        assert np.array_equal(da[()], data) and np.array_equal(db[()], data)
        rows = da.chunks[0]
        for start in range(0, shape[0], rows):
            offset = (start,) + (0,) * (len(shape) - 1)
            mask_a, raw_a = da.id.read_direct_chunk(offset)
            mask_b, raw_b = db.id.read_direct_chunk(offset)
            assert mask_a == 0
            valid = min(rows, shape[0] - start) * int(np.prod(shape[1:])) * data.dtype.itemsize
            assert zlib.decompress(raw_a)[:valid] == zlib.decompress(raw_b)[:valid]


def test_a_field_of_one_chunk_or_uncompressed_is_written_whole(tmp_path):
    from bubbleflow.io.compression import write_field

    data = np.arange(12.0).reshape(3, 4)
    with h5py.File(tmp_path / "f.h5", "w") as fh:
        small = write_field(fh, "small", data, Compression("gzip", 1))
        plain = write_field(fh, "plain", np.arange(6000.0).reshape(3000, 2), Compression("none"))
        assert small.chunks == (3, 4) and small.compression == "gzip"
        assert plain.chunks is None and plain.compression is None
        assert np.array_equal(small[()], data)


def test_the_pool_leaves_one_of_the_cores_the_process_may_use(monkeypatch):
    import bubbleflow.io.compression as compression

    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
        assert compression.compression_threads() == 3
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
        assert compression.compression_threads() == 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert compression.compression_threads() == 15
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert compression.compression_threads() == 1
