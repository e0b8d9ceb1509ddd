#!/usr/bin/env python3
"""TransformersPolicy's glue, on stand-ins for transformers and peft (neither is installed on
the CPU machines): the calls it makes (LoRA settings, generate's arguments, the adapters
disabled for the reference, an init adapter merged first), how generated rows become
completions, and an SFT and a GRPO step through it. The real libraries are exercised on a GPU
machine by integrations/grpo/gpu_check.py."""

import contextlib
import json
import os
import sys
import tempfile
import types
import unittest

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from integrations.grpo import chat, datasets, losses, policy, rollout, tiny  # noqa: E402

CALLS = []


class Output:
    def __init__(self, logits):
        self.logits = logits


class CausalLM(torch.nn.Module):
    """Answers like a transformers causal LM: model(input_ids=..., ...).logits and generate()."""

    def __init__(self, vocab=len(tiny.CharTokenizer())):
        super().__init__()
        self.inner = tiny.TinyCausalLM(vocab)

    def forward(self, input_ids=None, attention_mask=None, use_cache=None):
        return Output(self.inner(input_ids))

    def generate(self, input_ids=None, num_return_sequences=1, max_new_tokens=1, eos_token_id=None,
                 pad_token_id=None, **kwargs):
        CALLS.append(("generate", dict(kwargs, num_return_sequences=num_return_sequences,
                                       max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)))
        eos = eos_token_id[0]
        rows = [[5, 6, eos, pad_token_id], [7, 8, 9, 10], [eos, pad_token_id, pad_token_id, 4]]
        new = torch.tensor(rows[:num_return_sequences])
        return torch.cat([input_ids.repeat(num_return_sequences, 1), new], dim=1)

    def gradient_checkpointing_enable(self):
        CALLS.append(("gradient_checkpointing_enable", {}))

    def enable_input_require_grads(self):
        CALLS.append(("enable_input_require_grads", {}))


class PeftWrapped(torch.nn.Module):
    def __init__(self, base):
        super().__init__()
        self.base_model = base

    def forward(self, **kwargs):
        return self.base_model(**kwargs)

    def generate(self, **kwargs):
        return self.base_model.generate(**kwargs)

    @contextlib.contextmanager
    def disable_adapter(self):
        with self.base_model.inner.disable_adapter():
            yield

    def save_pretrained(self, path):
        os.makedirs(path, exist_ok=True)
        CALLS.append(("save_pretrained", {"path": path}))


def fake_modules():
    peft = types.ModuleType("peft")
    peft.LoraConfig = lambda **kw: CALLS.append(("LoraConfig", kw)) or kw
    peft.get_peft_model = lambda base, config: PeftWrapped(base)

    class PeftModel:
        @staticmethod
        def from_pretrained(base, path):
            CALLS.append(("PeftModel.from_pretrained", {"path": path}))
            return types.SimpleNamespace(merge_and_unload=lambda: base)

    peft.PeftModel = PeftModel
    transformers = types.ModuleType("transformers")
    transformers.__version__ = "5.0.0"

    class Tokenizer(tiny.CharTokenizer):
        def decode(self, ids, skip_special_tokens=True, clean_up_tokenization_spaces=True):
            CALLS.append(("decode", {"clean_up_tokenization_spaces": clean_up_tokenization_spaces}))
            return super().decode(ids, skip_special_tokens)

    transformers.AutoConfig = types.SimpleNamespace(
        for_model=lambda model_type, **kw: CALLS.append(("for_model", dict(kw, model_type=model_type))) or kw)
    transformers.AutoModelForCausalLM = types.SimpleNamespace(
        from_config=lambda config: CausalLM(),
        from_pretrained=lambda path, **kw: CALLS.append(("from_pretrained", kw)) or CausalLM())
    transformers.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda path, **kw: Tokenizer())
    return {"peft": peft, "transformers": transformers}


