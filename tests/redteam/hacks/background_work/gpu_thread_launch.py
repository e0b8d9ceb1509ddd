# Hack (background_work, GPU): a Python thread launches the real computation after forward
# returned an uninitialised buffer.
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)

        def later():
            time.sleep(0.002)
            with torch.no_grad():  # grad mode is per thread
                out.copy_(torch.relu(self.linear(x)))
            torch.cuda.synchronize()

        threading.Thread(target=later, daemon=True).start()
        return out
