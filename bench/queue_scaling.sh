#!/usr/bin/env bash
# Scaling of the Redis queue on a GPU machine with two GPUs (the device kind nvidia-h200-x2):
# `cudal1 bench --queue` over the 40-task CUDA-L1 sample with one `cudal1 worker`, then with one
# worker per GPU; the numbers go to $OUT (bench/queue_scaling.py says what they mean). The whole
# script stays under 10 minutes: the runs share what the build leaves of a 560 s budget, and a
# run cut short still reports what it finished.
#
# Redis and hiredis are not on the GPU machine: Debian 12's packages travel in .gpu-deps
# (git-ignored). Fetch them once, on a Debian 12 machine, in the repository root:
#   mkdir -p .gpu-deps && (cd .gpu-deps && apt-get download redis-server \
#     redis-tools libhiredis0.14 libhiredis-dev liblzf1 libjemalloc2)
# and carry that folder: device run with carry [".gpu-deps"] and the command
#   bench/queue_scaling.sh            # unpack, build (build-gpu/), measure
#   bench/queue_scaling.sh build      # only unpack and build
#   bench/queue_scaling.sh measure    # only measure, with build-gpu/cudal1 built earlier
# The packages are unpacked with dpkg -x under $DEBS_PREFIX (/tmp/cudal1-debs), never into /.
# Environment: SAMPLE (the sample's directory), BUDGET (--time-budget, 2), LIMIT (first N
# tasks; 0: all), JOBS (builds per worker; default cores / 2), TOTAL_S (560), SCALING_ARGS (more
# options of bench/queue_scaling.py).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=${OUT:-/tmp/cudal1-out}
mkdir -p "$OUT"
DEBS=${DEBS:-.gpu-deps}
PREFIX=${DEBS_PREFIX:-/tmp/cudal1-debs}
SAMPLE=${SAMPLE:-shared/data/cudal1-h100-sample40}
TOTAL_S=${TOTAL_S:-560}
PORT=${PORT:-6390}
python=$(command -v python3)

unpack() {
  if ! ls "$DEBS"/*.deb >/dev/null 2>&1; then
    echo "no .deb files in $DEBS: fetch them as the top of $0 says and carry that folder" >&2
    return 1
  fi
  mkdir -p "$PREFIX"
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$PREFIX" || return 1; done
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ! "$PREFIX/usr/bin/redis-server" --version; then
    echo "the carried redis-server does not run here; what it lacks:" >&2
    ldd "$PREFIX/usr/bin/redis-server" | grep "not found" >&2
    return 1
  fi
}

build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$python" \
    -DHIREDIS_ROOT="$PREFIX" -DCUDAL1_BUILD_TESTS=OFF > "$OUT/configure.log" 2>&1 ||
    { tail -40 "$OUT/configure.log"; return 1; }
  grep -q "the Redis queue is built" "$OUT/configure.log" ||
    { echo "hiredis was not found under $PREFIX" >&2; grep cudal1: "$OUT/configure.log"; return 1; }
  cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" -A5 "$OUT/build.log" | head -60; return 1; }
  echo "build ok ($(( $(date +%s) - START )) s since the start)"
}

measure() {
  [ -x build-gpu/cudal1 ] || { echo "build-gpu/cudal1 is missing: run the build step first" >&2; return 1; }
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpus.txt"
  local redis_dir=/tmp/cudal1-queue-redis
  rm -rf "$redis_dir" /tmp/cudal1-queue-scaling && mkdir -p "$redis_dir"
  # A private Redis on the loopback interface only (docs/scale-out.md: keep Redis off public networks).
  "$PREFIX/usr/bin/redis-server" --port "$PORT" --bind 127.0.0.1 --dir "$redis_dir" --appendonly yes \
    --save "" --daemonize yes --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log" || return 1
  local left=$(( TOTAL_S - ($(date +%s) - START) ))
  echo "measuring with $left s left"
  "$python" bench/queue_scaling.py --cudal1 build-gpu/cudal1 --queue "redis://127.0.0.1:$PORT" \
    --suite "$SAMPLE/suite" --solutions "$SAMPLE/solutions.jsonl" --gpus 2 --jobs "${JOBS:-0}" \
    --time-budget "${BUDGET:-2}" --limit "${LIMIT:-0}" --deadline $(( left - 30 )) \
    --gpu-info "$OUT/gpus.txt" --out "$OUT" ${SCALING_ARGS:-}
  local status=$?
  kill "$(cat "$redis_dir/redis.pid")" 2>/dev/null
  return $status
}

case "${1:-all}" in
  build) unpack && build ;;
  measure) unpack && measure ;;
  all) unpack && build && measure ;;
  *) echo "unknown step '$1' (see the top of $0)" >&2; exit 2 ;;
esac
