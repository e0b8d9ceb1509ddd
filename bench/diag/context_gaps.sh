# Fresh-process spread of microsecond calls (bench/diag/context_gaps.py) under background loads
# that a bench has and a lone evaluation does not: idle CUDA contexts, processes creating and
# destroying contexts and copying weights, busy CPUs. JSON lines in $OUT/context_gaps.jsonl.
# Usage (GPU machine, repository root): SUITE=... SOLUTIONS=... bash bench/diag/context_gaps.sh
source "$(dirname "$0")/diag_env.sh"
idle_context() { python3 -c "
import torch, time
x = torch.empty(256 << 20, dtype=torch.uint8, device='cuda')
time.sleep(3600)"; }
churn() { while true; do python3 -c "
import torch
w = torch.randn(64 << 20)
x = w.cuda(); y = torch.empty(512 << 20, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize()"; done; }
cpu_busy() { while true; do :; done; }
for load in ${LOADS:-none idle16 churn4 cpu16}; do
  pids=()
  case $load in
    idle16) for i in $(seq 16); do idle_context & pids+=($!); done; sleep 20;;
    churn4) for i in $(seq 4); do churn & pids+=($!); done; sleep 5;;
    cpu16) for i in $(seq 16); do cpu_busy & pids+=($!); done; sleep 1;;
  esac
  for t in ${TASKS:-1/100 2/68}; do
    for i in $(seq "$RUNS"); do
      python3 bench/diag/context_gaps.py "$SUITE" "$SOLUTIONS" "$t" 2>/dev/null | tail -1 \
        | sed "s/^{/{\"load\": \"$load\", /" | tee -a "$OUT/context_gaps.jsonl"
    done
  done
  for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  sleep 2
done
python3 - "$OUT/context_gaps.jsonl" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[(r["load"], r["task"])].append(r)
for (load, task), rs in by.items():
    s = [r["speedup"] for r in rs]; ref = [r["reference_ms"] * 1e3 for r in rs]; c = [r["candidate_ms"] * 1e3 for r in rs]
    print(f"{load:8s} {task:6s} speedup {min(s):.3f}-{max(s):.3f} ({(max(s)-min(s))/sorted(s)[len(s)//2]*100:.1f} %)"
          f"  ref us {min(ref):.2f}-{max(ref):.2f}  cand us {min(c):.2f}-{max(c):.2f}")
PY
