#!/usr/bin/env python3
"""GRPO steps against a real `cudal1 serve` on the CPU, with the tiny model.

    CUDAL1_BIN=build/cudal1 grpo_serve_test.py

A scripted policy answers every prompt with a known-good completion (tests/fixtures/candidates/
fast.py) and a known-bad one (wrong.py), so rewards differ within each group, while the
log-probabilities, the reference and the updates are the tiny model's. Checked: the rewards the
server recorded in its store (step, group, request), zero-mean advantages per group, a finite
loss, the good completion made more likely than the bad one, checkpoints written, and a resumed
run equal to an uninterrupted one. The command line runs the same loop with sampled completions.
"""

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))

import serve_test  # noqa: E402  (its Server starts cudal1 serve on a free port with a small suite)
from integrations.cudal1_client import RewardClient  # noqa: E402
from integrations.grpo import chat, checkpoint, datasets, losses, rollout, tiny  # noqa: E402
from integrations.grpo.grpo import GrpoSettings, advantages_of, score, train_grpo  # noqa: E402
from integrations.grpo.scripted import ScriptedPolicy  # noqa: E402
from integrations.grpo.training import RunSettings  # noqa: E402

TASK = "level1/2_ScaleRelu"  # tests/fixtures/tasks/scale_relu.py in serve_test's suite


def jsonl(path):
    return [record for _, record in datasets.read_jsonl(path)]


