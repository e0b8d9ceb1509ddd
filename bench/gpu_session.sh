#!/usr/bin/env bash
# One GPU-machine session: build, GPU tests and/or the evaluation benchmark, with logs under $OUT.
#   bench/gpu_session.sh build        configure and build (build-gpu/)
#   bench/gpu_session.sh test         + ctest -L unit and -L gpu (UNIT=0: not the unit tests;
#                                     GPU_TESTS / GPU_EXCLUDE: regexes of the GPU tests run / left
#                                     out; GPU_JOBS at once)
#   bench/gpu_session.sh smoke        + the GPU CLI cases and one evaluation per CUDA example
#   bench/gpu_session.sh bench        + bench/eval_bench.py (BENCH_ARGS: more of its options)
#   bench/gpu_session.sh redteam      + the CUDA cases of the red-team corpus (REDTEAM_ARGS: more
#                                     options for every evaluation, e.g. "--timing-streams 16")
#   bench/gpu_session.sh agreement    + benchmark (b) on the queued clock for kernels over 1 ms
#                                     (bench/agreement/gru_fast_task.py; AGREE_RUNS evaluations)
#   bench/gpu_session.sh rounds       + benchmark (a) with --timing-rounds ${ROUNDS:-3} on the sub-100 µs
#                                     examples (EXAMPLES: which; ~25 s per evaluation, so pass two
#                                     at a time to stay under 10 minutes)
#   bench/gpu_session.sh reward       + bench/reward_cost.py: GPU-held seconds per candidate, wall time
#                                     and run-to-run spread of `cudal1 bench` on the CUDA-L1 sample
#                                     (RUNS fresh runs, default 2; BENCH_ARGS: more bench options,
#                                     e.g. "--timing-streams 16" or "--calibration auto")
#   bench/gpu_session.sh gaps         bench/diag/stream_gaps.sh: fresh-process spread of a queued
#                                     call's device time per kind of stream (no build needed)
#   bench/gpu_session.sh knobs        bench/diag/context_knobs.sh: what a new CUDA context costs
#                                     beside 48 idle ones, by their hardware queues and memory and
#                                     on the host's other GPU (a machine of two GPUs; CASES: which;
#                                     no build needed)
#   bench/gpu_session.sh hostvar      bench/diag/host_variance.sh: fresh-process spread of the GRU
#                                     reference's window time in plain PyTorch (no build needed)
#   bench/gpu_session.sh sandbox      + the sandbox on this machine: cgroups, worker start with and
#                                     without it, its unit tests, one GPU eval, containment cases
#   bench/gpu_session.sh doctor       + cudal1 doctor (GPU and CPU), the readable verdict on a
#                                     terminal, the device-gate case and the GRU example
#   bench/gpu_session.sh throughput   + bench/bench_throughput.sh (cudal1 bench vs serial eval);
#                                     run `build` in an earlier command: together they exceed 10 min
#   bench/gpu_session.sh profile      + issue 31: profiles of the CUDA-L1 sample's verdicts through
#                                     cudal1 serve, the prompts data rl renders with them
#                                     (bench/profile_prompts.py), no_custom_kernel against BEFORE
#   bench/gpu_session.sh warm         + bench/warm_workers.py: cudal1 bench on the CUDA-L1 sample with
#                                     --warm-workers off and on, one build cache (RUNS each, default 1)
#   bench/gpu_session.sh rlload       + bench/rl_load.py (issue 32): GRPO steps of 8 tasks x 8 new
#                                     variants on the CUDA-L1 sample through cudal1 serve, cold
#                                     caches; LABEL names the JSON, STOP_AFTER (default 420 s) ends
#                                     it, DRAIN (default 120 s) lets what is in flight finish,
#                                     SERVE_ARGS go to cudal1 serve (e.g. "--warm-workers off"),
#                                     WORKER_ARGS to every queue worker (QUEUE_WORKERS),
#                                     BEFORE_SRC measures earlier code built from that folder;
#                                     HOST_CPUS / BUILD_HOST_CPUS (with DEVICE=cuda:0) split the
#                                     cores into a GPU host and a build host (bench/split_hosts.py),
#                                     WORKER_JOBS the GPU worker's --jobs there; STEPS=N sends
#                                     only the first N steps (with STOP_AFTER=0: the same items in
#                                     every run, whose overall rates compare)
#   bench/gpu_session.sh ready        + issue 32's ready workers: bench/diag/context_under_load.py
#                                     (a context's time under GPU, memory, context and CPU load;
#                                     CONTEXT_DIAG=0 leaves it out), the CUDA red team with
#                                     --ready-workers READY (default 8; REDTEAM_ONLY narrows it),
#                                     then `cudal1 bench` one candidate at a time (LIMIT, default 4)
#                                     with --ready-workers READY and 0 (bench/ready_latency.py)
#   bench/gpu_session.sh keep         + issue 32's kept references: the rlload step twice on one
#                                     build, --keep-references on then off (STOP_AFTER default
#                                     120, DRAIN 45; LABEL names both JSONs, -keep-on/-keep-off)
#   bench/gpu_session.sh order        + serve's --start-order by-task and arrival at once, one GPU
#                                     and half the cores each (a machine of two GPUs; STOP_AFTER
#                                     default 300, DRAIN 45; LABEL-by-task, LABEL-arrival)
#   bench/gpu_session.sh configs      + serve options side by side on the same items: CONFIGS
#                                     ("A;B;..." serve options), each an rlload run of the first
#                                     STEPS (1) steps to the end, cold caches (LABEL-1, LABEL-2, ...)
#   bench/gpu_session.sh scaling      + GPUs that add up, on a machine of G GPUs: the first STEPS (2)
#                                     GRPO steps to the end with cudal1 serve on one GPU and its
#                                     share of the cores, on all G, and through Redis with one
#                                     cudal1 worker per GPU (RUNS="one all queue"; LABEL-one,
#                                     LABEL-allG, LABEL-queueG)
#   bench/gpu_session.sh buildcpu     + bench/build_cpu.py: compilers' CPU seconds per load_inline
#                                     build of the CUDA-L1 sample, CUDAL1_PCH off against on
#                                     (CONFIGS: PCH values or NAME=VALUE+... variables, e.g.
#                                     "CUDAL1_PCH=on+CUDAL1_CUDA_HEADERS=full,CUDAL1_PCH=on+CUDAL1_CUDA_HEADERS=light";
#                                     JOBS at once), fresh caches, in one run
#   bench/gpu_session.sh remotebuilds + bench/queue_remote_builds.sh: the sample's load_inline
#                                     candidates built by a `cudal1 worker --role build` for a
#                                     GPU worker through Redis, against a local bench
#   bench/gpu_session.sh serve        + bench/serve_load.py suite: cudal1 serve's rewards per GPU-hour
#                                     on SUITE/SOLUTIONS (default: the CUDA-L1 sample in
#                                     .gpu-data/sample40, copied there from ../shared/data)
# The GPU machine has no headers of SQLite, libcurl, cpp-httplib or hiredis, and no bubblewrap:
# Debian's .debs in .gpu-deps/ (carried; `apt-get download bubblewrap libsqlite3-dev libcurl4-openssl-dev libcpp-httplib-dev
# libcpp-httplib0.11 libssl-dev libhiredis-dev libhiredis0.14 redis-server redis-tools liblzf1
# libjemalloc2`
# there on a Debian 12 machine) are unpacked under /opt/cudal1-deps and named to CMake.
# BUILD_TARGETS (e.g. "cudal1_cli cudal1-worker") builds only those.
# PACK=1 leaves one archive, $OUT/cudal1-session.tgz, instead of the files.
# CODE names the commit measured in the JSONs: give it literally (CODE=abc1234 bench/...), since
# the device's copy of the repository may carry an older git HEAD than its working tree; without
# it the benches record `git describe --always --dirty`, which says -dirty then.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cudal1-out}
mkdir -p "$OUT"
export CUDAL1_CACHE_DIR=$PWD/build-gpu/cache
python=$(command -v python3)

