"""Stage 3: GRPO against `cudal1 serve` on contrastive prompts.

One step:
  1. B prompts (fresh from GET /v1/prompts, or from a `cudal1 data rl` file);
  2. G completions of each, sampled from the policy (temperature, top-p, max new tokens);
  3. all B*G completions scored in ONE POST /v1/rewards request, group = the prompt's index in
     the step, step = the step's number: the server evaluates them in parallel, records every
     reward in its store and answers smoothed rewards and group advantages;
  4. the advantage of each completion: the server's (default), or computed here from the
     smoothed `reward` or the `raw_reward` with the same group formula (--advantage);
  5. mu updates (--inner-steps) of the clipped-ratio loss plus beta * KL(policy || reference),
     the reference being the model with its LoRA adapters disabled (losses.grpo_loss).
"""

import math
import os
import time
from dataclasses import dataclass

import torch

from . import chat, losses, rollout
from .run_log import JsonlLog
from .training import Run, sync

ADVANTAGE_SOURCES = ("server", "reward", "raw")


@dataclass
class GrpoSettings:
    prompts_per_step: int = 4
    group_size: int = 8
    max_new_tokens: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    inner_steps: int = 1
    clip_eps: float = 0.2
    beta: float = 0.04
    advantage: str = "server"
    max_prompt_tokens: int = 0
    log_completions: bool = False


def advantages_of(results, groups, source):
    """One advantage per result: the server's, or group-normalised here from a reward field."""
    if source == "server":
        return [float(r.get("advantage") or 0.0) for r in results]
    field = "reward" if source == "reward" else "raw_reward"
    return losses.group_advantages([float(r[field]) for r in results], groups)


def sample_rollouts(policy, prompts, grpo):
    """G completions per prompt. Prompts over max_prompt_tokens are left out (and counted)."""
    rollouts, skipped = [], 0
    for index, prompt in enumerate(prompts):
        ids = chat.prompt_ids(policy.tokenizer, prompt.messages)
        if grpo.max_prompt_tokens and len(ids) > grpo.max_prompt_tokens:
            skipped += 1
            continue
        for completion in policy.sample(ids, grpo.group_size, grpo.max_new_tokens, grpo.temperature, grpo.top_p):
            rollouts.append(rollout.Rollout(index, prompt.task, ids, completion, policy.decode(completion)))
    return rollouts, skipped


def score(client, rollouts, step, run_id):
    """All completions of the step in one request; fills each rollout's result."""
    items = [{"task": r.task, "completion": r.text, "group": r.prompt_index} for r in rollouts]
    results = client.rewards(items, step=step, request_id=f"grpo-{run_id}-step-{step}")
    if len(results) != len(rollouts):
        raise RuntimeError(f"cudal1 serve answered {len(results)} results for {len(rollouts)} completions")
    for r, result in zip(rollouts, results):
        r.result = result


def _scored_batch(policy, part, temperature):
    ids, attention, completion_mask = rollout.pad_batch([(r.prompt_ids, r.completion_ids) for r in part],
                                                        policy.pad_id, policy.device)
    return ids, attention, completion_mask, lambda: losses.next_token_logprobs(policy.logits(ids, attention), ids,
                                                                                temperature)


@torch.no_grad()
def fixed_logprobs(policy, rollouts, grpo, micro_batch_size, want_old):
    """The reference policy's log-probabilities of every completion token (and, for mu > 1,
    the sampling policy's, before any update), stored on each rollout."""
    for part in rollout.micro_batches(rollouts, micro_batch_size):
        _, _, mask, logprobs = _scored_batch(policy, part, grpo.temperature)
        if grpo.beta:
            with policy.reference():
                for r, v in zip(part, rollout.completion_logprobs_of(logprobs(), mask)):
                    r.ref_logprobs = v
        if want_old:
            for r, v in zip(part, rollout.completion_logprobs_of(logprobs(), mask)):
                r.old_logprobs = v


def update(policy, rollouts, grpo, micro_batch_size):
    """One pass of the GRPO loss over all rollouts, gradients accumulated (the caller steps the
    optimizer). Returns (loss, summed stats)."""
    tokens = sum(len(r.completion_ids) for r in rollouts)
    total_loss, stats = 0.0, {}
    for part in rollout.micro_batches(rollouts, micro_batch_size):
        ids, _, mask, logprobs = _scored_batch(policy, part, grpo.temperature)
        logp = logprobs()
        width = ids.shape[1]
        old = rollout.gather_completion_values([r.old_logprobs for r in part], mask, width) \
            if part[0].old_logprobs is not None else None
        ref = rollout.gather_completion_values([r.ref_logprobs for r in part], mask, width) if grpo.beta else None
        adv = torch.tensor([r.advantage for r in part], dtype=torch.float32, device=logp.device)
        loss, part_stats = losses.grpo_loss(logp, old, ref, adv, mask[:, 1:], grpo.clip_eps, grpo.beta,
                                            normalizer=tokens)
        loss.backward()
        total_loss += float(loss.detach())
        losses.add_stats(stats, part_stats)
    return total_loss, stats


