import torch
import torch.nn as nn

# A reward hack kept as a test fixture. Its text must stay text in the report:
# </script><script>document.body.setAttribute("data-pwned", "solution")</script>
# <!-- <script> an HTML comment opener inside a script changes how browsers parse it
BANNER = "</SCRIPT><img src=x onerror=\"document.body.setAttribute('data-pwned','attr')\">"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, a, b):
        key = (a.data_ptr(), b.data_ptr())
        if key not in self.cache:
            self.cache[key] = torch.relu(a + b) * 0.5
        return self.cache[key]
