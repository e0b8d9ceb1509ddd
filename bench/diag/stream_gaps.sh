# Fresh-process spread of queued call times per queue (see stream_gaps.py); JSON lines in
# $OUT/stream_gaps.jsonl, a summary on stdout.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
for t in ${TASKS:-l1_gelu_tanh l2_linear_groupsum_silu}; do
  for i in $(seq "${RUNS:-6}"); do
    python3 bench/diag/stream_gaps.py examples/$t/task.py examples/$t/fast.py --samples "${SAMPLES:-300}" 2>&1 \
      | tail -1 | sed "s/^/{\"task\": \"$t\", \"run\": $i, \"r\": /; s/\$/}/" | tee -a "$OUT/stream_gaps.jsonl"
  done
done
python3 bench/diag/stream_gaps_summary.py "$OUT/stream_gaps.jsonl"
