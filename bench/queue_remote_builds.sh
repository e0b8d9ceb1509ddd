#!/usr/bin/env bash
# Builds on a build worker (issue 32, "builds where the CPUs are"), on a one-GPU machine:
# `cudal1 worker --role build` (its sandbox sees no GPU, as on a CPU host) makes the builds of
# the CUDA-L1 sample's load_inline candidates for `cudal1 worker --device cuda --builds queue`,
# through `cudal1 bench --queue`; then the same bench on the local engine with a fresh cache.
# Statuses must agree, and the evaluating worker must load every remote build without compiling
# (build.rebuilt_on_load empty). Writes $OUT/queue-remote-builds.json. Needs build-gpu/cudal1
# built with the queue (bench/gpu_session.sh build, carrying .gpu-deps) and the sample in SAMPLE.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cudal1-out}
SAMPLE=${SAMPLE:-.gpu-data/sample40}
BUDGET=${BUDGET:-1}
PORT=${PORT:-6392}
PREFIX=${DEBS_PREFIX:-/opt/cudal1-deps}
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDAL1_BUILD_SECRET=${CUDAL1_BUILD_SECRET:-$(head -c 24 /dev/urandom | base64)}
pkill -f "cudal1 worker --queue redis://127.0.0.1:$PORT" 2>/dev/null
pkill -f "redis-server 127.0.0.1:$PORT" 2>/dev/null
sleep 1
work=/tmp/cudal1-remote-builds && rm -rf "$work" && mkdir -p "$work/suite"
# The sample's tasks whose solution builds an extension (load_inline), and only those.
python3 - "$SAMPLE" "$work" <<'PY'
import json, os, shutil, sys
sample, work = sys.argv[1:]
kept = []
with open(os.path.join(sample, "solutions.jsonl")) as lines:
    for line in lines:
        entry = json.loads(line)
        if "load_inline" in (entry.get("custom_code") or ""):
            kept.append(entry)
with open(os.path.join(work, "solutions.jsonl"), "w") as out:
    for entry in kept:
        out.write(json.dumps(entry) + "\n")
for level in os.listdir(os.path.join(sample, "suite")):
    source = os.path.join(sample, "suite", level)
    for name in os.listdir(source):
        task_id = int(name.split("_", 1)[0])
        if any(e["task_id"] == task_id and "level%d" % e["level_id"] == level for e in kept):
            os.makedirs(os.path.join(work, "suite", level), exist_ok=True)
            shutil.copy(os.path.join(source, name), os.path.join(work, "suite", level, name))
print("%d load_inline candidates" % len(kept))
PY
"$PREFIX/usr/bin/redis-server" --port "$PORT" --bind 127.0.0.1 --dir "$work" --save "" \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log" || exit 1
sleep 1
url="redis://127.0.0.1:$PORT"
build-gpu/cudal1 worker --queue "$url" --role build --name builder --jobs "$(nproc)" \
  --cache-dir "$work/builder-cache" > "$work/builder.log" 2>&1 &
builder=$!
build-gpu/cudal1 worker --queue "$url" --device cuda --builds queue --sandbox on --name gpu0 \
  --cache-dir "$work/worker-cache" > "$work/worker.log" 2>&1 &
worker=$!
trap 'kill "$worker" "$builder" 2>/dev/null; kill "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null' EXIT
common=(--suite "$work/suite" --solutions "$work/solutions.jsonl" --device cuda
        --time-budget "$BUDGET" -q)
start=$SECONDS
timeout "${RUN_S:-240}" build-gpu/cudal1 bench "${common[@]}" --queue "$url" --out "$work/queue" > "$work/queue.log" 2>&1
queue_rc=$?
queue_s=$(( SECONDS - start ))
build-gpu/cudal1 queue status --queue "$url" > "$OUT/remote-builds-status.txt" 2>&1
kill "$worker" "$builder"; wait "$worker" "$builder" 2>/dev/null
start=$SECONDS
timeout "${RUN_S:-240}" build-gpu/cudal1 bench "${common[@]}" --cache-dir "$work/local-cache" --out "$work/local" \
  > "$work/local.log" 2>&1
local_rc=$?
local_s=$(( SECONDS - start ))
cp "$work/builder.log" "$work/worker.log" "$work/queue.log" "$work/local.log" "$OUT/" 2>/dev/null
python3 - "$work" "$queue_rc" "$queue_s" "$local_rc" "$local_s" "$OUT/queue-remote-builds.json" <<'PY'
import datetime, json, os, subprocess, sys
work, qrc, qs, lrc, ls, out = sys.argv[1:]
def lines(run):
    path = os.path.join(work, run, "results.jsonl")
    if not os.path.exists(path):
        return {}
    result = {}
    for line in open(path):
        entry = json.loads(line)
        result["level%d/%s" % (entry["level"], entry["task_name"])] = entry
    return result
queue, local = lines("queue"), lines("local")
tasks = {}
for key in sorted(set(queue) | set(local)):
    q, l = queue.get(key, {}), local.get(key, {})
    build = (q.get("verdict") or {}).get("build") or {}
    remote = build.get("remote") or {}
    local_phases = (l.get("verdict") or {}).get("phases") or {}
    tasks[key] = {"queue_status": q.get("status"), "local_status": l.get("status"),
                  "remote_worker": remote.get("worker"), "remote_bytes": remote.get("bytes"),
                  "remote_wall_s": remote.get("wall_s"),
                  "builder_cpu_s": remote.get("cpu_s"),
                  "local_build_cpu_s": local_phases.get("build_cpu_s"),
                  "rebuilt_on_load": build.get("rebuilt_on_load"),
                  "queue_build_cpu_s_on_gpu_host": ((q.get("verdict") or {}).get("phases") or {}).get("build_cpu_s")}
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
report = {"date": datetime.date.today().isoformat(), "device": gpu, "cores": os.cpu_count(),
          "code": os.environ.get("CODE", ""),
          "queue_exit": int(qrc), "local_exit": int(lrc), "queue_wall_s": float(qs), "local_wall_s": float(ls),
          "tasks": tasks,
          "statuses_equal": all(t["queue_status"] == t["local_status"] for t in tasks.values()),
          "built_remotely": sum(1 for t in tasks.values() if t["remote_worker"]),
          "rebuilt_on_load": sum(1 for t in tasks.values() if t["rebuilt_on_load"])}
json.dump(report, open(out, "w"), indent=1)
print(json.dumps(report, indent=1))
PY
