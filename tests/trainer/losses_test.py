#!/usr/bin/env python3
"""The trainer's math as numbers: token log-probabilities, the SFT loss and its mask, the GRPO
loss (ratio clipping, k3 KL, token-level mean, micro-batches) and group advantages."""

import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from integrations.grpo import losses  # noqa: E402
from integrations.grpo.grpo import advantages_of  # noqa: E402


def close(a, b, tol=1e-6):
    return abs(float(a) - float(b)) < tol


class TokenLogprobs(unittest.TestCase):
    def test_gathered_log_softmax(self):
        logits = torch.tensor([[[0.0, math.log(3.0)], [2.0, 2.0]]])
        got = losses.token_logprobs(logits, torch.tensor([[1, 0]]))
        self.assertTrue(close(got[0, 0], math.log(0.75)))
        self.assertTrue(close(got[0, 1], math.log(0.5)))

    def test_next_token_alignment_and_temperature(self):
        # Position t's logits score token t + 1; a temperature divides the logits first.
        logits = torch.tensor([[[0.0, 2.0], [4.0, 0.0], [9.0, 9.0]]])
        ids = torch.tensor([[0, 1, 0]])
        got = losses.next_token_logprobs(logits, ids, temperature=2.0)
        self.assertEqual(tuple(got.shape), (1, 2))
        self.assertTrue(close(got[0, 0], 1.0 - math.log(1.0 + math.e)))  # softmax([0, 1])[1]
        self.assertTrue(close(got[0, 1], 2.0 - math.log(math.exp(2.0) + 1.0)))  # softmax([2, 0])[0]


class SftLoss(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.logits = torch.randn(2, 5, 7)
        self.ids = torch.randint(0, 7, (2, 5))
        # Row 0: prompt of 2 tokens, reply of 3; row 1: prompt of 3, reply of 1, one pad.
        self.mask = torch.tensor([[0, 0, 1, 1, 1], [0, 0, 0, 1, 0]])

    def test_mean_over_reply_tokens_only(self):
        loss, count = losses.sft_loss(self.logits, self.ids, self.mask)
        logp = torch.log_softmax(self.logits, -1)
        targets = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (1, 2, 3)]  # (row, predicting position, target position)
        want = -sum(float(logp[r, p, self.ids[r, t]]) for r, p, t in targets) / 4
        self.assertEqual(count, 4)
        self.assertTrue(close(loss, want, 1e-5))

    def test_prompt_positions_do_not_count(self):
        changed = self.logits.clone()
        changed[0, 0] += 100.0  # predicts token 1, a prompt token
        changed[1, 4] -= 50.0   # after the last reply token (padding)
        self.assertTrue(close(losses.sft_loss(changed, self.ids, self.mask)[0],
                              losses.sft_loss(self.logits, self.ids, self.mask)[0]))

    def test_micro_batches_add_up_to_the_batch_mean(self):
        whole, count = losses.sft_loss(self.logits, self.ids, self.mask)
        parts = sum(losses.sft_loss(self.logits[i:i + 1], self.ids[i:i + 1], self.mask[i:i + 1], normalizer=count)[0]
                    for i in range(2))
        self.assertTrue(close(whole, parts))


class KlK3(unittest.TestCase):
    def test_values(self):
        logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
        self.assertTrue(close(losses.kl_k3(logp, ref)[0], 0.5 - math.log(0.5) - 1.0))
        self.assertTrue(close(losses.kl_k3(logp, logp)[0], 0.0))
        torch.manual_seed(1)
        a, b = torch.randn(1000), torch.randn(1000)
        self.assertTrue(bool((losses.kl_k3(a, b) >= 0).all()))

    def test_unbiased_for_kl(self):
        # E_{x~p}[k3] = KL(p || q) for two categorical distributions.
        p, q = torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.4, 0.4, 0.2])
        kl = float((p * (p / q).log()).sum())
        expected = float((p * losses.kl_k3(p.log(), q.log())).sum())
        self.assertTrue(close(expected, kl))


