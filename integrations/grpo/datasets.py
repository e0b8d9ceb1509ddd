"""The trainer's inputs: SFT examples from `cudal1 data sft` files, and GRPO prompts either
fresh from `cudal1 serve` (GET /v1/prompts: they show the best kernels verified so far,
CUDA-L1's stage 3) or from a `cudal1 data rl` file.

Order is a function of (seed, step) alone, never of what ran before, so a resumed run sees
exactly the batches an uninterrupted one would have seen.
"""

import hashlib
import json
import random
from dataclasses import dataclass
from typing import List

from . import chat


class DataError(ValueError):
    """A data file the trainer cannot use; the message names the file and line."""


def read_jsonl(path):
    """(line number, record) for every non-empty line of a JSON Lines file."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append((number, json.loads(line)))
            except ValueError as e:
                raise DataError(f"{path}:{number}: not valid JSON ({e})") from None
    return records


def _messages(record, key, where):
    messages = record.get(key)
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise DataError(f"{where}: \"{key}\" must be a list of {{\"role\", \"content\"}} messages")
    return messages


@dataclass
class Example:
    """One SFT conversation as token ids: the prompt is masked, the reply is trained."""

    prompt_ids: List[int]
    reply_ids: List[int]
    task: str = ""


def sft_examples(paths, tokenizer, max_tokens=None):
    """Examples of every record of the `cudal1 data sft` files (`messages` ending with the
    assistant's reply; other fields are ignored). A reply longer than what max_tokens leaves
    after its prompt is cut; a record whose prompt alone does not fit is skipped.
    Returns (examples, number skipped)."""
    examples, skipped = [], 0
    for path in paths:
        for number, record in read_jsonl(path):
            where = f"{path}:{number}"
            messages = _messages(record, "messages", where)
            try:
                prompt, reply = chat.example_ids(tokenizer, messages)
            except ValueError as e:
                raise DataError(f"{where}: {e}") from None
            if max_tokens:
                room = max_tokens - len(prompt)
                if room < 2:
                    skipped += 1
                    continue
                reply = reply[:room]
            examples.append(Example(prompt, reply, str(record.get("task", ""))))
    if not examples:
        raise DataError(f"no usable SFT example in {', '.join(paths)} ({skipped} longer than the token limit)")
    return examples, skipped


def derived_seed(*parts):
    """A 63-bit seed from any parts (the run's seed, a step, an index): stable across runs and
    Python versions, unlike hash()."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def epoch_order(count, seed, epoch):
    order = list(range(count))
    random.Random(derived_seed(seed, "epoch", epoch)).shuffle(order)
    return order


def batch_indices(step, batch_size, count, seed):
    """The example indices of a (0-based) step: consecutive slices of a fresh permutation per
    epoch, an epoch being one pass over the data."""
    out = []
    position = step * batch_size
    while len(out) < batch_size:
        epoch, offset = divmod(position, count)
        out.append(epoch_order(count, seed, epoch)[offset])
        position += 1
    return out


@dataclass
class Prompt:
    """A GRPO prompt: the task it asks to optimise and the chat messages (no reply)."""

    task: str
    messages: list
    exemplars: list = None


class ServePrompts:
    """Fresh contrastive prompts from `cudal1 serve` for each step: task i of step s is drawn
    from the task list by (seed, s, i), and the server's exemplar sampling is seeded the same
    way, so the prompt depends on the store's contents and the step, never on earlier calls."""

    def __init__(self, client, tasks, seed):
        if not tasks:
            raise DataError("no task to train on (--tasks)")
        self.client, self.tasks, self.seed = client, list(tasks), seed

    def prompt(self, step, index):
        rng = random.Random(derived_seed(self.seed, "task", step, index))
        task = self.tasks[rng.randrange(len(self.tasks))]
        served = self.client.prompts(task, n=1, seed=derived_seed(self.seed, "prompt", step, index) % (1 << 31))
        return Prompt(task, served[0]["messages"], served[0].get("exemplars"))


class FilePrompts:
    """Prompts of a `cudal1 data rl` file (`prompt`: the messages, `task`: the key), taken in a
    seeded order per epoch like the SFT examples, `per_step` of them per step."""

    def __init__(self, path, seed, per_step, tasks=None):
        self.prompts = []
        for number, record in read_jsonl(path):
            where = f"{path}:{number}"
            key = "prompt" if "prompt" in record else "messages"
            messages = _messages(record, key, where)
            # A record holding a whole conversation: the prompt is what precedes the reply.
            if messages and messages[-1]["role"] == "assistant":
                messages = messages[:-1]
            task = record.get("task")
            if not isinstance(task, str) or not task:
                raise DataError(f"{where}: \"task\" (the task key) is missing")
            if tasks is None or task in tasks:
                self.prompts.append(Prompt(task, messages))
        if not self.prompts:
            raise DataError(f"{path}: no prompt" + (f" for the tasks {sorted(tasks)}" if tasks else ""))
        self.seed, self.per_step = seed, per_step

    def prompt(self, step, index):
        return self.prompts[batch_indices(step, self.per_step, len(self.prompts), self.seed)[index]]
