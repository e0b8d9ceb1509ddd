#!/usr/bin/env python3
"""SFT with the tiny pure-PyTorch model: the loss falls on a fixed batch, only the reply is
trained, a resumed run ends exactly where an uninterrupted one does, and the command line
writes its progress, metrics and checkpoints."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from integrations.grpo import checkpoint, datasets, sft, tiny  # noqa: E402
from integrations.grpo.training import RunError, RunSettings  # noqa: E402


def write_sft_file(path, count=6):
    """`cudal1 data sft`-shaped records: a contrastive-style prompt and a reply with code."""
    with open(path, "w") as f:
        for i in range(count):
            messages = [{"role": "system", "content": "You write faster PyTorch."},
                        {"role": "user", "content": f"Task {i}: y = relu(x * {i} + 1). Reference 1.00x."},
                        {"role": "assistant", "content": f"## Code\n```python\nreturn torch.relu(x * {i} + 1)\n```"}]
            f.write(json.dumps({"messages": messages, "task": f"level1/{i}_T", "candidate_id": i, "stage": "sft",
                                "speedup": 1.0 + i / 10, "verdict": {"status": "ok"}}) + "\n")
    return path


def jsonl(path):
    return [record for _, record in datasets.read_jsonl(path)]


def settings(out, steps, **kw):
    return RunSettings(out=out, steps=steps, lr=kw.pop("lr", 2e-2), save_every=kw.pop("save_every", 2),
                       micro_batch_size=kw.pop("micro_batch_size", 2), **kw)


class TinySft(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trainer-sft-")
        self.data = write_sft_file(os.path.join(self.dir, "sft.jsonl"))

    def examples(self, policy):
        return datasets.sft_examples([self.data], policy.tokenizer)[0]

    def test_loss_falls_on_a_fixed_batch(self):
        policy = tiny.TinyPolicy(seed=0, lora_rank=8, lora_alpha=16)
        fixed = self.examples(policy)[:3]
        first = None
        for step in range(25):
            policy.model.zero_grad()
            loss, reply_tokens, _ = sft.batch_loss(policy, fixed, micro_batch_size=2)
            self.assertTrue(torch.isfinite(torch.tensor(loss)))
            first = loss if first is None else first
            with torch.no_grad():
                for p in policy.trainable_parameters():
                    p -= 0.5 * p.grad
        self.assertLess(loss, 0.8 * first, f"loss {first} -> {loss}")
        # Only reply tokens count (each reply ends with its eos).
        self.assertEqual(reply_tokens, sum(len(e.reply_ids) for e in fixed))

    def test_resumed_run_ends_where_an_uninterrupted_one_does(self):
        straight = tiny.TinyPolicy(seed=0)
        sft.train_sft(straight, self.examples(straight), settings(os.path.join(self.dir, "a"), 4), batch_size=3)

        out = os.path.join(self.dir, "b")
        first = tiny.TinyPolicy(seed=0)
        sft.train_sft(first, self.examples(first), settings(out, 2), batch_size=3)
        self.assertTrue(checkpoint.latest(out).endswith("step-00000002"))
        with self.assertRaises(RunError):  # an existing run is never overwritten silently
            sft.train_sft(first, self.examples(first), settings(out, 4), batch_size=3)
        resumed = tiny.TinyPolicy(seed=0)
        run = sft.train_sft(resumed, self.examples(resumed), settings(out, 4, resume=True), batch_size=3)
        self.assertEqual(run.start_step, 2)

        a, b = straight.trainable_state(), resumed.trainable_state()
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), f"{name} differs after resume")
        steps = [m["step"] for m in jsonl(os.path.join(out, "metrics.jsonl"))]
        self.assertEqual(steps, [1, 2, 3, 4])
        losses_a = [m["loss"] for m in jsonl(os.path.join(self.dir, "a", "metrics.jsonl"))]
        losses_b = [m["loss"] for m in jsonl(os.path.join(out, "metrics.jsonl"))]
        self.assertEqual(losses_a, losses_b)
        # The optimizer state came back too: the saved step-4 states agree.
        sa = torch.load(os.path.join(self.dir, "a", "checkpoints", "step-00000004", "state.pt"))
        sb = torch.load(os.path.join(out, "checkpoints", "step-00000004", "state.pt"))
        for key, value in sa["optimizer"]["state"].items():
            self.assertTrue(torch.equal(value["exp_avg_sq"], sb["optimizer"]["state"][key]["exp_avg_sq"]))

    def test_killed_run_logs_are_cut_back_to_the_checkpoint(self):
        out = os.path.join(self.dir, "c")
        policy = tiny.TinyPolicy(seed=0)
        sft.train_sft(policy, self.examples(policy), settings(out, 3, save_every=2), batch_size=2)
        # The last checkpoint is step 3 (the end); pretend the run died after step 2's.
        root = checkpoint.checkpoint_dir(out)
        with open(os.path.join(root, "latest"), "w") as f:
            f.write("step-00000002\n")
        resumed = tiny.TinyPolicy(seed=0)
        sft.train_sft(resumed, self.examples(resumed), settings(out, 3, save_every=2, resume=True), batch_size=2)
        steps = [m["step"] for m in jsonl(os.path.join(out, "metrics.jsonl"))]
        self.assertEqual(steps, [1, 2, 3])
        with open(os.path.join(out, "run.json")) as f:
            self.assertEqual(len(json.load(f)["sessions"]), 2)


class Cli(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, "-m", "integrations.grpo"] + list(args), cwd=ROOT,
                              capture_output=True, text=True, timeout=600)

    def test_sft_command_and_resume(self):
        work = tempfile.mkdtemp(prefix="trainer-cli-")
        data = write_sft_file(os.path.join(work, "sft.jsonl"), 4)
        out = os.path.join(work, "run")
        base = ["sft", "--model", "tiny", "--data", data, "--out", out, "--batch-size", "2", "--lr", "1e-2",
                "--save-every", "1", "--keep-checkpoints", "2"]
        done = self.run_cli(*base, "--steps", "2")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("sft step 2/2 loss", done.stderr)
        again = self.run_cli(*base, "--steps", "3")
        self.assertEqual(again.returncode, 2)
        self.assertIn("--resume", again.stderr)
        resumed = self.run_cli(*base, "--epochs", "2", "--resume")  # 2 epochs of 4 examples: 4 steps
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertIn("resuming from", resumed.stderr)
        self.assertIn("sft step 4/4", resumed.stderr)
        lines = jsonl(os.path.join(out, "metrics.jsonl"))
        self.assertEqual([m["step"] for m in lines], [1, 2, 3, 4])
        for key in ("loss", "lr", "grad_norm", "tokens_per_s", "step_s"):
            self.assertIn(key, lines[-1])
        self.assertEqual(sorted(os.listdir(checkpoint.checkpoint_dir(out))), ["latest", "step-00000003", "step-00000004"])
        adapter = os.path.join(out, "checkpoints", "step-00000004", "adapter")
        self.assertTrue(os.path.exists(os.path.join(adapter, "adapter.pt")))
        missing = self.run_cli("sft", "--model", "tiny", "--data", os.path.join(work, "none.jsonl"), "--out",
                               os.path.join(work, "x"), "--steps", "1")
        self.assertEqual(missing.returncode, 2)
        self.assertIn("none.jsonl", missing.stderr)


if __name__ == "__main__":
    unittest.main()
