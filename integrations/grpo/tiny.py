"""A tiny pure-PyTorch causal LM with LoRA adapters and a character tokenizer: the model the
CPU tests train (`--model tiny`), where transformers and peft are not installed.

Embedding -> LoRA linear -> causal convolution over the last WINDOW tokens -> LoRA linear head.
Prompts are thousands of characters long; a convolution handles them in parallel (a recurrent
layer would step through every character), and since a token's logits depend only on the
WINDOW tokens before it, sampling feeds the model just that window. Only the LoRA matrices
train, as with peft; disabling them gives the reference policy.
"""

import contextlib
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import rollout
from .policy import Policy

SPECIALS = ["<pad>", "<eos>", "<unk>"]
CHARACTERS = "\n\t" + "".join(chr(c) for c in range(32, 127))


class CharTokenizer:
    """One token per printable ASCII character, plus pad, eos and unk. No chat template, so
    conversations use chat.py's role-tagged format."""

    chat_template = None
    pad_token, eos_token, unk_token = SPECIALS

    def __init__(self):
        self.vocab = {s: i for i, s in enumerate(SPECIALS)}
        for c in CHARACTERS:
            self.vocab[c] = len(self.vocab)
        self.inverse = {i: s for s, i in self.vocab.items()}
        self.pad_token_id, self.eos_token_id, self.unk_token_id = (self.vocab[s] for s in SPECIALS)

    def __len__(self):
        return len(self.vocab)

    def encode(self, text, add_special_tokens=False):
        return [self.vocab.get(c, self.unk_token_id) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        out = []
        for i in ids:
            token = self.inverse.get(int(i), self.unk_token)
            if token in SPECIALS:
                if skip_special_tokens:
                    continue
            out.append(token)
        return "".join(out)


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update (B A) * alpha / r. B starts at
    zero, so a fresh adapter leaves the model unchanged."""

    def __init__(self, d_in, d_out, rank, alpha):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(rank, d_in))
        self.lora_B = nn.Parameter(torch.zeros(d_out, rank))
        self.scale = alpha / rank
        self.enabled = True
        self.reset_adapter()

    def reset_adapter(self):
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    def merge(self):
        """Folds the adapter into the base weights and starts a fresh one."""
        with torch.no_grad():
            self.base.weight += (self.lora_B @ self.lora_A) * self.scale
        self.reset_adapter()

    def forward(self, x):
        out = self.base(x)
        if self.enabled:
            out = out + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale
        return out


WINDOW = 8  # tokens a prediction sees: enough for character n-grams, small enough to be fast


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, dim=48, hidden=64, rank=4, alpha=8):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.proj = LoRALinear(dim, hidden, rank, alpha)
        self.conv = nn.Conv1d(hidden, hidden, WINDOW)
        self.head = LoRALinear(hidden, vocab_size, rank, alpha)
        for module in (self.embed, self.conv):
            for p in module.parameters():
                p.requires_grad_(False)

    def adapters(self):
        return [self.proj, self.head]

    def forward(self, input_ids):
        x = torch.tanh(self.proj(self.embed(input_ids))).transpose(1, 2)
        # Left padding only: position t sees positions t - WINDOW + 1 .. t, never later ones.
        x = torch.tanh(self.conv(F.pad(x, (WINDOW - 1, 0))))
        return self.head(x.transpose(1, 2))

    @contextlib.contextmanager
    def disable_adapter(self):
        for a in self.adapters():
            a.enabled = False
        try:
            yield
        finally:
            for a in self.adapters():
                a.enabled = True


class WindowStepper:
    """rollout's stepper protocol for TinyCausalLM: the next token's logits from the last
    WINDOW tokens alone (exactly what the whole sequence gives)."""

    def __init__(self, model):
        self.model = model

    def start(self, input_ids):
        window = input_ids[:, -WINDOW:]
        return self.model(window)[:, -1], window

    def advance(self, tokens, window):
        window = torch.cat([window, tokens.unsqueeze(1)], dim=1)[:, -WINDOW:]
        return self.model(window)[:, -1], window


class TinyPolicy(Policy):
    """TinyCausalLM behind the Policy interface. The base weights are a function of `seed`, so
    every process that builds TinyPolicy(seed) holds the same base model."""

    def __init__(self, seed=0, device="cpu", lora_rank=4, lora_alpha=8, lora_dropout=0.0, init_adapter=None):
        self.tokenizer = CharTokenizer()
        self.device = device
        self.seed = seed
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = TinyCausalLM(len(self.tokenizer), rank=lora_rank, alpha=lora_alpha).to(device)
        if init_adapter:
            self.merge_adapter(init_adapter)
        self.info = {"kind": "tiny", "seed": seed, "lora_rank": lora_rank, "lora_alpha": lora_alpha,
                     "init_adapter": init_adapter}

    def logits(self, input_ids, attention_mask=None):
        # Right padding: the model is causal, so padding after a sequence cannot change the
        # logits of its real positions.
        return self.model(input_ids)

    def reference(self):
        return self.model.disable_adapter()

    def sample(self, prompt_ids, n, max_new_tokens, temperature=1.0, top_p=1.0):
        return rollout.sample_completions(WindowStepper(self.model), prompt_ids, n, max_new_tokens,
                                          self.tokenizer.eos_token_id, temperature, top_p, device=self.device)

    def save_adapter(self, path):
        os.makedirs(path, exist_ok=True)
        torch.save(self.trainable_state(), os.path.join(path, "adapter.pt"))
        with open(os.path.join(path, "adapter_config.json"), "w") as f:
            json.dump(self.info, f, indent=1)

    def merge_adapter(self, path):
        """Loads a saved adapter into the model, folds it into the base weights and starts fresh
        adapters: the adapted model becomes the base (and the reference policy)."""
        self.load_trainable_state(torch.load(os.path.join(path, "adapter.pt")))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            for a in self.model.adapters():
                a.merge()

    def describe(self):
        return dict(self.info)