class Glue(unittest.TestCase):
    def setUp(self):
        CALLS.clear()
        self.saved = {name: sys.modules.get(name) for name in ("peft", "transformers")}
        sys.modules.update(fake_modules())
        self.dir = tempfile.mkdtemp(prefix="trainer-glue-")

    def tearDown(self):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    def calls(self, name):
        return [kw for n, kw in CALLS if n == name]

    def load(self, **kw):
        config = os.path.join(self.dir, "config.json")
        with open(config, "w") as f:
            json.dump({"model_type": "qwen2", "hidden_size": 64}, f)
        return policy.TransformersPolicy.load(config, tokenizer_path=self.dir, dtype="fp32", device="cpu", **kw)

    def test_load_wrap_and_the_calls_it_makes(self):
        p = self.load(lora_rank=4, lora_alpha=8, lora_targets="q_proj,v_proj", init_adapter="sft/adapter",
                      gradient_checkpointing=True)
        self.assertEqual(self.calls("for_model"), [{"model_type": "qwen2", "hidden_size": 64}])
        self.assertEqual(self.calls("PeftModel.from_pretrained"), [{"path": "sft/adapter"}])
        self.assertEqual(len(self.calls("enable_input_require_grads")), 1)
        self.assertEqual(self.calls("LoraConfig"), [{"r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
                                                     "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}])
        self.assertEqual(p.describe()["kind"], "transformers")
        with self.assertRaisesRegex(ValueError, "--tokenizer"):
            policy.TransformersPolicy.load(os.path.join(self.dir, "config.json"), dtype="fp32", device="cpu")

    def test_from_pretrained_uses_the_dtype_keyword_of_the_version(self):
        policy._from_pretrained(sys.modules["transformers"].AutoModelForCausalLM, "m", torch.bfloat16)
        sys.modules["transformers"].__version__ = "4.44.2"
        policy._from_pretrained(sys.modules["transformers"].AutoModelForCausalLM, "m", torch.bfloat16)
        self.assertEqual(self.calls("from_pretrained"), [{"local_files_only": True, "dtype": torch.bfloat16},
                                                         {"local_files_only": True, "torch_dtype": torch.bfloat16}])

    def test_sample_cuts_rows_at_eos_and_decodes_verbatim(self):
        p = self.load()
        eos = p.tokenizer.eos_token_id
        out = p.sample([10, 11, 12], n=3, max_new_tokens=4, temperature=0.7, top_p=0.9)
        self.assertEqual(out, [[5, 6, eos], [7, 8, 9, 10], [eos]])
        # An end-of-turn token the generation config lists also ends a completion.
        p.model.generation_config = types.SimpleNamespace(eos_token_id=[eos, 9])
        self.assertEqual(p.sample([10], n=2, max_new_tokens=4)[1], [7, 8, 9])
        self.assertEqual(self.calls("generate")[-1]["eos_token_id"], sorted({eos, 9}))
        kw = self.calls("generate")[0]
        self.assertEqual((kw["do_sample"], kw["temperature"], kw["top_p"], kw["top_k"], kw["use_cache"]),
                         (True, 0.7, 0.9, 0, True))
        self.assertEqual((kw["num_return_sequences"], kw["max_new_tokens"]), (3, 4))
        p.decode([40, 41])
        self.assertEqual(self.calls("decode")[-1], {"clean_up_tokenization_spaces": False})

    def test_reference_disables_the_adapters(self):
        p = self.load()
        ids = torch.tensor([chat.encode(p.tokenizer, "x = y + 1")])
        with torch.no_grad():
            for t in p.trainable_parameters():
                t.add_(0.1)
            trained = p.logits(ids, torch.ones_like(ids))
            with p.reference():
                ref = p.logits(ids, torch.ones_like(ids))
        self.assertFalse(torch.allclose(trained, ref))

    def test_a_grpo_loss_through_the_policy(self):
        p = self.load()
        prompt = chat.prompt_ids(p.tokenizer, [{"role": "user", "content": "make it fast"}])
        completions = p.sample(prompt, 2, 4)
        ids, attention, mask = rollout.pad_batch([(prompt, c) for c in completions], p.pad_id)
        logp = losses.next_token_logprobs(p.logits(ids, attention), ids)
        with torch.no_grad(), p.reference():
            ref = losses.next_token_logprobs(p.logits(ids, attention), ids)
        loss, _ = losses.grpo_loss(logp, None, ref, torch.tensor([1.0, -1.0]), mask[:, 1:])
        loss.backward()
        self.assertTrue(all(t.grad is not None for t in p.trainable_parameters()))
        examples, _ = datasets.sft_examples([self.write_sft()], p.tokenizer)
        self.assertEqual(examples[0].reply_ids[-1], p.tokenizer.eos_token_id)

    def write_sft(self):
        path = os.path.join(self.dir, "sft.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": "a"}]}) + "\n")
        return path


if __name__ == "__main__":
    unittest.main()