# Unpacks the carried .debs (never over /: a package could break the machine's own files).
deps_flags=()
step_deps() {
  [ -d .gpu-deps ] || return 0
  local prefix=/opt/cudal1-deps lib=/opt/cudal1-deps/usr/lib/x86_64-linux-gnu
  mkdir -p "$prefix"
  for deb in .gpu-deps/*.deb; do dpkg -x "$deb" "$prefix"; done
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$prefix/usr/bin:$PATH"
  [ -f "$prefix/usr/include/sqlite3.h" ] &&
    deps_flags+=(-DSQLite3_INCLUDE_DIR="$prefix/usr/include" -DSQLite3_LIBRARY="$lib/libsqlite3.a")
  # The machine's own libcurl.so.4 with Debian's headers (libcurl keeps its ABI).
  local curl_so
  curl_so=$(ls /usr/lib/x86_64-linux-gnu/libcurl.so.4 2>/dev/null)
  [ -n "$curl_so" ] && [ -d "$prefix/usr/include/x86_64-linux-gnu/curl" ] &&
    deps_flags+=(-DCURL_INCLUDE_DIR="$prefix/usr/include/x86_64-linux-gnu" -DCURL_LIBRARY="$curl_so")
  [ -f "$prefix/usr/include/httplib.h" ] && deps_flags+=(-DCUDAL1_HTTPLIB_ROOT="$prefix/usr")
  [ -d "$prefix/usr/include/hiredis" ] && deps_flags+=(-DCMAKE_PREFIX_PATH="$prefix/usr")
  echo "deps: ${deps_flags[*]}"
}

step_build() {
  step_deps
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
  # How the host shares its CPUs: autogroups (nice counts only inside a session's group when on)
  # and the cgroup this runs in, with the controllers its children may use.
  { echo "sched_autogroup_enabled: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
    echo "cgroup: $(cat /proc/self/cgroup)"
    echo "subtree_control: $(cat "/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/cgroup.subtree_control" 2>/dev/null)"
    echo "user: $(id -u)"; } >> "$OUT/gpu.txt"
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$python" \
    "${deps_flags[@]}" > "$OUT/configure.log" 2>&1 || { tail -50 "$OUT/configure.log"; return 1; }
  grep "cudal1:" "$OUT/configure.log"
  local targets=()
  for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build build-gpu -j "$(nproc)" "${targets[@]}" > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" -A5 "$OUT/build.log" | head -80; return 1; }
  echo "build ok"
}

step_test() {
  local select=()
  [ -n "${GPU_TESTS:-}" ] && select+=(-R "$GPU_TESTS")
  [ -n "${GPU_EXCLUDE:-}" ] && select+=(-E "$GPU_EXCLUDE")
  if [ "${UNIT:-1}" = 1 ]; then
    (cd build-gpu && ctest -L unit -j 8 > "$OUT/ctest-unit.log" 2>&1; tail -3 "$OUT/ctest-unit.log")
  fi
  (cd build-gpu && ctest -L gpu "${select[@]}" -j "${GPU_JOBS:-6}" --output-on-failure --timeout 1200 \
    > "$OUT/ctest-gpu.log" 2>&1)
  grep -E "Test +#|tests passed|FAIL" "$OUT/ctest-gpu.log" | tail -40
  cp build-gpu/redteam-cuda.json "$OUT/" 2>/dev/null || true
}

# The GPU half of the red-team corpus alone, with its table on stdout.
step_redteam() {
  local extra=()
  for a in ${REDTEAM_ARGS:-}; do extra+=("--eval-arg=$a"); done
  "$python" tests/redteam/run_redteam.py --cudal1 build-gpu/cudal1 --device cuda --jobs "${JOBS:-6}" "${extra[@]}" \
    --summary "$OUT/redteam-cuda.json" 2>&1 | tee "$OUT/redteam-cuda.log" | tail -40
}

step_bench() {
  "$python" bench/eval_bench.py --cudal1 build-gpu/cudal1 --root . --device cuda --repeats "${REPEATS:-5}" \
    --time-budget "${BUDGET:-30}" --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -30
}

step_smoke() {
  (cd build-gpu && ctest -R "cli.gpu_" -j 4 --output-on-failure --timeout 1200 > "$OUT/ctest-smoke.log" 2>&1)
  grep -E "Test +#|tests passed|FAIL" "$OUT/ctest-smoke.log" | tail -20
  "$python" bench/eval_bench.py --cudal1 build-gpu/cudal1 --root . --device cuda --repeats 1 \
    --time-budget "${BUDGET:-3}" --out "$OUT" --label smoke 2>&1 | tee "$OUT/smoke.log" | grep -E "run 1|spread"
}

step_agreement() {
  for i in $(seq "${AGREE_RUNS:-3}"); do
    build-gpu/cudal1 eval --task bench/agreement/gru_fast_task.py \
      --candidate examples/l3_gru_sequence/fast.py --device cuda --time-budget "${BUDGET:-5}" -q \
      > "$OUT/agreement-$i.json" 2> "$OUT/agreement-$i.log"
    "$python" - "$OUT/agreement-$i.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
t = v.get("timing", {})
k = t.get("kernel_ms", {}).get("candidate")
print("agreement: %s clock %s candidate %.4f ms, CUPTI kernel sum %s ms, difference %s" % (
    v["status"], t.get("mode"), v["candidate_ms"] or 0, k,
    "%+.2f%%" % (100 * (v["candidate_ms"] - k) / k) if k and v["candidate_ms"] else "-"))
PY
  done
}

step_rounds() {
  local only=""
  for e in ${EXAMPLES:-l1_gelu_tanh l2_linear_groupsum_silu l1_rms_norm l2_conv_affine_hardswish}; do
    only="$only --only $e"
  done
  "$python" bench/eval_bench.py --cudal1 build-gpu/cudal1 --root . --device cuda --repeats "${REPEATS:-5}" \
    --time-budget "${BUDGET:-6}" --out "$OUT" $only --eval-arg=--timing-rounds "--eval-arg=${ROUNDS:-3}" \
    --label "rounds${ROUNDS:-3}-${LABEL:-all}" 2>&1 | tee "$OUT/rounds.log" | tail -30
}

step_gaps() {
  OUT="$OUT" bash bench/diag/stream_gaps.sh 2>&1 | tee "$OUT/stream_gaps.log" | tail -30
}

step_hostvar() {
  bash bench/diag/host_variance.sh 2>&1 | tee "$OUT/host_variance.jsonl" | tail -20
}

step_serve() {
  local sample=.gpu-data/sample40
  "$python" bench/serve_load.py suite --cudal1 build-gpu/cudal1 --suite "${SUITE:-$sample/suite}" \
    --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" --device "${DEVICE:-cuda}" \
    --time-budget "${BUDGET:-3}" --clients "${CLIENTS:-4}" --items "${ITEMS:-16}" \
    --out "$OUT/serve-${LABEL:-1gpu}" 2>&1 | tee "$OUT/serve.log" | tail -40
}

# Issue 31: profiles of the CUDA-L1 sample's verdicts (cudal1 serve, one variant each), the
# contrastive prompts `cudal1 data rl --prompt-profile full` renders from that store, one prompt
# in full, and the no_custom_kernel flags against an earlier run's (BEFORE).
step_profile() {
  local sample=.gpu-data/sample40 work=/tmp/cudal1-profile
  rm -rf "$work"
  "$python" bench/serve_load.py suite --cudal1 build-gpu/cudal1 --suite "$sample/suite" \
    --solutions "$sample/solutions.jsonl" --device cuda --time-budget "${BUDGET:-1}" --variants 1 \
    --clients 4 --items 10 --work "$work" --out "$OUT/profile-serve" 2>&1 | tail -25
  build-gpu/cudal1 data rl --suite "$sample/suite" --db "$work/serve.db" --out "$work/prompts.jsonl" \
    --device cuda --prompt-profile full --exemplars 2 --n 1 2>&1 | tail -3
  "$python" bench/profile_prompts.py --store "$work/serve.db" --prompts "$work/prompts.jsonl" \
    --before "${BEFORE:-bench/results/2026-11-26-h200-sample40-sandbox-on.json}" \
    --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" --out "$OUT/profile"
  cp "$work/prompts.jsonl" "$OUT/profile-prompts.jsonl"
}

# Issue 16's benchmark: GPU-seconds per reward on CUDA-L1's sample, RUNS fresh runs of
# `cudal1 bench` (empty build cache each, default options unless BENCH_ARGS), and their spread.
step_reward() {
  local sample=.gpu-data/sample40 extra=() work=/tmp/cudal1-reward
  for a in ${BENCH_ARGS:-}; do extra+=("--bench-arg=$a"); done
  # The runs' directories stay outside $OUT (thousands of files); their results.jsonl come back.
  CUDAL1_DEVICE_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores" \
    "$python" bench/reward_cost.py --cudal1 build-gpu/cudal1 --suite "${SUITE:-$sample/suite}" \
    --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" --runs "${RUNS:-2}" \
    --label "${LABEL:-sample40}" --out "$work" "${extra[@]}" 2>&1 | tee "$OUT/reward.log" | tail -40
  mkdir -p "$OUT/reward"
  cp "$work"/reward-cost.* "$work"/*.log "$OUT/reward/" 2>/dev/null
  for run in "$work"/*-run[0-9]; do
    [ -f "$run/results.jsonl" ] && cp "$run/results.jsonl" "$OUT/reward/$(basename "$run").jsonl"
  done
}

# Issue 28: the sandbox on this machine. What cgroups it has, what a sandbox adds to a worker's
# start (bench/sandbox_start.cpp), the sandbox's unit tests, one GPU evaluation with the verdict's
# `sandbox`, and the red team's containment cases on the GPU.
step_sandbox() {
  {
    echo "## /proc/self/cgroup"; cat /proc/self/cgroup
    echo "## cgroup mounts"; grep cgroup /proc/self/mountinfo
    echo "## controllers"; cat /sys/fs/cgroup/cgroup.controllers 2>&1
    echo "## subtree_control"; cat /sys/fs/cgroup/cgroup.subtree_control 2>&1
    echo "## user namespaces"; cat /proc/sys/user/max_user_namespaces /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>&1
    echo "## bwrap"; command -v bwrap; bwrap --version; command -v setpriv
    echo "## nvidia"; ls -l /dev/nvidia* 2>&1; for f in /proc/driver/nvidia/gpus/*/information; do cat "$f"; done
  } > "$OUT/sandbox-machine.txt" 2>&1
  cmake --build build-gpu --target cudal1_sandbox_bench > "$OUT/sandbox-build.log" 2>&1 || tail -20 "$OUT/sandbox-build.log"
  build-gpu/cudal1_sandbox_bench examples/l1_gelu_tanh/task.py examples/l1_gelu_tanh/fast_torch.py \
    "${REPS:-20}" 8 | tee "$OUT/sandbox-start.json"
  (cd build-gpu && ./cudal1_unit_tests --gtest_filter='Sandbox*:ProcessTree*:ProcessLimits*:Cgroup*' \
    > "$OUT/sandbox-unit.log" 2>&1; tail -5 "$OUT/sandbox-unit.log")
  build-gpu/cudal1 eval --task examples/l1_gelu_tanh/task.py --candidate examples/l1_gelu_tanh/fast.py \
    --device cuda --time-budget 3 --sandbox on --keep-workdir > "$OUT/sandbox-eval.json" 2> "$OUT/sandbox-eval.log"
  tail -2 "$OUT/sandbox-eval.log"
  "$python" -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["status"], v.get("speedup"), json.dumps(v.get("sandbox")))' \
    "$OUT/sandbox-eval.json"
  "$python" tests/redteam/run_redteam.py --cudal1 build-gpu/cudal1 --device cuda --only containment \
    --summary "$OUT/redteam-containment-cuda.json" 2>&1 | tail -8
}

