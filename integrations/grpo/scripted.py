"""A scripted policy for tests: its samples are given texts (known-good and known-bad
completions), while every log-probability, the reference policy and the adapters are those of
the policy it wraps. A random tiny model writes no working kernel; with this, GRPO's rewards
differ within a group, so its advantages, loss and updates are exercised on real verdicts."""

from . import chat
from .policy import Policy


class ScriptedPolicy(Policy):
    """unique=True makes every sample's code new (a numbered comment before the closing
    fence), so the server evaluates each one instead of answering from its cache: what a
    throughput measurement needs."""

    def __init__(self, inner, texts, unique=False):
        if not texts:
            raise ValueError("a scripted policy needs at least one completion text")
        self.inner, self.texts, self.unique = inner, list(texts), unique
        self.model, self.tokenizer, self.device = inner.model, inner.tokenizer, inner.device
        self.completions = [self.encode(t) for t in texts]
        self.drawn = 0

    def encode(self, text):
        return chat.encode(self.tokenizer, text) + [self.tokenizer.eos_token_id]

    def sample(self, prompt_ids, n, max_new_tokens, temperature=1.0, top_p=1.0):
        # Member i of every group gets text i (cycling): each group holds every text.
        out = []
        for i in range(n):
            text = self.texts[i % len(self.texts)]
            if self.unique:
                self.drawn += 1
                fence = text.rfind("```")
                text = text[:fence] + f"# sample {self.drawn}\n" + text[fence:]
            out.append(self.encode(text))
        return out

    def decode(self, ids):
        return self.inner.decode(ids)

    def logits(self, input_ids, attention_mask):
        return self.inner.logits(input_ids, attention_mask)

    def reference(self):
        return self.inner.reference()

    def save_adapter(self, path):
        self.inner.save_adapter(path)

    def describe(self):
        return dict(self.inner.describe(), scripted=len(self.completions))
