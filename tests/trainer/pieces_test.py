#!/usr/bin/env python3
"""The trainer's pieces around the math: sampling with any causal LM, batch packing, chat
rendering and SFT masking, data files and their order, the tiny model's adapters."""

import json
import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from integrations.grpo import chat, datasets, rollout, tiny  # noqa: E402

CONVERSATION = [{"role": "system", "content": "You optimise PyTorch."},
                {"role": "user", "content": "Make y = 2 * x faster."},
                {"role": "assistant", "content": "```python\ny = x + x\n```"}]


def counting_logits(vocab, eos):
    """A causal LM that always predicts (last token + 1), ending at eos."""

    def logits_fn(ids):
        out = torch.full((ids.shape[0], ids.shape[1], vocab), -30.0)
        nxt = torch.clamp(ids + 1, max=eos)
        return out.scatter(-1, nxt.unsqueeze(-1), 30.0)

    return logits_fn


class Sampling(unittest.TestCase):
    def test_full_context_sampler_stops_at_eos(self):
        stepper = rollout.FullContext(counting_logits(vocab=8, eos=5))
        out = rollout.sample_completions(stepper, [1], n=2, max_new_tokens=10, eos_id=5, temperature=1.0)
        self.assertEqual(out, [[2, 3, 4, 5], [2, 3, 4, 5]])
        cut = rollout.sample_completions(stepper, [1], n=1, max_new_tokens=2, eos_id=5, temperature=0)
        self.assertEqual(cut, [[2, 3]])

    def test_top_p_keeps_the_nucleus(self):
        logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
        kept = rollout.filter_top_p(logits, 0.6)
        self.assertTrue(torch.isfinite(kept[0, :2]).all() and kept[0, 2] == float("-inf"))
        self.assertTrue(torch.equal(rollout.filter_top_p(logits, 1.0), logits))
        torch.manual_seed(0)
        draws = {int(rollout.next_tokens(logits, 1.0, 0.4)) for _ in range(50)}
        self.assertEqual(draws, {0})

    def test_window_stepper_samples_what_full_recomputation_samples(self):
        policy = tiny.TinyPolicy(seed=3)
        prompt = chat.prompt_ids(policy.tokenizer, CONVERSATION[:2])
        eos = policy.tokenizer.eos_token_id
        torch.manual_seed(7)
        fast = rollout.sample_completions(tiny.WindowStepper(policy.model), prompt, 3, 12, eos)
        torch.manual_seed(7)
        slow = rollout.sample_completions(rollout.FullContext(policy.model), prompt, 3, 12, eos)
        self.assertEqual(fast, slow)

    def test_cut_at_eos(self):
        self.assertEqual(rollout.cut_at_eos([4, 5, 1, 0, 0], {1}, pad_id=0), [4, 5, 1])
        self.assertEqual(rollout.cut_at_eos([4, 5, 0, 0], {1}, pad_id=0), [4, 5])
        self.assertEqual(rollout.cut_at_eos([4, 1, 1], {1}, pad_id=1), [4, 1])


