#!/usr/bin/env bash
# Candidates per hour of `cudal1 bench` (parallel builds, one timing phase per GPU) against a
# serial `cudal1 eval` loop, on uncached load_inline builds; JSON and Markdown under $OUT.
#   bench/bench_throughput.sh                          # GPU: 16 pipeline + 4 serial candidates
#   bench/bench_throughput.sh --device cpu             # quick local check (C++ extension builds)
#   bench/bench_throughput.sh --pipeline 32 --serial 6 # other counts (rates are comparable)
# Other options: bench/throughput.py --help. The cudal1 binary: build-gpu/cudal1 when it exists
# (bench/gpu_session.sh builds there), else build/cudal1, or --cudal1 PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cudal1-out}
mkdir -p "$OUT"
cudal1=build/cudal1
[ -x build-gpu/cudal1 ] && cudal1=build-gpu/cudal1
device=cuda
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --device ]; then device=${args[i + 1]:-cuda}; fi
done
if [ "$device" != cpu ] && command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/throughput-gpu.txt" || true
fi
exec python3 bench/throughput.py --cudal1 "$cudal1" --root . --out "$OUT" "$@"
