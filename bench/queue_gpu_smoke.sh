#!/usr/bin/env bash
# The Redis queue on a one-GPU machine: `cudal1 bench --queue` with one `cudal1 worker` on the GPU,
# then the same bench on the local engine, over the first LIMIT tasks of the CUDA-L1 sample; the
# two runs' statuses must agree. Writes $OUT/queue-gpu-smoke.json. Needs build-gpu/cudal1 built
# with the queue (bench/gpu_session.sh build, carrying .gpu-deps) and the sample in SAMPLE.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cudal1-out}
SAMPLE=${SAMPLE:-.gpu-data/sample40}
LIMIT=${LIMIT:-10}
BUDGET=${BUDGET:-3}
PORT=${PORT:-6391}
PREFIX=${DEBS_PREFIX:-/opt/cudal1-deps}
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Nothing of an earlier attempt may take part: its Redis (with its results) or its worker.
pkill -f "cudal1 worker --queue redis://127.0.0.1:$PORT" 2>/dev/null
pkill -f "redis-server 127.0.0.1:$PORT" 2>/dev/null
sleep 1
work=/tmp/cudal1-queue-gpu && rm -rf "$work" && mkdir -p "$work"
"$PREFIX/usr/bin/redis-server" --port "$PORT" --bind 127.0.0.1 --dir "$work" --save "" \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log" || exit 1
sleep 1
build-gpu/cudal1 worker --queue "redis://127.0.0.1:$PORT" --device cuda --name gpu0 \
  --cache-dir "$work/worker-cache" > "$work/worker.log" 2>&1 &
worker=$!
# The worker and Redis stop with the script, however it ends.
trap 'kill "$worker" 2>/dev/null; kill "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null' EXIT
common=(--suite "$SAMPLE/suite" --solutions "$SAMPLE/solutions.jsonl" --device cuda
        --time-budget "$BUDGET" --limit "$LIMIT" -q)
start=$SECONDS
build-gpu/cudal1 bench "${common[@]}" --queue "redis://127.0.0.1:$PORT" --out "$work/queue" > "$work/queue.log" 2>&1
queue_rc=$?
queue_s=$(( SECONDS - start ))
build-gpu/cudal1 queue status --queue "redis://127.0.0.1:$PORT" > "$OUT/queue-status.txt" 2>&1
kill "$worker"; wait "$worker" 2>/dev/null
start=$SECONDS
build-gpu/cudal1 bench "${common[@]}" --cache-dir "$work/local-cache" --out "$work/local" > "$work/local.log" 2>&1
local_rc=$?
local_s=$(( SECONDS - start ))
cp "$work/worker.log" "$work/queue.log" "$work/local.log" "$OUT/" 2>/dev/null
cp "$work/queue/summary.json" "$OUT/queue-summary.json" 2>/dev/null
cp "$work/local/summary.json" "$OUT/local-summary.json" 2>/dev/null
build-gpu/cudal1 bench compare "$work/queue" "$work/local" --json "$OUT/compare.json" > "$OUT/compare.txt" 2>&1
python3 - "$OUT/compare.json" "$queue_rc" "$queue_s" "$local_rc" "$local_s" "$OUT/queue-gpu-smoke.json" <<'PY'
import json, sys, datetime
compare, qrc, qs, lrc, ls, out = sys.argv[1:]
c = json.load(open(compare))
agg = c["aggregate"]
report = {"date": datetime.date.today().isoformat(), "queue_exit": int(qrc), "local_exit": int(lrc),
          "queue_wall_s": round(float(qs), 1), "local_wall_s": round(float(ls), 1),
          "tasks_in_both": agg["tasks_in_both"], "ok_in_both": agg["ok_in_both"],
          "only_in_queue_run": c["only_in_a"], "only_in_local_run": c["only_in_b"],
          "status_changed": agg["status_changed"],
          "geomean_speedup_ratio_queue_over_local": agg["geomean_speedup_ratio"]}
json.dump(report, open(out, "w"), indent=1)
print(json.dumps(report, indent=1))
PY