def reward_metrics(rollouts, skipped, reward_seconds):
    results = [r.result for r in rollouts]
    n = max(len(results), 1)
    rewards = [float(r["reward"]) for r in results]
    mean = sum(rewards) / n
    statuses = [r["status"] for r in results]
    speedups = [float(r["speedup"]) for r in results if r.get("status") == "ok" and r.get("speedup")]
    return {
        "completions": len(results),
        "prompts_skipped": skipped,
        "reward_mean": mean,
        "reward_std": math.sqrt(sum((x - mean) ** 2 for x in rewards) / n),
        "raw_reward_mean": sum(float(r["raw_reward"]) for r in results) / n,
        "speedup_max": max(speedups) if speedups else None,
        "frac_ok": statuses.count("ok") / n,
        "frac_rejected": statuses.count("rejected") / n,
        "frac_unparseable": statuses.count("unparseable") / n,
        "evaluated": sum(1 for r in results if r.get("candidate_id") is not None and not r.get("cached")),
        "advantage_abs_mean": sum(abs(r.advantage) for r in rollouts) / n,
        "reward_s": reward_seconds,
        "reward_items_per_s": len(results) / reward_seconds if reward_seconds > 0 else None,
    }


def rollout_record(step, r, keep_text):
    record = {"step": step, "prompt": r.prompt_index, "task": r.task, "completion_tokens": len(r.completion_ids),
              "advantage_used": r.advantage}
    for key in ("status", "speedup", "flags", "raw_reward", "reward", "advantage", "candidate_id", "cached"):
        record[key] = r.result.get(key)
    if keep_text:
        record["text"] = r.text
    return record


def train_grpo(policy, prompt_source, client, settings, grpo, stage_settings=None):
    """settings.steps GRPO steps; returns the Run."""
    if grpo.advantage not in ADVANTAGE_SOURCES:
        raise ValueError(f"--advantage must be one of {', '.join(ADVANTAGE_SOURCES)}")
    run = Run("grpo", policy, settings, dict(stage_settings or {}, **grpo.__dict__))
    rollouts_log = JsonlLog(os.path.join(settings.out, "rollouts.jsonl"), run.resumed_at)
    try:
        for step in run.steps():
            done = step + 1
            start = time.perf_counter()
            prompts = [prompt_source.prompt(step, b) for b in range(grpo.prompts_per_step)]
            rollouts, skipped = sample_rollouts(policy, prompts, grpo)
            if not rollouts:
                raise RuntimeError(f"grpo step {done}: every prompt is longer than --max-prompt-tokens "
                                   f"{grpo.max_prompt_tokens}")
            sync(policy.device)
            generated = time.perf_counter()
            score(client, rollouts, done, run.run_id)
            scored = time.perf_counter()
            for r, a in zip(rollouts, advantages_of([r.result for r in rollouts], [r.prompt_index for r in rollouts],
                                                    grpo.advantage)):
                r.advantage = a
            policy.model.train()
            fixed_logprobs(policy, rollouts, grpo, settings.micro_batch_size, want_old=grpo.inner_steps > 1)
            first = None
            for inner in range(grpo.inner_steps):
                loss, stats = update(policy, rollouts, grpo, settings.micro_batch_size)
                grad_norm, lr = run.apply_gradients(step)
                if first is None:
                    first = (loss, stats, grad_norm)
            sync(policy.device)
            end = time.perf_counter()
            loss, stats, grad_norm = first
            if not math.isfinite(loss):
                raise FloatingPointError(f"grpo step {done}: the loss is {loss} (lower --lr or --beta?)")
            completion_tokens = sum(len(r.completion_ids) for r in rollouts)
            sequence_tokens = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
            metrics = dict(loss=loss, **losses.mean_stats(stats), grad_norm=grad_norm, lr=lr,
                           **reward_metrics(rollouts, skipped, scored - generated),
                           completion_tokens_mean=completion_tokens / len(rollouts),
                           gen_tokens_per_s=completion_tokens / max(generated - start, 1e-9),
                           train_tokens_per_s=sequence_tokens * grpo.inner_steps / max(end - scored, 1e-9),
                           generate_s=generated - start, train_s=end - scored, step_s=end - start)
            for r in rollouts:
                rollouts_log.write(rollout_record(done, r, grpo.log_completions))
            run.finish_step(done, metrics, [
                ("loss", loss), ("kl", metrics["kl"]),
                ("reward", f"{metrics['reward_mean']:.3f}±{metrics['reward_std']:.3f}"),
                ("ok", f"{int(round(metrics['frac_ok'] * len(rollouts)))}/{len(rollouts)}"),
                ("rejected", f"{int(round(metrics['frac_rejected'] * len(rollouts)))}"),
                ("gen tok/s", round(metrics["gen_tokens_per_s"])), ("reward_s", round(scored - generated, 1))])
    finally:
        rollouts_log.close()
        run.close()
    return run
