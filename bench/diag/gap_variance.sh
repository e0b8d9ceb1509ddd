# Fresh-process spread of queued call times, with and without CUPTI (see gap_variance.py).
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
for t in l1_gelu_tanh l2_linear_groupsum_silu; do
  for mode in "" --trace "" --trace; do for i in 1 2 3; do
    echo -n "$t $i "; python3 bench/diag/gap_variance.py examples/$t/task.py $mode 2>&1 | tail -1
  done; done
done
