# Does any setting of the CUDA runtime remove the offset a fresh process carries on microsecond
# calls? bench/diag/context_gaps.py (reference, candidate and a four-launch probe in one process,
# queued behind a spin, no L2 flush) in RUNS fresh processes per condition:
#   base     nothing set
#   conn1    CUDA_DEVICE_MAX_CONNECTIONS=1   (one hardware queue per context)
#   conn32   CUDA_DEVICE_MAX_CONNECTIONS=32
#   eager    CUDA_MODULE_LOADING=EAGER       (every kernel loaded at context creation)
#   graph    each call captured once in a CUDA graph and replayed (launch work on the device)
# JSON lines in $OUT/process_knobs.jsonl, and per condition and task the range over the processes
# of each side's median and of the speedup. Also the machine's NUMA layout.
# Usage (GPU machine, repository root): [TASKS="1/100 2/68"] [RUNS=5] bash bench/diag/process_knobs.sh
source "$(dirname "$0")/diag_env.sh"
(lscpu | grep -i -E "numa|model name|^cpu\(s\)"; nvidia-smi topo -m) 2>&1 | tee "$OUT/topology.txt"
for cond in ${CONDS:-base conn1 conn32 eager graph}; do
  envs=() args=()
  case $cond in
    conn1) envs=(CUDA_DEVICE_MAX_CONNECTIONS=1);;
    conn32) envs=(CUDA_DEVICE_MAX_CONNECTIONS=32);;
    eager) envs=(CUDA_MODULE_LOADING=EAGER);;
    graph) args=(--graph);;
  esac
  for t in ${TASKS:-1/100 2/68}; do
    for i in $(seq "$RUNS"); do
      env "${envs[@]}" python3 bench/diag/context_gaps.py "$SUITE" "$SOLUTIONS" "$t" "${args[@]}" \
        2>"$OUT/err-$cond.txt" | tail -1 | sed "s/^{/{\"condition\": \"$cond\", /" \
        | tee -a "$OUT/process_knobs.jsonl"
    done
  done
done
python3 - "$OUT/process_knobs.jsonl" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.defaultdict(list)
for r in rows:
    by[(r["condition"], r["task"])].append(r)
def rng(v):
    v = sorted(v)
    return f"{v[0]:.2f}-{v[-1]:.2f} ({(v[-1] - v[0]) / v[len(v) // 2] * 100:4.1f} %)"
for (cond, task), rs in by.items():
    print(f"{cond:7s} {task:6s} n={len(rs)} speedup {rng([r['speedup'] for r in rs])}"
          f"  ref us {rng([r['reference_ms'] * 1e3 for r in rs])}"
          f"  cand us {rng([r['candidate_ms'] * 1e3 for r in rs])}"
          f"  probe us {rng([r['probe_ms'] * 1e3 for r in rs])}")
PY
