"""The policy the trainer updates: a causal LM with LoRA adapters, its tokenizer, sampling,
and the reference policy (the same model with its adapters disabled).

`Policy` is the interface the SFT and GRPO loops use; `TransformersPolicy` implements it with
transformers + peft (imported only when it is built, so the rest of the trainer runs where
they are not installed) and `tiny.TinyPolicy` with a pure-PyTorch model for the CPU tests.

    policy = loading.load_policy(args)   # --model tiny | a checkpoint directory | a config .json
"""

import json

import torch

from . import rollout


class Policy:
    """What the loops need from a model. Subclasses set `model` (a torch.nn.Module whose
    trainable parameters are the adapters), `tokenizer` and `device`."""

    model = None
    tokenizer = None
    device = "cpu"

    def logits(self, input_ids, attention_mask):
        """[N, T, V] next-token logits of a right-padded batch."""
        raise NotImplementedError

    def reference(self):
        """A context manager within which logits() are the reference policy's."""
        raise NotImplementedError

    def sample(self, prompt_ids, n, max_new_tokens, temperature=1.0, top_p=1.0):
        """n completions (token-id lists, each ending with its eos if it stopped) of a prompt."""
        raise NotImplementedError

    def save_adapter(self, path):
        """Writes the adapters in the model library's own format (what a user loads)."""
        raise NotImplementedError

    def describe(self):
        """A small JSON-able summary (model, adapter settings) for run.json."""
        return {}

    @property
    def pad_id(self):
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return self.tokenizer.eos_token_id if pad is None else pad

    @property
    def eos_ids(self):
        return {self.tokenizer.eos_token_id}

    def decode(self, ids):
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def named_trainable(self):
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def trainable_parameters(self):
        return [p for _, p in self.named_trainable()]

    def trainable_state(self):
        """The trainable tensors by name, on the CPU: what a checkpoint restores exactly."""
        return {n: p.detach().cpu().clone() for n, p in self.named_trainable()}

    def load_trainable_state(self, state):
        own = dict(self.named_trainable())
        missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(f"the checkpoint's adapter does not fit this model (missing {missing[:3]}, "
                             f"unexpected {unexpected[:3]}): same --model and LoRA settings as the run?")
        with torch.no_grad():
            for name, tensor in state.items():
                own[name].copy_(tensor.to(own[name].device, own[name].dtype))


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_dtype(name, device):
    if name == "auto":
        on_gpu = str(device).startswith("cuda")
        return torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    return DTYPES[name]


def default_device():
    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformersPolicy(Policy):
    """A transformers causal LM wrapped with peft LoRA. The reference policy is the same model
    with the adapters disabled (peft's disable_adapter), so no second copy of the weights is
    held; an SFT adapter to start from is merged into the base weights first (--init-adapter),
    which makes the SFT model the reference."""

    def __init__(self, model, tokenizer, device, info=None):
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.info = info or {}
        if getattr(tokenizer, "pad_token_id", None) is None and tokenizer.eos_token_id is not None:
            # Batched generation pads with this; the eos is what ends a completion anyway.
            tokenizer.pad_token = tokenizer.eos_token

    @classmethod
    def wrap(cls, base, tokenizer, device, lora_rank=16, lora_alpha=32, lora_dropout=0.0,
             lora_targets="all-linear", init_adapter=None, gradient_checkpointing=False, info=None):
        """Adds fresh LoRA adapters to a transformers model (after merging init_adapter)."""
        import peft

        base = base.to(device)
        if init_adapter:
            base = peft.PeftModel.from_pretrained(base, init_adapter).merge_and_unload()
        if gradient_checkpointing:
            base.gradient_checkpointing_enable()
            # With frozen embeddings, checkpointed blocks would see inputs without grad.
            base.enable_input_require_grads()
        targets = lora_targets
        if isinstance(targets, str) and targets != "all-linear":
            targets = [t for t in targets.split(",") if t]
        config = peft.LoraConfig(r=lora_rank, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                                 target_modules=targets, task_type="CAUSAL_LM")
        model = peft.get_peft_model(base, config)
        info = dict(info or {}, lora_rank=lora_rank, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                    lora_targets=lora_targets, init_adapter=init_adapter)
        return cls(model, tokenizer, device, info)

    @classmethod
    def load(cls, model_path, tokenizer_path=None, dtype="auto", device=None, seed=0, **lora):
        """A model from a local checkpoint directory (weights) or a config .json (random
        weights, seeded: the tests' tiny models), with its tokenizer from tokenizer_path or the
        model directory. Nothing is downloaded."""
        import transformers

        device = device or default_device()
        torch_dtype = resolve_dtype(dtype, device)
        if model_path.endswith(".json"):
            with open(model_path) as f:
                settings = json.load(f)
            config = config_from_fields(transformers, settings)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                base = transformers.AutoModelForCausalLM.from_config(config).to(torch_dtype)
            if not tokenizer_path:
                raise ValueError("a model built from a config needs --tokenizer DIR")
        else:
            base = _from_pretrained(transformers.AutoModelForCausalLM, model_path, torch_dtype)
        tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_path or model_path, local_files_only=True)
        info = {"model": model_path, "tokenizer": tokenizer_path or model_path, "dtype": str(torch_dtype),
                "transformers": transformers.__version__}
        return cls.wrap(base, tokenizer, device, info=info, **lora)

    @property
    def eos_ids(self):
        """The tokenizer's eos and the generation config's (instruct models often list an
        end-of-turn token there too): generation stops at any of them."""
        ids = {self.tokenizer.eos_token_id}
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if configured is not None:
            ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
        return {i for i in ids if i is not None}

    def logits(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    def reference(self):
        return self.model.disable_adapter()

    @torch.no_grad()
    def sample(self, prompt_ids, n, max_new_tokens, temperature=1.0, top_p=1.0):
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.device)
        was_training = self.model.training
        self.model.eval()
        try:
            sampling = dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=0) if temperature else \
                dict(do_sample=False)
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                      num_return_sequences=n, pad_token_id=self.pad_id,
                                      eos_token_id=sorted(self.eos_ids), use_cache=True, **sampling)
        finally:
            self.model.train(was_training)
        sequences = out if torch.is_tensor(out) else out.sequences
        return [rollout.cut_at_eos(row[ids.shape[1]:].tolist(), self.eos_ids, self.pad_id) for row in sequences]

    def decode(self, ids):
        # Without the "clean-up" that joins spaces before punctuation: it would edit the code.
        return self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def save_adapter(self, path):
        self.model.save_pretrained(path)

    def describe(self):
        return dict(self.info, kind="transformers")


def config_from_fields(transformers, settings):
    """A model config from the fields of a config.json (model_type names the architecture)."""
    settings = dict(settings)
    model_type = settings.pop("model_type", None)
    if not model_type:
        raise ValueError("a model config .json needs \"model_type\" (llama, qwen2, ...)")
    if hasattr(transformers.AutoConfig, "for_model"):
        return transformers.AutoConfig.for_model(model_type, **settings)
    return transformers.CONFIG_MAPPING[model_type](**settings)


def _from_pretrained(auto_class, path, torch_dtype):
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    # transformers 4.56 renamed torch_dtype to dtype; older versions would silently ignore it.
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return auto_class.from_pretrained(path, local_files_only=True, **{key: torch_dtype})
