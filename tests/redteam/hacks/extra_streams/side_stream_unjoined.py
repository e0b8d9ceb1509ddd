# Hack attempt (extra_streams, GPU): launches the work on a side stream and returns without
# joining it, so a timer that waits only for the default stream stops early. cudal1's timer waits
# for the whole device, so the time is honest; the flag is informational.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            out = torch.relu(self.linear(x))
        return out
