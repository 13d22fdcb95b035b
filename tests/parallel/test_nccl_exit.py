"""A process whose CUDA graphs hold NCCL calls ends when its work ends:
NCCL's destroy waits for those graphs, so the communicator releases them
at exit before it ends (``compute.comm.NCCLDevice.close``)."""
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.launcher import child_env, mpiexec

HELPER = Path(__file__).resolve().parent.parent / "helpers" / "nccl_exit.py"


@pytest.mark.gpu
def test_ranks_with_nccl_graphs_exit_when_their_work_ends(cupy_backend):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    pytest.importorskip("cupy.cuda.nccl")
    ranks = min(2, cupy_backend.xp.cuda.runtime.getDeviceCount())
    proc = subprocess.Popen([mpiexec(), "-n", str(ranks), sys.executable, str(HELPER)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    solved = []
    for line in proc.stdout:
        if line.startswith("solved"):
            solved.append((time.perf_counter(), line.split()))
        if len(solved) == ranks:
            break
    assert len(solved) == ranks, proc.communicate(timeout=120)
    # Graphs holding NCCL calls alive at exit: the two engines' (multigrid PCG, CG).
    assert all(int(words[4]) >= 2 and words[6] == "fused" for _, words in solved), solved
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"{ranks} rank(s) still running 30 s after their work ended")
    assert proc.returncode == 0, err[-2000:]
    assert time.perf_counter() - solved[-1][0] < 30


def test_close_destroys_the_graphs_before_the_communicator():
    """``close``: the device's work finished, every live handle's graph
    dropped, then NCCL's destroy (once); a handle launched after it says
    why; the host communicators hand the graph back as it is."""
    from bubbleflow.compute.comm import CapturedGraph, MPIHost, NCCLDevice, SingleProcess

    events = []

    class Graph:
        def launch(self, *args):
            events.append("launch")

        def __del__(self):
            events.append("graph destroyed")

    class Nccl:
        def destroy(self):
            events.append("nccl destroyed")

    class Device:
        def __init__(self, number):
            pass

        def synchronize(self):
            events.append("synchronized")

    class Cupy:
        class cuda:
            pass
    Cupy.cuda.Device = Device

    comm = NCCLDevice.__new__(NCCLDevice)
    comm.cp, comm.device, comm.nccl_comm, comm._graphs = Cupy, 0, Nccl(), []
    kept = [comm.hold_graph(Graph()), comm.hold_graph(Graph())]
    assert comm.hold_graph(None) is None
    kept[0].launch()
    comm.close()
    comm.close()
    assert events == ["launch", "synchronized", "graph destroyed", "graph destroyed",
                      "nccl destroyed"]
    assert all(isinstance(h, CapturedGraph) and h.graph is None for h in kept)
    with pytest.raises(RuntimeError, match="has ended"):
        kept[1].launch()
    graph = Graph()
    assert SingleProcess().hold_graph(graph) is graph
    assert MPIHost.hold_graph(None, graph) is graph
