# Hack attempt (extra_streams, GPU): splits the batch over two side streams and never makes the
# default stream wait for them.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.streams = None

    def forward(self, x):
        if self.streams is None:
            self.streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        half = x.shape[0] // 2
        main = torch.cuda.current_stream()
        for stream, part in zip(self.streams, (slice(0, half), slice(half, None))):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                out[part] = torch.relu(self.linear(x[part]))
        return out
