"""Stage 1 (and the self-supervised rounds of stage 2): supervised fine-tuning of the LoRA
adapters on `cudal1 data sft` conversations, cross-entropy on the assistant's reply only."""

import time

import torch

from . import losses, rollout
from .datasets import batch_indices
from .training import Run, sync


def batch_loss(policy, examples, micro_batch_size):
    """Accumulates the gradients of the token-level mean SFT loss of `examples` (split into
    micro-batches); returns (loss, reply tokens, all tokens)."""
    reply_tokens = sum(len(e.reply_ids) for e in examples)
    total, seen = 0.0, 0
    for part in rollout.micro_batches(examples, micro_batch_size):
        ids, attention, reply_mask = rollout.pad_batch([(e.prompt_ids, e.reply_ids) for e in part], policy.pad_id,
                                                       policy.device)
        loss, _ = losses.sft_loss(policy.logits(ids, attention), ids, reply_mask, normalizer=reply_tokens)
        loss.backward()
        total += float(loss.detach())
        seen += int(attention.sum())
    return total, reply_tokens, seen


def train_sft(policy, examples, settings, batch_size, stage_settings=None):
    """Trains settings.steps steps of batch_size examples; returns the Run (its last
    checkpoint, start step, id)."""
    run = Run("sft", policy, settings, dict(stage_settings or {}, batch_size=batch_size, examples=len(examples)))
    try:
        for step in run.steps():
            start = time.perf_counter()
            batch = [examples[i] for i in batch_indices(step, batch_size, len(examples), settings.seed)]
            policy.model.train()
            loss, reply_tokens, tokens = batch_loss(policy, batch, settings.micro_batch_size)
            grad_norm, lr = run.apply_gradients(step)
            sync(policy.device)
            seconds = time.perf_counter() - start
            if not torch.isfinite(torch.tensor(loss)):
                raise FloatingPointError(f"sft step {step + 1}: the loss is {loss} (lower --lr?)")
            metrics = {"loss": loss, "lr": lr, "grad_norm": grad_norm, "reply_tokens": reply_tokens, "tokens": tokens,
                       "tokens_per_s": tokens / seconds, "step_s": seconds,
                       "epoch": (step + 1) * batch_size / len(examples)}
            run.finish_step(step + 1, metrics, [("loss", loss), ("lr", lr), ("tok/s", round(tokens / seconds))])
    finally:
        run.close()
    return run
