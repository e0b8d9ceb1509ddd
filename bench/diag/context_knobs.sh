# What makes a new CUDA context cost more beside live ones: the idle contexts' hardware queues
# (CUDA_DEVICE_MAX_CONNECTIONS), their memory, and whether idle contexts on the host's other GPU
# count; CASES="churn-other churn-same": which churn (contexts made and torn down, big exits,
# allocation, CUPTI) slows contexts on the other GPU and on the same one. Run from the repository root on a machine of two GPUs (nvidia-h200-x2; or
# `bench/gpu_session.sh knobs`); one JSON line
# per case in $OUT/context-knobs.jsonl. Results: bench/results/2026-11-28-context-knobs-h200x2.jsonl.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/cudal1-out}; mkdir -p "$OUT"
python=$(command -v python3)
IDLE=${IDLE:-48}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -2
run() {  # label, then context_under_load.py's arguments
  local label=$1; shift
  timeout 150 "$python" bench/diag/context_under_load.py --probes 6 --together 8 "$@" 2>"$OUT/$label.err" |
    "$python" -c 'import json,sys
for line in sys.stdin:
    v = json.loads(line); v["case"] = sys.argv[1]; print(json.dumps(v))' "$label" |
    tee -a "$OUT/context-knobs.jsonl"
}
c1=CUDA_DEVICE_MAX_CONNECTIONS=1
for case in ${CASES:-idle48 idle48-conn1 idle48-other base base-conn1 idle48-bgconn1 idle48-bare}; do
  case $case in
    idle48) run $case --scenarios idle_contexts --idle "$IDLE";;
    idle48-conn1) run $case --scenarios idle_contexts --idle "$IDLE" --background-env $c1 --probe-env $c1;;
    idle48-other) run $case --scenarios idle_contexts --idle "$IDLE" --load-device 1;;
    base) run $case --scenarios idle;;
    base-conn1) run $case --scenarios idle --probe-env $c1;;
    idle48-bgconn1) run $case --scenarios idle_contexts --idle "$IDLE" --background-env $c1;;
    idle48-bare) run $case --scenarios idle_contexts --idle "$IDLE" --idle-mib 0;;
    # Which of the driver's work the GPUs of one host share (2026-11-28-four-gpus.md: the host
    # made 3.5-4 contexts a second for all its GPUs): each kind of churn on the other GPU, then
    # on the probes' own, every context with one queue. LOADERS loops (default 4) each.
    churn-other) run $case --scenarios context_churn,exit_churn,alloc_churn,cupti_churn \
                   --loaders "${LOADERS:-4}" --load-device 1 --background-env $c1 --probe-env $c1;;
    churn-same) run $case --scenarios context_churn,exit_churn,alloc_churn,cupti_churn \
                  --loaders "${LOADERS:-4}" --background-env $c1 --probe-env $c1;;
  esac
done