# Issue 33: cudal1 doctor on this machine (GPU, then CPU; the first with an empty cache, so its
# build is real), and the readable verdict on a terminal (script(1) gives eval a pseudo-terminal).
# Then issue 29's leftovers: the device-gate CLI case and the GRU example on the GPU.
step_doctor() {
  local cache=/tmp/cudal1-doctor-cache
  rm -rf "$cache"
  {
    echo "# cudal1 doctor on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "# \$ cudal1 doctor --format text --cache-dir $cache   (empty cache: the build is real)"
    build-gpu/cudal1 doctor --format text --cache-dir "$cache" 2>&1; echo "# exit $?"
    echo; echo "# \$ cudal1 doctor --device cpu --format text --cache-dir $cache"
    build-gpu/cudal1 doctor --device cpu --format text --cache-dir "$cache" 2>&1; echo "# exit $?"
  } > "$OUT/doctor-gpu.txt"
  cat "$OUT/doctor-gpu.txt"
  build-gpu/cudal1 doctor --format json --cache-dir "$cache" > "$OUT/doctor-gpu.json" 2>/dev/null
  script -qec "build-gpu/cudal1 eval --task examples/l1_gelu_tanh/task.py --candidate examples/l1_gelu_tanh/fast.py --device cuda --time-budget 3 -q" \
    "$OUT/eval-terminal.txt" > /dev/null 2>&1
  cat "$OUT/eval-terminal.txt"
  "$python" tests/cli/run_case.py tests/cli/cases/gpu_device_gate.json --cudal1 build-gpu/cudal1 --root . \
    > "$OUT/gate-case.log" 2>&1; echo "gpu_device_gate: exit $?"; tail -5 "$OUT/gate-case.log"
  timeout 300 "$python" tests/cli/run_examples.py l3_gru_sequence --cudal1 build-gpu/cudal1 --root . --device cuda \
    > "$OUT/gru-example.log" 2>&1; echo "examples.cuda.l3_gru_sequence: exit $?"; tail -8 "$OUT/gru-example.log"
}

