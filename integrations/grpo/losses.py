"""The trainer's math on plain tensors: token log-probabilities, the SFT loss, the GRPO loss
(clipped policy ratio plus a KL penalty to the reference policy) and group advantages.

Nothing here knows about models, tokenizers or the reward server, so every formula is tested
as numbers on the CPU (tests/trainer/losses_test.py).

Shapes: B sequences, T positions, V vocabulary entries. A "token" tensor of shape [B, T] holds,
at position t, the log-probability of token t+1 given tokens 0..t (next-token prediction), and
a mask of the same shape says which of those predicted tokens count (completion tokens only).
"""

import math

import torch


def token_logprobs(logits, targets):
    """log p(targets) under softmax(logits): logits [B, T, V], targets [B, T] -> [B, T].

    Computed as gathered logit minus logsumexp, in float32, so the full [B, T, V] log-softmax
    is never materialised (it is the largest tensor of a step with a 150k-token vocabulary)."""
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def next_token_logprobs(logits, input_ids, temperature=1.0):
    """Log-probabilities of input_ids[:, 1:] given their prefixes: logits [B, T, V] of the whole
    sequence -> [B, T-1]. Dividing by the sampling temperature scores tokens under the
    distribution they were drawn from."""
    scaled = logits[:, :-1]
    if temperature not in (None, 1.0):
        scaled = scaled / temperature
    return token_logprobs(scaled, input_ids[:, 1:])


def sft_loss(logits, input_ids, loss_mask, normalizer=None):
    """Cross-entropy of the tokens loss_mask marks (the assistant turn), summed and divided by
    `normalizer` (default: the number of marked tokens).

    loss_mask [B, T] is aligned with input_ids: 1 where input_ids[:, t] is a target. Position 0
    can never be a target (nothing predicts it). Passing the token count of a whole batch as
    `normalizer` makes micro-batches add up to the token-level mean of the batch.
    Returns (loss, number of target tokens)."""
    mask = loss_mask[:, 1:].float()
    logp = next_token_logprobs(logits, input_ids)
    count = mask.sum()
    denominator = count if normalizer is None else torch.as_tensor(float(normalizer))
    loss = -(logp * mask).sum() / torch.clamp(denominator, min=1.0)
    return loss, int(count.item())


def kl_k3(logp, ref_logp):
    """Per-token estimate of KL(policy || reference) from samples of the policy: Schulman's k3,
    r - log r - 1 with r = p_ref / p_policy. Unbiased, never negative, and low-variance when
    the two policies are close (GRPO's choice)."""
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip_eps=0.2, beta=0.04, normalizer=None):
    """The GRPO objective as a loss to minimise, token-level mean over completion tokens.

        ratio_t = exp(logp_t - old_logp_t)            (policy now / policy that sampled)
        pg_t    = -min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps) * A)
        loss    = sum_t mask_t * (pg_t + beta * k3_t) / normalizer

    logp [B, T] carries the gradient; old_logp is the sampling policy's (None: the policy now,
    detached, so the ratio is 1 and its gradient is that of logp: one update per sample);
    ref_logp the reference policy's (None, or beta = 0: no KL term); advantages [B], one per
    sequence. `normalizer` defaults to the number of masked tokens; pass the token count of the
    whole batch when the batch is split into micro-batches.

    Returns (loss, stats) where stats holds sums over masked tokens (pg, kl, ratio, clipped) and
    their count, so micro-batches can be added up before dividing."""
    mask = mask.float()
    if old_logp is None:
        old_logp = logp.detach()
    ratio = torch.exp(logp - old_logp)
    adv = advantages.float().unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    pg = -torch.min(unclipped, clipped)
    per_token = pg
    kl = None
    if ref_logp is not None and beta != 0:
        kl = kl_k3(logp, ref_logp)
        per_token = pg + beta * kl
    count = mask.sum()
    denominator = count if normalizer is None else torch.as_tensor(float(normalizer))
    loss = (per_token * mask).sum() / torch.clamp(denominator, min=1.0)
    with torch.no_grad():
        # The clipped term is the active one (no gradient) where the ratio left the trust
        # region in the direction the advantage pushes it.
        active = ((ratio > 1.0 + clip_eps) & (adv > 0)) | ((ratio < 1.0 - clip_eps) & (adv < 0))
        stats = {
            "tokens": float(count.item()),
            "pg_sum": float((pg * mask).sum().item()),
            "kl_sum": float((kl * mask).sum().item()) if kl is not None else 0.0,
            "ratio_sum": float((ratio * mask).sum().item()),
            "clipped_sum": float((active.float() * mask).sum().item()),
        }
    return loss, stats


def add_stats(total, stats):
    """Adds the sums of one micro-batch's grpo_loss stats into `total` (a dict)."""
    for key, value in stats.items():
        total[key] = total.get(key, 0.0) + value
    return total


def mean_stats(total):
    """Means per token of summed grpo_loss stats: pg_loss, kl, ratio_mean, clip_frac."""
    tokens = max(total.get("tokens", 0.0), 1.0)
    return {
        "pg_loss": total.get("pg_sum", 0.0) / tokens,
        "kl": total.get("kl_sum", 0.0) / tokens,
        "ratio_mean": total.get("ratio_sum", 0.0) / tokens,
        "clip_frac": total.get("clipped_sum", 0.0) / tokens,
    }


def group_advantages(rewards, groups, eps=1e-6):
    """GRPO advantages computed here, with the formula `cudal1 serve` uses (docs/rl.md):
    A_i = (r_i - mean(group)) / (sd(group) + eps), sd the sample deviation (n - 1), 0 for a
    group of one. rewards and groups are parallel lists; groups are any hashable labels."""
    members = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for indices in members.values():
        if len(indices) < 2:
            continue
        values = [float(rewards[i]) for i in indices]
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        for i, v in zip(indices, values):
            out[i] = (v - mean) / (sd + eps)
    return out
