#!/usr/bin/env python3
"""A build worker's build step for a GPU it does not have (extension_builds.answer_as_gpu): the
questions a candidate asks before it builds are answered as on the GPU's host, and moving its
weights to the GPU leaves them on the CPU, so its constructor gets to its build. Runs in a
process of its own (the patches are for the rest of the process), on any PyTorch."""

import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "worker", "python"))

import torch  # noqa: E402

import extension_builds  # noqa: E402


class AnswerAsGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        extension_builds.answer_as_gpu("9.0")

    def test_queries_answer_as_the_gpu_host(self):
        self.assertTrue(torch.cuda.is_available())
        self.assertEqual(torch.cuda.device_count(), 1)
        self.assertEqual(torch.cuda.current_device(), 0)
        self.assertEqual(torch.cuda.get_device_capability(), (9, 0))

    def test_a_constructor_that_moves_its_weights_gets_to_its_build(self):
        reached = []

        class Candidate(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 4).cuda()
                self.scale = torch.ones(4).cuda().to("cuda:0")
                self.other = torch.zeros(2).to(device=torch.device("cuda"), dtype=torch.float64)
                self.to("cuda")
                if torch.cuda.is_available():
                    reached.append("load_inline")  # where a candidate would build

        model = Candidate()
        self.assertEqual(reached, ["load_inline"])
        self.assertEqual(model.scale.device.type, "cpu")
        self.assertEqual(model.other.dtype, torch.float64)
        self.assertEqual(model.other.device.type, "cpu")
        self.assertEqual(next(model.parameters()).device.type, "cpu")

    def test_other_moves_are_unchanged(self):
        self.assertEqual(torch.ones(2).to(torch.float16).dtype, torch.float16)
        self.assertEqual(torch.ones(2).to("cpu").device.type, "cpu")


if __name__ == "__main__":
    unittest.main()
