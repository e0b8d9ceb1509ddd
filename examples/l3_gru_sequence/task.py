"""Level 3: a small recurrent network: GRU over a sequence + linear read-out.

The GRU cell is written by hand from two nn.Linear layers (input-to-hidden
and hidden-to-hidden, gates ordered r, z, n as in torch.nn.GRU), with the
sigmoids spelled out as 1 / (1 + exp(-a)). Every time step issues ~20 small
ops, and the step loop is inherently sequential, so on a GPU the reference is
dominated by per-op launch/dispatch latency.

h_t = (1 - z) * n + z * h_{t-1}
r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
out_t = W_o h_t + b_o
"""
import torch
import torch.nn as nn

batch_size = 4
seq_len = 1024
input_size = 32
hidden_size = 64
output_size = 16


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.x2h = nn.Linear(input_size, 3 * hidden_size)
        self.h2h = nn.Linear(hidden_size, 3 * hidden_size)
        self.head = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        b, t_len, _ = x.shape
        h = torch.zeros(b, self.hidden_size, device=x.device, dtype=x.dtype)
        outs = []
        for t in range(t_len):
            gi = self.x2h(x[:, t, :])
            gh = self.h2h(h)
            i_r, i_z, i_n = gi.chunk(3, dim=1)
            h_r, h_z, h_n = gh.chunk(3, dim=1)
            r = 1.0 / (1.0 + torch.exp(-(i_r + h_r)))
            z = 1.0 / (1.0 + torch.exp(-(i_z + h_z)))
            n = torch.tanh(i_n + r * h_n)
            h = (1.0 - z) * n + z * h
            outs.append(h)
        hs = torch.stack(outs, dim=1)          # (B, T, H)
        return self.head(hs)                   # (B, T, O)


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
