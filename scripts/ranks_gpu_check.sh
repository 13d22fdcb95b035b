#!/usr/bin/env bash
# The ranks on a machine of several GPUs (docs/performance.md, "Several
# GPUs"): strong and weak scaling with the performance model beside each
# measurement, NCCL between the GPUs against one process, the GPU tests of
# tests/parallel.  Every step has its own time limit and writes into
# OUTDIR as it goes; each rank builds its own slab on the host.
#
#   scripts/ranks_gpu_check.sh OUTDIR [RANKS] [WHEELS]
#   STEPS="2d solve" scripts/ranks_gpu_check.sh OUTDIR "2 4"
#
# RANKS: the counts of ranks to scale to, quoted (default: 2; "2 4" on four
# GPUs); WHEELS: a folder of mpich / mpi4py wheels, installed where no MPI
# is (machines without a network); STEPS: some of "fused 2d solve tests 3d"
# (the default: all; their limits add up to more than one 10-minute device
# call).
set -u
out=${1:?OUTDIR}; ranks=${2:-2}; wheels=${3:-.wheels}
most=$(echo $ranks | tr ' ' '\n' | sort -n | tail -1)
steps=" ${STEPS:-fused 2d solve tests 3d} "
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
# Open MPI (a system MPI) refuses root without these; MPICH ignores them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
step() { echo "== $(date +%T) $*"; }
want() { [[ "$steps" == *" $1 "* ]]; }

step "GPUs and their links"
nvidia-smi -L; nvidia-smi topo -m
if ! python3 -c "import mpi4py.MPI" 2>/dev/null || ! command -v mpiexec >/dev/null; then
    python3 -m pip install -q --no-deps --no-index "$wheels"/*.whl
fi
python3 -c "import mpi4py, cupy; from cupy.cuda import nccl; print('mpi4py', mpi4py.__version__, 'cupy', cupy.__version__, 'nccl', nccl.get_version())"

if want fused; then
    step "The ranks' fused engine against the generic loop (one rank, GPU tests)"
    timeout 120 python3 -m pytest -q --backend cupy -m gpu tests/parallel/test_fused_ranks.py \
        2>&1 | tail -15
fi

if want 2d; then
    step "2-D strong (8192^2) and weak (4096^2 a rank) scaling, Jacobi PCG, the model"
    timeout 200 python3 -m bubbleflow bench --scaling $ranks --backend cupy --sizes 8192 \
        --weak-sizes 4096 --csv "$out/scaling_2d.csv" 2>&1 | tee "$out/scaling_2d.log"
fi

if want solve; then
    step "NCCL between the GPUs: the solver cases of tests/parallel against one process"
    timeout 80 mpiexec -n $most python3 tests/helpers/mpi_solve.py "$out/solve_nccl.jsonl" cupy nccl
    python3 - "$out/solve_nccl.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"{r['case']:<28} {r['comm']} x{r['ranks']} {r.get('engine')}: its {r['its']} "
          f"(one process {r['its_one']}), "
          f"answer {r['diff']:.1e}, residual {r['residual']:.1e}")
bad = [r["case"] for r in rows if not r["converged"] or r["diff"] > 1e-10]
print(f"{len(rows)} cases, {len(bad)} off: {bad}")
PY
fi

if want tests; then
    step "GPU tests of tests/parallel but the solver cases above (NCCL where there is a GPU a rank)"
    timeout 300 python3 -m pytest -q --backend cupy -m gpu tests/parallel \
        -k "not one_process_answer" --ignore tests/parallel/test_fused_ranks.py 2>&1 | tail -15
fi

if want 3d; then
    step "3-D strong (512^3) and weak (256^3 a rank) scaling"
    timeout 300 python3 -m bubbleflow bench --scaling $ranks --dim 3 --backend cupy --sizes 512 \
        --weak-sizes 256 --csv "$out/scaling_3d.csv" 2>&1 | tee "$out/scaling_3d.log"
fi
step "done"
