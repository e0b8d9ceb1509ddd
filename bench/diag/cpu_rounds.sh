# Repeatability with and without --timing-rounds on the CPU: RUNS fresh `cudal1 eval` processes
# per pair and setting; verdicts under $OUT, one summary line per setting on stdout.
#   bash bench/diag/cpu_rounds.sh [build/cudal1]
set -u
cudal1=${1:-build/cudal1}
OUT=${OUT:-/tmp/cudal1-cpu-rounds}
mkdir -p "$OUT"
for pair in "tests/fixtures/tasks/scale_relu.py tests/fixtures/candidates/fast.py" \
            "examples/l1_rms_norm/task.py examples/l1_rms_norm/fast_torch.py"; do
  set -- $pair
  for rounds in 1 3; do
    name=$(basename "$(dirname "$1")")-$(basename "$2" .py)-r$rounds
    for i in $(seq "${RUNS:-6}"); do
      "$cudal1" eval --task "$1" --candidate "$2" --device cpu --time-budget "${BUDGET:-6}" --trials 2 -q \
        --review-llm none --timing-rounds "$rounds" > "$OUT/$name-$i.json" 2>/dev/null
    done
    python3 - "$OUT" "$name" <<'PY'
import glob, json, statistics, sys
verdicts = [json.load(open(f)) for f in sorted(glob.glob("%s/%s-*.json" % (sys.argv[1], sys.argv[2])))]
speedups = [v["speedup"] for v in verdicts]
print("%s: %s | spread %.1f %% | wall median %.1f s | pairs median %d" % (
    sys.argv[2], " ".join("%.3f" % s for s in speedups),
    100 * (max(speedups) - min(speedups)) / statistics.median(speedups),
    statistics.median(v["phases"]["total_s"] for v in verdicts), statistics.median(v["samples"] for v in verdicts)))
PY
  done
done
