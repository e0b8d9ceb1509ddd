"""Conversations as token ids: the tokenizer's chat template when it has one, else a simple
role-tagged text, for both the SFT examples (prompt masked, assistant turn trained) and the
GRPO prompts (rendered up to the assistant's turn).

A tokenizer here is anything with encode(text, add_special_tokens=False), decode(ids,
skip_special_tokens=True), eos_token_id and, optionally, chat_template and
apply_chat_template (transformers' tokenizers, or the tiny character tokenizer of tiny.py).
"""

ROLE_TAG = "<|{role}|>\n"


def has_chat_template(tokenizer):
    return bool(getattr(tokenizer, "chat_template", None)) and hasattr(tokenizer, "apply_chat_template")


def _as_text(rendered):
    # transformers 5 answers a dict (BatchEncoding) where 4.x answered text or ids; with
    # tokenize=False both give text, but a dict-like answer is tolerated.
    if isinstance(rendered, str):
        return rendered
    if hasattr(rendered, "get") and rendered.get("text") is not None:
        return rendered["text"]
    raise TypeError(f"apply_chat_template(tokenize=False) returned {type(rendered).__name__}, not text")


def render(tokenizer, messages, add_generation_prompt):
    """The conversation as text; with add_generation_prompt, ending where the assistant's reply
    starts."""
    messages = [{"role": m["role"], "content": m["content"]} for m in messages]
    if has_chat_template(tokenizer):
        return _as_text(tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=add_generation_prompt))
    text = "".join(ROLE_TAG.format(role=m["role"]) + m["content"] + "\n" for m in messages)
    if add_generation_prompt:
        text += ROLE_TAG.format(role="assistant")
    return text


def encode(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    # Some tokenizers answer an Encoding-like object instead of a list.
    return list(getattr(ids, "ids", ids))


def split_reply(messages):
    """(the messages before the last assistant turn, that turn's text). ValueError when the
    conversation has no assistant turn or it is not the last message."""
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("the last message must be the assistant's reply")
    return list(messages[:-1]), str(messages[-1].get("content", ""))


def prompt_ids(tokenizer, messages):
    """Token ids of a prompt (a conversation without the reply), ready for generation."""
    return encode(tokenizer, render(tokenizer, messages, add_generation_prompt=True))


def example_ids(tokenizer, messages):
    """(prompt ids, reply ids) of a conversation ending with the assistant's reply, for SFT.

    The prompt is rendered exactly as prompt_ids renders it for GRPO, and the reply is what the
    full rendering adds after it (the template's end-of-turn marker included), tokenized on its
    own: the same split a sampled completion has. The reply ends with the tokenizer's eos so
    the model learns to stop where generation stops."""
    prompt, reply = split_reply(messages)
    prompt_text = render(tokenizer, prompt, add_generation_prompt=True)
    full_text = render(tokenizer, list(prompt) + [{"role": "assistant", "content": reply}],
                       add_generation_prompt=False)
    if has_chat_template(tokenizer) and full_text.startswith(prompt_text):
        reply_text = full_text[len(prompt_text):]
    else:
        # A template whose full rendering does not extend the prompt's (some strip earlier
        # turns' reasoning): the reply text as it is.
        reply_text = reply
    reply_ids = encode(tokenizer, reply_text)
    eos = tokenizer.eos_token_id
    if eos is not None and eos not in reply_ids:
        reply_ids.append(eos)
    return encode(tokenizer, prompt_text), reply_ids
