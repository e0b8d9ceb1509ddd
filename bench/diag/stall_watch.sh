#!/usr/bin/env bash
# Runs a command under a time limit and, while it runs, snapshots every cudal1 process and thread
# (state, kernel wait channel, CPU) every INTERVAL seconds from AFTER on, into $OUT/stall/;
# at the end (or the limit) backtraces of the cudal1 processes where gdb exists, and the logs of
# any rl-load work folder, packed into $OUT/stall/work.tgz.
#   bench/diag/stall_watch.sh LIMIT_S AFTER_S INTERVAL_S -- command ...
set -uo pipefail
limit=$1 after=$2 interval=$3; shift 4
OUT=${OUT:-/tmp/cudal1-out}; dir="$OUT/stall"; mkdir -p "$dir"
snapshot() {
  { echo "== $(date -u +%T)"
    ps -eLo pid,tid,ppid,stat,etimes,pcpu,wchan:32,comm,args --sort=pid |
      grep -E "cudal1|python|redis|nvcc|cc1plus" | grep -v grep | cut -c1-220; } >> "$dir/ps.txt"
}
timeout "$limit" "$@" & main=$!
start=$(date +%s)
backtraces() {
  command -v gdb >/dev/null || { echo "no gdb" > "$dir/bt-none.txt"; return; }
  for pid in $(pgrep -f "cudal1 (worker|serve)"); do
    timeout 20 gdb -p "$pid" -batch -ex "thread apply all bt 12" > "$dir/bt-$pid.txt" 2>&1
  done
}
traced=0
while kill -0 "$main" 2>/dev/null; do
  sleep 5
  now=$(( $(date +%s) - start ))
  if (( now >= after && (now - after) % interval < 5 )); then snapshot; fi
  # Backtraces a minute before the limit, while the processes still live.
  if (( traced == 0 && now >= limit - 60 )); then traced=1; backtraces; fi
done
wait "$main"; rc=$?
snapshot
( cd "$OUT" && find . -path "*-work/*" \( -name "*.log" -o -name "serve.db*" \) -size -50M -print0 |
    tar --null -czf "$dir/work.tgz" -T - ) 2>/dev/null
rm -rf "$OUT"/rl-load/*-work
exit $rc