class GrpoAgainstServe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("CUDAL1_BIN")
        if not binary:
            raise unittest.SkipTest("CUDAL1_BIN (the cudal1 binary) is not set")
        cls.work = tempfile.mkdtemp(prefix="trainer-grpo-")
        serve_test.make_suite(ROOT, cls.work)
        cls.server = serve_test.Server(argparse.Namespace(cudal1=os.path.abspath(binary), root=ROOT), cls.work)
        cls.client = RewardClient(cls.server.url, timeout=600)
        cls.texts = [serve_test.completion_with(serve_test.source(ROOT, f"tests/fixtures/candidates/{name}.py"))
                     for name in ("fast", "wrong")]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def scripted(self, seed=0):
        return ScriptedPolicy(tiny.TinyPolicy(seed=seed, lora_rank=8, lora_alpha=16), self.texts)

    def store_rows(self, run_id):
        with sqlite3.connect(self.server.db) as db:
            return db.execute("SELECT step, group_id, request_id, task_key, status, advantage FROM rewards "
                              "WHERE request_id LIKE ? ORDER BY id", (f"grpo-{run_id}-%",)).fetchall()

    def margin(self, policy, prompt_ids):
        """log p(good completion) - log p(bad completion) under the policy."""
        with torch.no_grad():
            pairs = [(prompt_ids, c) for c in policy.completions]
            ids, attention, mask = rollout.pad_batch(pairs, policy.pad_id)
            logp = losses.next_token_logprobs(policy.logits(ids, attention), ids)
            sums = (logp * mask[:, 1:]).sum(1)
        return float(sums[0] - sums[1])

    def test_scripted_steps_store_advantages_checkpoint_resume(self):
        out = os.path.join(self.work, "scripted")
        policy = self.scripted()
        prompts = datasets.ServePrompts(self.client, [TASK], seed=0)
        probe = chat.prompt_ids(policy.tokenizer, prompts.prompt(0, 0).messages)
        before = self.margin(policy, probe)
        grpo = GrpoSettings(prompts_per_step=2, group_size=2, inner_steps=2, beta=0.04, advantage="server")
        run = train_grpo(policy, prompts, self.client, RunSettings(out=out, steps=3, lr=0.05, save_every=2), grpo)

        # The server recorded every completion: step, group and this run's request per step.
        rows = self.store_rows(run.run_id)
        self.assertEqual([(r[0], r[1]) for r in rows], [(s, g) for s in (1, 2, 3) for g in ("0", "0", "1", "1")])
        self.assertEqual({r[2] for r in rows}, {f"grpo-{run.run_id}-step-{s}" for s in (1, 2, 3)})
        self.assertEqual({(r[3], r[4]) for r in rows}, {(TASK, "ok"), (TASK, "incorrect")})
        # Advantages are zero-mean within each group, in the store and as the trainer used them.
        logged = jsonl(os.path.join(out, "rollouts.jsonl"))
        self.assertEqual(len(logged), 12)
        for step in (1, 2, 3):
            for group in (0, 1):
                used = [r["advantage_used"] for r in logged if r["step"] == step and r["prompt"] == group]
                stored = [r[5] for r in rows if r[0] == step and r[1] == str(group)]
                self.assertEqual(len(used), 2)
                self.assertAlmostEqual(sum(used), 0.0, places=6)
                self.assertAlmostEqual(sum(stored), 0.0, places=6)
        self.assertTrue(all(r["status"] == "ok" for r in logged if r["advantage_used"] > 0))
        metrics = jsonl(os.path.join(out, "metrics.jsonl"))
        self.assertEqual([m["step"] for m in metrics], [1, 2, 3])
        for m in metrics:
            self.assertTrue(math.isfinite(m["loss"]) and m["kl"] >= 0 and m["reward_s"] > 0, m)
            self.assertEqual((m["frac_ok"], m["frac_rejected"], m["completions"]), (0.5, 0.0, 4))
        # Code quality mattered: the good completion became more likely than the bad one.
        after = self.margin(policy, probe)
        self.assertGreater(after, before + 1.0, f"margin {before:.2f} -> {after:.2f}")

        # Checkpoints at step 2 and at the end; the latest restores the same state.
        self.assertTrue(checkpoint.latest(out).endswith("step-00000003"))
        self.assertTrue(os.path.exists(os.path.join(out, "checkpoints", "step-00000002", "adapter", "adapter.pt")))
        fresh = self.scripted()
        optimizer = torch.optim.AdamW(fresh.trainable_parameters())
        state = checkpoint.load(checkpoint.latest(out), fresh, optimizer, "grpo")
        self.assertEqual(state["step"], 3)
        for name, tensor in policy.trainable_state().items():
            self.assertTrue(torch.equal(tensor, fresh.trainable_state()[name]), name)
        # Resumed with one more step: only step 4 runs, with the same run id.
        resumed = train_grpo(self.scripted(), prompts, self.client,
                             RunSettings(out=out, steps=4, lr=0.05, save_every=2, resume=True), grpo)
        self.assertEqual((resumed.start_step, resumed.run_id), (3, run.run_id))
        self.assertEqual([m["step"] for m in jsonl(os.path.join(out, "metrics.jsonl"))], [1, 2, 3, 4])
        self.assertEqual(len(self.store_rows(run.run_id)), 16)

    def test_resumed_run_equals_uninterrupted_run(self):
        # Fixed prompts (a `cudal1 data rl`-shaped file) and advantages from the raw rewards,
        # which the server keeps for identical code: both runs see the same numbers.
        served = self.client.prompts(TASK, n=2, seed=11)
        prompt_file = os.path.join(self.work, "rl.jsonl")
        with open(prompt_file, "w") as f:
            for p in served:
                f.write(json.dumps({"prompt": p["messages"], "task": TASK}) + "\n")
        grpo = GrpoSettings(prompts_per_step=2, group_size=2, beta=0.04, advantage="raw")

        def run(out, steps, resume=False):
            policy = self.scripted()
            source = datasets.FilePrompts(prompt_file, seed=3, per_step=2)
            train_grpo(policy, source, self.client, RunSettings(out=out, steps=steps, lr=0.05, save_every=1,
                                                               resume=resume, seed=3), grpo)
            return policy

        straight = run(os.path.join(self.work, "straight"), 3)
        run(os.path.join(self.work, "split"), 2)
        resumed = run(os.path.join(self.work, "split"), 3, resume=True)
        for name, tensor in straight.trainable_state().items():
            self.assertTrue(torch.equal(tensor, resumed.trainable_state()[name]), f"{name} differs after resume")

    def test_a_shuffled_step_gets_the_same_rewards_and_advantages(self):
        # A GRPO step scored by two servers on copies of one store (the same history and
        # verdicts): once in sampling order, once shuffled across and within groups. Every
        # completion gets the same reward and advantage, and each group the same advantages.
        texts = self.texts + ["I would fuse the two passes but wrote no code."]
        self.client.rewards([{"task": TASK, "completion": t} for t in texts])  # verdicts in the store
        rollouts = [rollout.Rollout(group, TASK, [], [], texts[k]) for group in (0, 1) for k in (0, 1, 2, 1)]
        order = [6, 1, 3, 0, 7, 2, 5, 4]
        scored = []
        for name, batch in (("in-order", rollouts), ("shuffled", [rollouts[i] for i in order])):
            db = os.path.join(self.work, name + ".db")
            with sqlite3.connect(self.server.db) as live, sqlite3.connect(db) as copy:
                live.backup(copy)
            server = serve_test.Server(self.server.args, self.work, db=db, name=name)
            try:
                copies = [rollout.Rollout(r.prompt_index, r.task, [], [], r.text) for r in batch]
                score(RewardClient(server.url, timeout=600), copies, step=1, run_id=name)
            finally:
                server.stop()
            scored.append(copies)
        straight, shuffled = scored
        fields = ("raw_reward", "reward", "advantage", "status")
        for k, i in enumerate(order):
            self.assertEqual({f: shuffled[k].result[f] for f in fields}, {f: straight[i].result[f] for f in fields})
        # Equal completions in a group, equal advantages; the correct one above the rest.
        for group in (0, 1):
            members = [r for r in straight if r.prompt_index == group]
            used = advantages_of([r.result for r in members], [group] * len(members), "server")
            self.assertEqual(used[1], used[3])
            self.assertGreater(used[0], used[1])
            self.assertAlmostEqual(sum(used), 0.0, places=9)

    def test_command_line_with_sampled_completions(self):
        out = os.path.join(self.work, "cli")
        command = [sys.executable, "-m", "integrations.grpo", "grpo", "--model", "tiny", "--serve", self.server.url,
                   "--tasks", TASK, "--prompts-per-step", "1", "--group-size", "2", "--max-new-tokens", "8",
                   "--save-every", "1", "--lr", "1e-3", "--out", out]
        first = subprocess.run(command + ["--steps", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertIn("grpo step 2/2 loss", first.stderr)
        second = subprocess.run(command + ["--steps", "3", "--resume"], cwd=ROOT, capture_output=True, text=True,
                                timeout=600)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("resuming from", second.stderr)
        metrics = jsonl(os.path.join(out, "metrics.jsonl"))
        self.assertEqual([m["step"] for m in metrics], [1, 2, 3])
        for key in ("loss", "kl", "reward_mean", "reward_std", "frac_rejected", "gen_tokens_per_s",
                    "train_tokens_per_s", "step_s", "reward_s", "reward_items_per_s"):
            self.assertIn(key, metrics[-1])
        with open(os.path.join(out, "run.json")) as f:
            run_id = json.load(f)["run_id"]
        self.assertEqual([r[0] for r in self.store_rows(run_id)], [1, 1, 2, 2, 3, 3])
        unknown = subprocess.run(command[:-2] + ["--out", out + "-x", "--steps", "1", "--tasks", "level9/1_None"],
                                 cwd=ROOT, capture_output=True, text=True, timeout=600)
        self.assertNotEqual(unknown.returncode, 0)
        self.assertIn("level9/1_None", unknown.stderr)


if __name__ == "__main__":
    unittest.main()
