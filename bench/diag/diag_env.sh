# Sourced by the diagnostics in bench/diag that time CUDA-L1's sample in fresh processes: where
# the sample and the outputs are, how many processes per condition, and the GPU they ran on.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
SUITE=${SUITE:-.gpu-data/sample40/suite}
SOLUTIONS=${SOLUTIONS:-.gpu-data/sample40/solutions.jsonl}
RUNS=${RUNS:-5}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
