"""cudal1's one-GPU trainer: SFT and GRPO of LoRA adapters on transformers + peft, with rewards,
advantages and contrastive prompts from `cudal1 serve`. See README.md in this directory.

The math (losses), sampling (rollout), data order (datasets) and checkpointing import only
PyTorch; transformers and peft are imported when a transformers model is loaded (policy).
"""
