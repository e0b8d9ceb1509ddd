"""What a run reports: one JSON line per step in OUT/metrics.jsonl (and, for GRPO, one line per
completion in OUT/rollouts.jsonl) and a progress line per step on stderr."""

import json
import math
import os
import sys
import time


def truncate_after(path, step):
    """Drops the lines of a JSONL log whose "step" is past `step`: what a killed run wrote after
    the checkpoint it resumes from, and will write again."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = f.readlines()
    kept = []
    for line in lines:
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except ValueError:
            continue  # a line cut short by the kill
    with open(path + ".partial", "w") as f:
        f.writelines(kept)
    os.replace(path + ".partial", path)


class JsonlLog:
    def __init__(self, path, resume_step=None):
        if resume_step is None:
            open(path, "w").close()
        else:
            truncate_after(path, resume_step)
        self.file = open(path, "a")

    def write(self, record):
        self.file.write(json.dumps(record, default=_plain) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _number(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """`sft step 3/100 loss 1.23 ... 1.9 s/step eta 3m07s` on stderr, one line per step."""

    def __init__(self, stage, total, first_step, stream=None):
        self.stage, self.total, self.first = stage, total, first_step
        self.stream = stream or sys.stderr
        self.started = time.time()

    def line(self, step, fields):
        done = step - self.first
        per_step = (time.time() - self.started) / max(done, 1)
        parts = [f"{self.stage} step {step}/{self.total}"]
        parts += [f"{name} {_number(value)}" for name, value in fields]
        parts.append(f"{per_step:.1f} s/step eta {duration(per_step * (self.total - step))}")
        print(" ".join(parts), file=self.stream, flush=True)
