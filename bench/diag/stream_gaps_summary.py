"""Summary of stream_gaps.sh's JSON lines: per task and queue, the spread (max-min)/median
between processes of the reference's and candidate's median times and of their ratio."""
import json
import sys
from collections import defaultdict
from statistics import median

rows = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    try:
        entry = json.loads(line)
    except ValueError:
        continue
    for queue, sides in entry["r"].items():
        if isinstance(sides, dict):
            rows[entry["task"]][queue].append(sides)


def spread(values):
    return 100.0 * (max(values) - min(values)) / median(values) if values else float("nan")


for task, queues in rows.items():
    print(task)
    for queue, runs in sorted(queues.items()):
        ref = [r["reference"] for r in runs if "reference" in r]
        cand = [r["candidate"] for r in runs if "candidate" in r]
        ratio = [r["reference"] / r["candidate"] for r in runs if "reference" in r and "candidate" in r]
        print("  %-12s ref %.5f ms spread %5.2f %% | cand %.5f ms spread %5.2f %% | speedup %.3f spread %5.2f %%"
              % (queue, median(ref), spread(ref), median(cand) if cand else 0, spread(cand),
                 median(ratio) if ratio else 0, spread(ratio)))
