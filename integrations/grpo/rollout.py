"""Rollouts: sampling completions from a causal LM and packing prompt + completion pairs into
padded batches for scoring.

The sampler works with any causal LM through a small "stepper" protocol:

    logits, state = stepper.start(input_ids)        # input_ids [N, P] -> logits [N, V] of the next token
    logits, state = stepper.advance(tokens, state)  # tokens [N] appended -> logits [N, V]

`FullContext(logits_fn)` turns any `logits_fn(input_ids [N, T]) -> logits [N, T, V]` into a
stepper by running the whole sequence again at every token (no cache: for tiny models and
tests). A model that needs less than the whole context steps cheaper (tiny.WindowStepper);
transformers models use their own `generate` (policy.py).
"""

from dataclasses import dataclass, field
from typing import List, Optional

import torch


class FullContext:
    """A stepper for any logits_fn: recomputes the whole context for every new token."""

    def __init__(self, logits_fn):
        self.logits_fn = logits_fn

    def start(self, input_ids):
        return self.logits_fn(input_ids)[:, -1], input_ids

    def advance(self, tokens, state):
        state = torch.cat([state, tokens.unsqueeze(1)], dim=1)
        return self.logits_fn(state)[:, -1], state


def filter_top_p(logits, top_p):
    """Nucleus filtering: keeps the smallest set of tokens whose probability reaches top_p (the
    most likely token always stays); the others get -inf."""
    if top_p is None or top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    probs = torch.softmax(sorted_logits, dim=-1)
    # Mass of the tokens ranked before each one: a token is kept while that is under top_p.
    before = torch.cumsum(probs, dim=-1) - probs
    drop_sorted = before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def next_tokens(logits, temperature, top_p, generator=None):
    """One token per row: greedy at temperature 0, else sampled from softmax(logits / T)."""
    if not temperature:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(filter_top_p(logits.float() / temperature, top_p), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@torch.no_grad()
def sample_completions(stepper, prompt_ids, n, max_new_tokens, eos_id, temperature=1.0, top_p=1.0,
                       generator=None, device="cpu"):
    """n completions of one prompt (a list of token ids): a list of n token-id lists, each
    ending at its first eos (included) or after max_new_tokens tokens."""
    batch = torch.tensor([list(prompt_ids)] * n, dtype=torch.long, device=device)
    logits, state = stepper.start(batch)
    out = [[] for _ in range(n)]
    done = [False] * n
    for _ in range(max_new_tokens):
        tokens = next_tokens(logits, temperature, top_p, generator)
        for i, t in enumerate(tokens.tolist()):
            if not done[i]:
                out[i].append(t)
                done[i] = t == eos_id
        if all(done):
            break
        logits, state = stepper.advance(tokens, state)
    return out


def cut_at_eos(ids, eos_ids, pad_id=None):
    """The tokens of one generated completion up to its first end token (kept), without the
    padding a batched generate adds after it."""
    out = []
    for t in ids:
        if pad_id is not None and t == pad_id and t not in eos_ids:
            break
        out.append(t)
        if t in eos_ids:
            break
    return out


@dataclass
class Rollout:
    """One sampled completion of one prompt, and what the reward server said about it."""

    prompt_index: int
    task: str
    prompt_ids: List[int]
    completion_ids: List[int]
    text: str = ""
    result: dict = field(default_factory=dict)
    advantage: float = 0.0
    old_logprobs: Optional[torch.Tensor] = None  # [len(completion_ids)], when mu > 1
    ref_logprobs: Optional[torch.Tensor] = None


def pad_batch(pairs, pad_id, device="cpu"):
    """Packs (prompt_ids, completion_ids) pairs, right-padded, into input_ids [N, T],
    attention_mask [N, T] and completion_mask [N, T] (1 on the completion's tokens)."""
    length = max(len(p) + len(c) for p, c in pairs)
    ids = torch.full((len(pairs), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(pairs), length), dtype=torch.long)
    completion = torch.zeros((len(pairs), length), dtype=torch.long)
    for row, (prompt, reply) in enumerate(pairs):
        total = len(prompt) + len(reply)
        ids[row, :total] = torch.tensor(list(prompt) + list(reply), dtype=torch.long)
        attention[row, :total] = 1
        completion[row, len(prompt):total] = 1
    return ids.to(device), attention.to(device), completion.to(device)


def completion_logprobs_of(logprobs, completion_mask):
    """Splits next-token log-probabilities [N, T-1] into one 1-D tensor per row holding the
    completion tokens' values (the rows of pad_batch), detached, on the CPU."""
    mask = completion_mask[:, 1:].bool()
    return [logprobs[row][mask[row]].detach().cpu() for row in range(logprobs.shape[0])]


def gather_completion_values(values, completion_mask, length):
    """The inverse of completion_logprobs_of for one micro-batch: per-row 1-D tensors placed at
    the completion positions of a [N, length - 1] tensor (zeros elsewhere)."""
    mask = completion_mask[:, 1:].bool()
    out = torch.zeros((len(values), length - 1), dtype=torch.float32, device=completion_mask.device)
    for row, v in enumerate(values):
        out[row][mask[row]] = v.to(out.device, torch.float32)
    return out


def micro_batches(items, size):
    """Consecutive slices of at most `size` items."""
    size = max(1, int(size))
    return [items[i:i + size] for i in range(0, len(items), size)]