# Issue 32: workers forked from a warm zygote against workers started one by one.
step_warm() {
  local sample=.gpu-data/sample40 extra=() work=/tmp/cudal1-warm
  for a in ${BENCH_ARGS:-}; do extra+=("--bench-arg=$a"); done
  CUDAL1_DEVICE_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores" \
    "$python" bench/warm_workers.py --cudal1 build-gpu/cudal1 --suite "${SUITE:-$sample/suite}" \
    --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" --runs "${RUNS:-1}" --out "$work" "${extra[@]}" \
    2>&1 | tee "$OUT/warm.log" | tail -20
  cp "$work"/warm-workers.* "$OUT/" 2>/dev/null
}

# BEFORE_SRC: the source of earlier code (e.g. `git archive <commit> | tar -x -C .gpu-before`,
# carried): built into build-before/ and measured instead, as LABEL, CODE naming its commit; run
# it and today's code on the same warm machine for a before/after pair.
step_rlload() {
  local sample=.gpu-data/sample40 extra=() cudal1=build-gpu/cudal1
  for a in ${SERVE_ARGS:-}; do extra+=("--serve-arg=$a"); done
  for a in ${WORKER_ARGS:-}; do extra+=("--worker-arg=$a"); done  # every queue worker's (QUEUE_WORKERS)
  # Two hosts on one machine: HOST_CPUS=0-15 for the server (and, with BUILD_HOST_CPUS=16-31, its
  # GPU worker, whose builds a build worker makes on those cores; DEVICE=cuda:0 for one GPU).
  [ -n "${HOST_CPUS:-}" ] && extra+=("--host-cpus=$HOST_CPUS")
  [ -n "${BUILD_HOST_CPUS:-}" ] && extra+=("--build-host-cpus=$BUILD_HOST_CPUS"
                                          "--redis-server=/opt/cudal1-deps/usr/bin/redis-server")
  [ -n "${WORKER_JOBS:-}" ] && extra+=("--worker-jobs=$WORKER_JOBS")
  # One `cudal1 worker` per GPU through Redis, each on cores of its own: "cuda:0@0-15;cuda:1@16-31".
  [ -n "${QUEUE_WORKERS:-}" ] && extra+=("--queue-workers=$QUEUE_WORKERS"
                                        "--redis-server=/opt/cudal1-deps/usr/bin/redis-server")
  if [ -n "${BEFORE_SRC:-}" ]; then
    cmake -S "$BEFORE_SRC" -B build-before -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPython3_EXECUTABLE="$python" "${deps_flags[@]}" > "$OUT/configure-before.log" 2>&1 &&
      cmake --build build-before -j "$(nproc)" --target cudal1_cli cudal1-worker \
        > "$OUT/build-before.log" 2>&1 || { tail -30 "$OUT/build-before.log"; return 1; }
    cudal1=build-before/cudal1
  fi
  rm -rf build-gpu/cache /tmp/cudal1-zygote-* 2>/dev/null  # cold: no build, bandwidth or zygote
  "$python" bench/rl_load.py --cudal1 "$cudal1" --suite "${SUITE:-$sample/suite}" \
    --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" --device "${DEVICE:-cuda}" --gpus "${GPUS:-1}" \
    --label "${LABEL:-today}" --stop-after "${STOP_AFTER:-420}" --drain "${DRAIN:-120}" \
    --check-eval "${CHECK_EVAL:-0}" --steps "${STEPS:-0}" --clients "${CLIENTS:-2}" \
    --code "${CODE:-}" --out "$OUT/rl-load" "${extra[@]}" 2>&1 | tail -45
  rm -rf "$OUT"/rl-load/*-work
}

# Issue 32: what a CUDA context costs under load, and ready workers on CUDA (containment, latency).
step_ready() {
  local sample=.gpu-data/sample40 ready=${READY:-8}
  if [ "${CONTEXT_DIAG:-1}" = 1 ]; then
    timeout 200 "$python" bench/diag/context_under_load.py > "$OUT/context-under-load.jsonl" 2>&1
    cat "$OUT/context-under-load.jsonl"
  fi
  timeout "${REDTEAM_TIMEOUT:-400}" "$python" tests/redteam/run_redteam.py \
    --cudal1 build-gpu/cudal1 --device cuda --jobs 4 --only "${REDTEAM_ONLY:-}" \
    --eval-arg=--ready-workers "--eval-arg=$ready" \
    --summary "$OUT/redteam-cuda-ready-workers.json" 2>&1 | tail -24
  timeout "${LATENCY_TIMEOUT:-240}" "$python" bench/ready_latency.py --cudal1 build-gpu/cudal1 \
    --suite "${SUITE:-$sample/suite}" --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" \
    --limit "${LIMIT:-4}" --ready "$ready" --out "$OUT/ready-latency" 2>&1 | tail -20
}

# Issue 32: kept references against none, one rlload run each on the same build and machine.
step_keep() {
  local label=${LABEL:-today} args=${SERVE_ARGS:-} status=0
  for keep in on off; do
    STOP_AFTER=${STOP_AFTER:-120} DRAIN=${DRAIN:-45} LABEL="$label-keep-$keep" \
      SERVE_ARGS="$args --keep-references $keep" step_rlload || status=1
  done
  return $status
}

# Issue 32: serve's start orders side by side, at the same time on a machine of two GPUs (the
# same load on each, so both see what the other does to the host): --start-order by-task on
# cuda:0 with the first half of the cores, arrival on cuda:1 with the second half, each with a
# cold build cache of its own. STOP_AFTER (default 300 s), DRAIN (45 s).
step_order() {
  local sample=.gpu-data/sample40 half=$(( $(nproc) / 2 )) pids=() status=0 k=0
  rm -rf /tmp/cudal1-zygote-* 2>/dev/null
  for order in by-task arrival; do
    local cpus="$(( k * half ))-$(( (k + 1) * half - 1 ))"
    rm -rf "build-gpu/cache-$order"
    CUDAL1_CACHE_DIR="$PWD/build-gpu/cache-$order" "$python" bench/rl_load.py --cudal1 build-gpu/cudal1 \
      --suite "${SUITE:-$sample/suite}" --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" \
      --device "cuda:$k" --host-cpus "$cpus" --label "${LABEL:-today}-$order" \
      --stop-after "${STOP_AFTER:-300}" --drain "${DRAIN:-45}" --code "${CODE:-}" \
      --serve-arg=--start-order "--serve-arg=$order" ${SERVE_ARGS:+$(printf -- '--serve-arg=%s ' $SERVE_ARGS)} \
      --out "$OUT/rl-load" > "$OUT/order-$order.log" 2>&1 &
    pids+=($!)
    k=$(( k + 1 ))
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  tail -4 "$OUT"/order-*.log
  rm -rf "$OUT"/rl-load/*-work
  return $status
}

# Issue 32: configurations of serve side by side on the same items: for each entry of CONFIGS
# (serve options; entries separated by ';', e.g. "--max-in-flight 16;--rerun-target 0.06"; an
# empty entry is the defaults), an rlload run of the first STEPS steps (default 1) to the end,
# cold caches each; the JSONs are LABEL-1, LABEL-2, ... and their overall rates compare.
step_configs() {
  local label=${LABEL:-today} status=0 k=0 config
  IFS=';' read -r -a configs <<< "${CONFIGS:-}"
  for config in "${configs[@]}"; do
    k=$(( k + 1 ))
    echo "== $label-$k: serve ${config:-(defaults)}"
    STEPS=${STEPS:-1} LABEL="$label-$k" SERVE_ARGS="$config" rlload_to_the_end || status=1
  done
  return $status
}

# step_rlload over the first STEPS steps to the end (no --stop-after), with its JSON's summary.
rlload_to_the_end() {
  STOP_AFTER=0 DRAIN=${DRAIN:-30} step_rlload 2>&1 |
    grep -E '"(serve_args|complete|verdicts|rewards_per_gpu_hour_overall|contexts_per_verdict|from_kept_references|context_s_per_own_load|wall_s)"'
}

# Issue 32: GPUs that add up. On a machine of G GPUs and C cores, the same STEPS (2) GRPO steps to
# the end: `one` (cudal1 serve on cuda:0 and C/G cores), `all` (cudal1 serve --device cuda on all
# of them) and `queue` (one cudal1 worker per GPU through Redis, C/G cores each); RUNS picks.
# LOAD_PER_GPU=1: `all` and `queue` get G times the steps and the clients (CLIENTS, default 2) of
# `one`, the same load per GPU; otherwise every run gets the same load.
step_scaling() {
  local label=${LABEL:-today} gpus cores share status=0 run workers="" k
  gpus=$(nvidia-smi -L | wc -l); cores=$(nproc); share=$(( cores / gpus ))
  local steps=${STEPS:-2} clients=${CLIENTS:-2} times=1 suffix=""  # times: load of all GPUs / one's
  [ "${LOAD_PER_GPU:-0}" = 1 ] && times=$gpus suffix="-per-gpu"
  for (( k = 0; k < gpus; k++ )); do
    workers+="${workers:+;}cuda:$k@$(( k * share ))-$(( (k + 1) * share - 1 ))"
  done
  for run in ${RUNS:-one all queue}; do
    echo "== $label-$run ($gpus GPUs, $cores cores)"
    case $run in
      one) DEVICE=cuda:0 GPUS=1 HOST_CPUS="0-$(( share - 1 ))" LABEL="$label-one" STEPS=$steps \
             CLIENTS=$clients rlload_to_the_end || status=1 ;;
      all) DEVICE=cuda GPUS=$gpus LABEL="$label-all$gpus$suffix" STEPS=$(( steps * times )) \
             CLIENTS=$(( clients * times )) rlload_to_the_end || status=1 ;;
      queue) DEVICE=cuda GPUS=$gpus QUEUE_WORKERS="$workers" LABEL="$label-queue$gpus$suffix" \
               STEPS=$(( steps * times )) CLIENTS=$(( clients * times )) rlload_to_the_end || status=1 ;;
      *) echo "unknown run '$run' (one, all, queue)" >&2; return 2 ;;
    esac
  done
  return $status
}

# Issue 32: CPU seconds per load_inline build without and with the precompiled header.
step_buildcpu() {
  local sample=.gpu-data/sample40
  "$python" bench/build_cpu.py --cudal1 build-gpu/cudal1 --suite "${SUITE:-$sample/suite}" \
    --solutions "${SOLUTIONS:-$sample/solutions.jsonl}" --device cuda --jobs "${JOBS:-4}" \
    --configs "${CONFIGS:-off,on}" --label "${LABEL:-pch}" --code "${CODE:-}" --out "$OUT" \
    2>&1 | tee "$OUT/build-cpu.log" | tail -45
}

step_throughput() {
  bench/bench_throughput.sh --cudal1 build-gpu/cudal1 ${THROUGHPUT_ARGS:-} 2>&1 | tee "$OUT/throughput.log" | tail -30
}

case "${1:-all}" in
  build) step_build ;;
  test) step_build && step_test ;;
  redteam) step_build && step_redteam ;;
  bench) step_build && step_bench ;;
  smoke) step_build && step_smoke ;;
  agreement) step_build && step_agreement ;;
  throughput) step_build && step_throughput ;;
  warm) step_build && step_warm ;;
  serve) step_build && step_serve ;;
  rlload) step_build && step_rlload ;;
  keep) step_build && step_keep ;;
  order) step_build && step_order ;;
  configs) step_build && step_configs ;;
  scaling) step_build && step_scaling ;;
  buildcpu) step_build && step_buildcpu ;;
  ready) step_build && step_ready ;;
  remotebuilds) step_build && bench/queue_remote_builds.sh 2>&1 | tail -60 ;;
  profile) step_build && step_profile ;;
  reward) step_build && step_reward ;;
  gaps) step_gaps ;;
  hostvar) step_hostvar ;;
  knobs) OUT="$OUT" bash bench/diag/context_knobs.sh ;;
  rounds) step_build && step_rounds ;;
  sandbox) step_build && step_sandbox ;;
  doctor) step_build && step_doctor ;;
  all) step_build && step_bench && step_test ;;
  *) echo "unknown step '$1' (see the top of $0)" >&2; exit 2 ;;
esac
status=$?
# PACK=1: everything under $OUT as one archive (a device run may bring back only a few files).
if [ "${PACK:-0}" = 1 ]; then
  tar czf /tmp/cudal1-session.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/cudal1-session.tgz "$OUT/"
fi
exit $status