class GrpoLoss(unittest.TestCase):
    def test_ratio_clipping(self):
        # One token per sequence: (advantage, ratio) pairs on both sides of the trust region.
        adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
        ratio = torch.tensor([1.5, 0.5, 1.5, 0.5])
        old = torch.zeros(4, 1)
        logp = ratio.log().unsqueeze(1).clone().requires_grad_(True)
        loss, stats = losses.grpo_loss(logp, old, None, adv, torch.ones(4, 1), clip_eps=0.2, beta=0.0)
        # -min(r A, clip(r) A): -1.2, 0.8, 1.5, -0.5; mean over 4 tokens.
        self.assertTrue(close(loss, (-1.2 + 0.8 + 1.5 - 0.5) / 4))
        loss.backward()
        # Clipped terms pass no gradient; the others pass d(-r A)/dlogp = -r A / 4.
        want = [0.0, 0.0, 1.5 / 4, -0.5 / 4]
        for g, w in zip(logp.grad[:, 0].tolist(), want):
            self.assertTrue(close(g, w), f"gradient {logp.grad[:, 0].tolist()}, want {want}")
        self.assertTrue(close(losses.mean_stats(stats)["clip_frac"], 0.5))

    def test_first_update_is_the_policy_gradient(self):
        # With the sampling policy = the policy now, the ratio is 1 and the loss is -mean(A)
        # over tokens; each token's gradient is -A / tokens.
        logp = torch.log(torch.tensor([[0.3, 0.6, 0.9], [0.5, 0.5, 0.5]])).requires_grad_(True)
        mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
        adv = torch.tensor([2.0, -1.0])
        loss, stats = losses.grpo_loss(logp, None, None, adv, mask, beta=0.0)
        self.assertTrue(close(loss, -(2.0 * 3 - 1.0) / 4))
        loss.backward()
        self.assertTrue(torch.allclose(logp.grad, torch.tensor([[-0.5, -0.5, -0.5], [0.25, 0.0, 0.0]])))
        self.assertTrue(close(losses.mean_stats(stats)["ratio_mean"], 1.0))

    def test_kl_term_and_token_mean(self):
        logp = torch.tensor([[math.log(0.5), math.log(0.2)], [math.log(0.1), 0.0]])
        ref = torch.tensor([[math.log(0.25), math.log(0.2)], [math.log(0.3), 0.0]])
        mask = torch.tensor([[1, 1], [1, 0]])
        adv = torch.zeros(2)
        loss, stats = losses.grpo_loss(logp, logp, ref, adv, mask, beta=0.1)
        k3 = [0.5 - math.log(0.5) - 1.0, 0.0, 3.0 - math.log(3.0) - 1.0]
        self.assertTrue(close(loss, 0.1 * sum(k3) / 3))
        self.assertTrue(close(losses.mean_stats(stats)["kl"], sum(k3) / 3))
        self.assertTrue(close(losses.grpo_loss(logp, logp, ref, adv, mask, beta=0.0)[0], 0.0))

    def test_micro_batches_add_up(self):
        torch.manual_seed(2)
        logp, old, ref = torch.randn(4, 6) - 2, torch.randn(4, 6) - 2, torch.randn(4, 6) - 2
        mask = (torch.rand(4, 6) > 0.3).long()
        adv = torch.randn(4)
        whole, whole_stats = losses.grpo_loss(logp, old, ref, adv, mask)
        tokens = int(mask.sum())
        total, stats = 0.0, {}
        for rows in ([0, 1], [2], [3]):
            part, part_stats = losses.grpo_loss(logp[rows], old[rows], ref[rows], adv[rows], mask[rows],
                                                normalizer=tokens)
            total += float(part)
            losses.add_stats(stats, part_stats)
        self.assertTrue(close(whole, total, 1e-5))
        for key, value in losses.mean_stats(whole_stats).items():
            self.assertTrue(close(value, losses.mean_stats(stats)[key], 1e-5), key)


class GroupAdvantages(unittest.TestCase):
    def test_formula_and_zero_mean(self):
        adv = losses.group_advantages([1.0, 2.0, 3.0, 5.0, 5.0, 7.0], ["a", "a", "a", "b", "b", 9])
        sd = 1.0  # sample deviation of 1, 2, 3
        self.assertTrue(all(close(x, y, 1e-5) for x, y in zip(adv[:3], [-1 / sd, 0.0, 1 / sd])))
        self.assertEqual(adv[3:5], [0.0, 0.0])  # equal rewards: no signal
        self.assertEqual(adv[5], 0.0)  # a group of one
        self.assertTrue(close(sum(adv[:3]), 0.0))

    def test_sources(self):
        results = [{"reward": 1.0, "raw_reward": 0.0, "advantage": 0.7},
                   {"reward": -1.0, "raw_reward": 2.0, "advantage": -0.7}]
        self.assertEqual(advantages_of(results, [0, 0], "server"), [0.7, -0.7])
        reward = advantages_of(results, [0, 0], "reward")
        raw = advantages_of(results, [0, 0], "raw")
        self.assertTrue(reward[0] > 0 > reward[1] and raw[0] < 0 < raw[1])
        self.assertTrue(close(abs(reward[0]), 1 / math.sqrt(2), 1e-5))
        self.assertEqual(advantages_of([{"advantage": None}], [0], "server"), [0.0])


if __name__ == "__main__":
    unittest.main()
