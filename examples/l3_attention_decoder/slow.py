"""Correct but slow: the reference algorithm run separately for each batch
element (outer Python loop over the batch), so every per-step op, including
the redundant key/value projections, is issued batch_size times."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_dim, enc_dim, attn_dim, hidden_dim, output_dim):
        super().__init__()
        self.attn_dim = attn_dim
        self.hidden_dim = hidden_dim
        self.key = nn.Linear(enc_dim, attn_dim)
        self.value = nn.Linear(enc_dim, attn_dim)
        self.query = nn.Linear(hidden_dim, attn_dim)
        self.in_proj = nn.Linear(input_dim, hidden_dim)
        self.rec = nn.Linear(hidden_dim, hidden_dim)
        self.ctx_proj = nn.Linear(attn_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim, output_dim)

    def forward(self, x, enc):
        b, t_len, _ = x.shape
        seqs = []
        for i in range(b):
            h = torch.zeros(self.hidden_dim, device=x.device, dtype=x.dtype)
            outs = []
            for t in range(t_len):
                k = self.key(enc[i])                              # (S, A)
                v = self.value(enc[i])                            # (S, A)
                q = self.query(h)                                 # (A,)
                scores = torch.mv(k, q) / math.sqrt(self.attn_dim)
                p = torch.softmax(scores, dim=0)
                ctx = torch.mv(v.t(), p)                          # (A,)
                h = torch.tanh(self.in_proj(x[i, t]) + self.rec(h) + self.ctx_proj(ctx))
                outs.append(self.head(h))
            seqs.append(torch.stack(outs, dim=0))
        return torch.stack(seqs, dim=0)
