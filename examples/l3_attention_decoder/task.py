"""Level 3: a tiny attention-RNN decoder (Bahdanau/Luong style), written
naively.

At every decoder step t the hidden state h queries a fixed set of encoder
states with scaled dot-product attention, and the context vector is fed back
into the recurrence:

    k = enc W_k^T + b_k,  v = enc W_v^T + b_v          (B, S, A)
    q = W_q h + b_q                                     (B, A)
    p = softmax(k q / sqrt(A))  over the S encoder positions
    ctx = p^T v                                         (B, A)
    h = tanh(W_x x_t + b_x + W_h h + b_h + W_c ctx + b_c)
    out_t = W_o h + b_o

The naive reference recomputes the key/value projections of the encoder at
every step (they do not depend on t), spells out the softmax, and issues ~25
small ops per step. The recurrence through h makes the loop sequential.
"""
import math

import torch
import torch.nn as nn

batch_size = 8
tgt_len = 128
src_len = 32
input_dim = 32
enc_dim = 32
attn_dim = 32
hidden_dim = 64
output_dim = 16


class Model(nn.Module):
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
        h = torch.zeros(b, self.hidden_dim, device=x.device, dtype=x.dtype)
        outs = []
        for t in range(t_len):
            k = self.key(enc)                                    # (B, S, A)
            v = self.value(enc)                                  # (B, S, A)
            q = self.query(h)                                    # (B, A)
            scores = torch.bmm(k, q.unsqueeze(2)).squeeze(2)     # (B, S)
            scores = scores / math.sqrt(self.attn_dim)
            scores = scores - scores.max(dim=1, keepdim=True)[0]
            e = torch.exp(scores)
            p = e / e.sum(dim=1, keepdim=True)
            ctx = torch.bmm(p.unsqueeze(1), v).squeeze(1)        # (B, A)
            pre = self.in_proj(x[:, t, :]) + self.rec(h) + self.ctx_proj(ctx)
            h = torch.tanh(pre)
            outs.append(self.head(h))
        return torch.stack(outs, dim=1)                          # (B, T, O)


def get_inputs():
    return [torch.randn(batch_size, tgt_len, input_dim), torch.randn(batch_size, src_len, enc_dim)]


def get_init_inputs():
    return [input_dim, enc_dim, attn_dim, hidden_dim, output_dim]