class Packing(unittest.TestCase):
    def test_pad_batch_masks(self):
        ids, attention, completion = rollout.pad_batch([([1, 2], [3, 4, 5]), ([6], [7])], pad_id=0)
        self.assertEqual(ids.tolist(), [[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]])
        self.assertEqual(attention.tolist(), [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
        self.assertEqual(completion.tolist(), [[0, 0, 1, 1, 1], [0, 1, 0, 0, 0]])

    def test_completion_values_round_trip(self):
        _, _, completion = rollout.pad_batch([([1, 2], [3, 4, 5]), ([6], [7])], pad_id=0)
        values = torch.arange(8.0).reshape(2, 4)
        per_row = rollout.completion_logprobs_of(values, completion)
        self.assertEqual([v.tolist() for v in per_row], [[1.0, 2.0, 3.0], [4.0]])
        back = rollout.gather_completion_values(per_row, completion, 5)
        self.assertEqual(back.tolist(), [[0.0, 1.0, 2.0, 3.0], [4.0, 0.0, 0.0, 0.0]])

    def test_micro_batches(self):
        self.assertEqual(rollout.micro_batches(list(range(5)), 2), [[0, 1], [2, 3], [4]])


class TemplateTokenizer(tiny.CharTokenizer):
    """The character tokenizer with a chat template, the way transformers renders one."""

    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"[{m['role']}]{m['content']}[end]\n" for m in messages)
        return text + ("[assistant]" if add_generation_prompt else "")


class Chat(unittest.TestCase):
    def test_role_tagged_format_without_template(self):
        tokenizer = tiny.CharTokenizer()
        text = chat.render(tokenizer, CONVERSATION[:2], add_generation_prompt=True)
        self.assertEqual(text, "<|system|>\nYou optimise PyTorch.\n<|user|>\nMake y = 2 * x faster.\n<|assistant|>\n")
        prompt, reply = chat.example_ids(tokenizer, CONVERSATION)
        self.assertEqual(prompt, chat.prompt_ids(tokenizer, CONVERSATION[:2]), "SFT and GRPO prompts differ")
        self.assertEqual(tokenizer.decode(reply), CONVERSATION[2]["content"])
        self.assertEqual(reply[-1], tokenizer.eos_token_id)

    def test_chat_template_reply_is_the_rendered_suffix(self):
        tokenizer = TemplateTokenizer()
        prompt, reply = chat.example_ids(tokenizer, CONVERSATION)
        self.assertTrue(tokenizer.decode(prompt).endswith("[end]\n[assistant]"))
        self.assertEqual(tokenizer.decode(reply), "```python\ny = x + x\n```[end]\n")
        self.assertEqual(reply[-1], tokenizer.eos_token_id)

    def test_conversation_must_end_with_the_reply(self):
        with self.assertRaises(ValueError):
            chat.example_ids(tiny.CharTokenizer(), CONVERSATION[:2])


class DataFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trainer-data-")

    def write(self, name, records):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for r in records:
                f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
        return path

    def test_sft_records_with_extra_fields_cut_and_skipped(self):
        long_prompt = [dict(CONVERSATION[0], content="x" * 500)] + CONVERSATION[1:]
        path = self.write("sft.jsonl", [
            {"messages": CONVERSATION, "task": "level1/1_A", "candidate_id": 3, "stage": "sft", "speedup": 1.4,
             "verdict": {"status": "ok"}},
            "",
            {"messages": long_prompt, "task": "level1/1_A"},
        ])
        tokenizer = tiny.CharTokenizer()
        examples, skipped = datasets.sft_examples([path], tokenizer, max_tokens=90)
        self.assertEqual((len(examples), skipped), (1, 1))
        self.assertEqual(examples[0].task, "level1/1_A")
        self.assertEqual(len(examples[0].prompt_ids) + len(examples[0].reply_ids), 90)  # the reply was cut

    def test_bad_records_name_file_and_line(self):
        path = self.write("bad.jsonl", [{"messages": CONVERSATION}, {"messages": "hello"}])
        with self.assertRaisesRegex(datasets.DataError, r"bad\.jsonl:2: \"messages\""):
            datasets.sft_examples([path], tiny.CharTokenizer())
        path = self.write("bad2.jsonl", ["{oops"])
        with self.assertRaisesRegex(datasets.DataError, r"bad2\.jsonl:1: not valid JSON"):
            datasets.read_jsonl(path)

    def test_batch_order_covers_each_epoch_and_is_a_function_of_the_step(self):
        seen = [i for step in range(5) for i in datasets.batch_indices(step, 2, 10, seed=4)]
        self.assertEqual(sorted(seen), list(range(10)))
        self.assertEqual(datasets.batch_indices(7, 3, 10, 4), datasets.batch_indices(7, 3, 10, 4))
        self.assertNotEqual(datasets.batch_indices(0, 10, 10, 4), datasets.batch_indices(1, 10, 10, 4),
                            "each epoch has its own order")

    def test_rl_prompt_file(self):
        path = self.write("rl.jsonl", [{"prompt": CONVERSATION[:2], "task": "level1/1_A", "pool": 3},
                                       {"prompt": CONVERSATION, "task": "level1/2_B"}])
        prompts = datasets.FilePrompts(path, seed=1, per_step=2)
        drawn = sorted(prompts.prompt(0, i).task for i in range(2))
        self.assertEqual(drawn, ["level1/1_A", "level1/2_B"])
        only_b = datasets.FilePrompts(path, seed=1, per_step=1, tasks={"level1/2_B"})
        self.assertEqual([m["role"] for m in only_b.prompt(5, 0).messages], ["system", "user"])
        with self.assertRaisesRegex(datasets.DataError, "no prompt"):
            datasets.FilePrompts(path, seed=1, per_step=1, tasks={"level1/9_C"})


class TinyAdapters(unittest.TestCase):
    def test_fresh_adapter_is_the_reference_and_merge_keeps_the_function(self):
        policy = tiny.TinyPolicy(seed=1)
        ids = torch.tensor([chat.encode(policy.tokenizer, "def f(x): return x")])
        with policy.reference():
            ref = policy.logits(ids)
        self.assertTrue(torch.allclose(policy.logits(ids), ref), "a fresh LoRA adapter changes nothing")
        with torch.no_grad():
            for p in policy.trainable_parameters():
                p.add_(0.05 * torch.randn_like(p))
        trained = policy.logits(ids).detach()
        self.assertFalse(torch.allclose(trained, ref))
        with policy.reference():
            self.assertTrue(torch.allclose(policy.logits(ids), ref), "the reference is the base model")
        saved = tempfile.mkdtemp(prefix="tiny-adapter-")
        policy.save_adapter(saved)
        merged = tiny.TinyPolicy(seed=1, init_adapter=saved)
        with merged.reference():
            self.assertTrue(torch.allclose(merged.logits(ids), trained, atol=1e-5),
                            "after --init-adapter the trained model is the reference")


if __name__ == "__main__":
    unittest.main()
