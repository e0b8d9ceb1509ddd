# Fresh-process spread of the GRU example's host-bound reference on the window clock, without
# cudal1: plain, with CUPTI tracing, with the garbage collector on (see host_variance.py).
# PROCESSES (default 5) fresh processes per variant; one JSON line each, on stdout.
export PYTHONUNBUFFERED=1
task=${TASK:-examples/l3_gru_sequence/task.py}
for mode in "" --trace --gc; do
  for i in $(seq "${PROCESSES:-5}"); do
    python3 bench/diag/host_variance.py "$task" $mode --samples "${SAMPLES:-30}" 2>&1 | tail -1
  done
done
