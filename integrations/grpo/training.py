"""What the SFT and GRPO loops share: the optimizer and its learning-rate schedule, starting or
resuming a run in OUT, checkpoints every K steps and at the end, metrics and progress."""

import json
import os
import random
import sys
import time
import uuid
from dataclasses import asdict, dataclass

import torch

from . import checkpoint
from .run_log import JsonlLog, Progress


@dataclass
class RunSettings:
    out: str
    steps: int
    lr: float = 1e-5
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch_size: int = 1
    save_every: int = 50
    keep_checkpoints: int = 3
    seed: int = 0
    resume: bool = False


class RunError(RuntimeError):
    """A run that cannot start as asked (the message says what to do)."""


class Run:
    """One stage's run in settings.out. A fresh run seeds the RNGs from settings.seed; a
    resumed one restores adapter, optimizer and RNG states from the latest checkpoint and
    continues at its step (`start_step`, the number of steps already done)."""

    def __init__(self, stage, policy, settings, stage_settings=None):
        self.stage, self.policy, self.settings = stage, policy, settings
        os.makedirs(settings.out, exist_ok=True)
        params = policy.trainable_parameters()
        if not params:
            raise RunError("the model has no trainable parameters (no LoRA adapter?)")
        self.optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
        found = checkpoint.latest(settings.out)
        if settings.resume and found is None:
            raise RunError(f"--resume: {settings.out} holds no checkpoint to resume from")
        if found is not None and not settings.resume:
            raise RunError(f"{settings.out} already holds a run (checkpoint {found}): pass --resume to continue it, "
                           f"or choose another --out")
        if found is not None:
            state = checkpoint.load(found, policy, self.optimizer, stage)
            self.start_step, self.run_id = state["step"], state["run_id"]
            print(f"{stage}: resuming from {found} (step {self.start_step})", file=sys.stderr, flush=True)
        else:
            self.start_step, self.run_id = 0, uuid.uuid4().hex[:12]
            random.seed(settings.seed)
            torch.manual_seed(settings.seed)
        self._record_session(stage_settings or {}, found)
        resumed_at = self.start_step if found is not None else None
        self.metrics = JsonlLog(os.path.join(settings.out, "metrics.jsonl"), resumed_at)
        self.progress = Progress(stage, settings.steps, self.start_step)
        self.resumed_at = resumed_at
        self.last_checkpoint = found

    def _record_session(self, stage_settings, found):
        path = os.path.join(self.settings.out, "run.json")
        record = {"run_id": self.run_id, "stage": self.stage, "model": self.policy.describe(), "sessions": []}
        if found is not None and os.path.exists(path):
            with open(path) as f:
                record = json.load(f)
        record["sessions"].append({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_step": self.start_step,
                                   "argv": sys.argv, "settings": dict(asdict(self.settings), **stage_settings)})
        with open(path + ".partial", "w") as f:
            json.dump(record, f, indent=1, default=str)
        os.replace(path + ".partial", path)

    def steps(self):
        """The 0-based indices of the steps left to do."""
        return range(self.start_step, self.settings.steps)

    def lr_at(self, step):
        """Linear warm-up over warmup_steps, then constant (a function of the step alone)."""
        warmup = self.settings.warmup_steps
        return self.settings.lr * min(1.0, (step + 1) / warmup) if warmup > 0 else self.settings.lr

    def apply_gradients(self, step):
        """Clips the accumulated gradients and takes one optimizer step; returns (grad norm, lr)."""
        lr = self.lr_at(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        params = self.policy.trainable_parameters()
        if self.settings.max_grad_norm and self.settings.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.settings.max_grad_norm)
        else:
            norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in params if p.grad is not None))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm), lr

    def finish_step(self, done, metrics, progress_fields):
        """Logs the step (`done` steps are now complete) and checkpoints every save_every steps
        and after the last."""
        metrics = dict({"step": done, "stage": self.stage, "time": round(time.time(), 3)}, **metrics)
        self.metrics.write(metrics)
        self.progress.line(done, progress_fields)
        every = self.settings.save_every
        if done == self.settings.steps or (every > 0 and done % every == 0):
            self.last_checkpoint = checkpoint.save(self.settings.out, done, self.policy, self.optimizer, self.stage,
                                                   self.run_id, metrics, self.settings.keep_checkpoints)

    def close(self):
        self.metrics.close()


def sync(device):
    """Waits for the GPU so that timings measure the work, not its queueing."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()

