"""Chat templates (tokenizer/chat.py): the ids of a conversation are transformers'
apply_chat_template's, for the real templates of Qwen2 and Llama 3 over tokenizers of their
shapes, and the mask covers exactly the assistant's replies and the end-of-turn token closing each."""
import json

import pytest

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError
from gptkit.tokenizer import Tokenizer, split, train_bpe
from gptkit.tokenizer.chat import SPECIAL_TOKENS, TEMPLATE_FILE, ChatError, ChatTemplate

from tests.conftest import english_like

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")
from tokenizers import Regex, decoders, normalizers, pre_tokenizers, trainers  # noqa: E402 (after the skips)

# The templates as Qwen2-7B-Instruct's and Meta-Llama-3-8B-Instruct's tokenizer_config.json give them.
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
MODELS = {  # name: (pattern, normalizers, special tokens, template, tokenizer_config.json, end of turn)
    "qwen2": (split.QWEN2_PATTERN, ("NFC",), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], QWEN2_TEMPLATE,
              {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}, "<|im_end|>"),
    "llama3": (split.LLAMA3_PATTERN, (), ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                         "<|eot_id|>"], LLAMA3_TEMPLATE,
               {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "<|eot_id|>"),
}
CONVERSATIONS = [
    [{"role": "user", "content": "Hello there!"}, {"role": "assistant", "content": "Hi. How can I help?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2 + 2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And café × 3?\n\nThink."},
     {"role": "assistant", "content": "\nThat is not a number, it's a café. 東京 ☕"}],
    [{"role": "user", "content": "  leading spaces"}, {"role": "assistant", "content": "  and trailing  \n"},
     {"role": "user", "content": "Noted."}],
    [{"role": "system", "content": "Only a system message."}, {"role": "user", "content": "No reply yet"}],
]


def hf_model_dir(directory, name):
    """A tokenizer of the shape of model `name`'s (MODELS) trained by HF `tokenizers`, with its
    chat template and tokenizer_config.json beside it, as `model import-hf` leaves them; returns
    transformers' tokenizer of it."""
    pattern, names, specials, template, config, _ = MODELS[name]
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    if names:
        hf.normalizer = normalizers.Sequence([getattr(normalizers, n)() for n in names])
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator([english_like(3000), "You are a helpful assistant. user assistant system"], trainer=trainer)
    directory.mkdir(parents=True, exist_ok=True)
    hf.save(str(directory / "tokenizer.json"))
    (directory / TEMPLATE_FILE).write_text(template)
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"), chat_template=template,
                                                **{k: v for k, v in config.items() if v})


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    """(ours: the tokenizer and ChatTemplate.beside it, transformers' tokenizer, end of turn)."""
    directory = tmp_path_factory.mktemp(request.param)
    theirs = hf_model_dir(directory, request.param)
    tokenizer = Tokenizer.from_file(directory / "tokenizer.json")
    return tokenizer, ChatTemplate.beside(directory / "tokenizer.json"), theirs, MODELS[request.param][-1]


def their_ids(theirs, messages, **options):
    return theirs.apply_chat_template(messages, tokenize=True, **options)["input_ids"]


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_ids_are_transformers(model, messages):
    tokenizer, template, theirs, _ = model
    assert template.render(messages) == theirs.apply_chat_template(messages, tokenize=False)
    ids, mask = template.encode(tokenizer, messages)
    assert ids == their_ids(theirs, messages)
    assert len(mask) == len(ids)
    assert template.prompt_ids(tokenizer, messages) == their_ids(theirs, messages, add_generation_prompt=True)


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_mask_is_the_assistants_replies(model, messages):
    """The masked tokens, run by run, are each reply (as the template writes it: Llama 3 trims it)
    followed by the end-of-turn token; nothing else."""
    tokenizer, template, _, end = model
    ids, mask = template.encode(tokenizer, messages)
    runs, current = [], []
    for i, m in zip(ids, mask):
        if m:
            current.append(i)
        elif current:
            runs, current = runs + [current], []
    runs += [current] if current else []
    trim = str.strip if end == "<|eot_id|>" else (lambda s: s)
    assert [tokenizer.decode(run) for run in runs] == [trim(m["content"]) + end for m in messages if m["role"] == "assistant"]
    assert template.stops == (end,) and template.stop_ids == {tokenizer.special_tokens[end]}


def gptkit_tokenizer(directory, special_tokens=("<|endoftext|>", *SPECIAL_TOKENS)):
    """A small tokenizer of ours, saved in `directory`."""
    (directory / "corpus.txt").write_text(english_like(500))
    tokenizer = train_bpe(Corpus([directory / "corpus.txt"]), 300, list(special_tokens), quiet=True)
    tokenizer.save(directory / "tokenizer.json")
    return tokenizer


def test_gptkit_template(tmp_path):
    """A tokenizer trained with gptkit's chat tokens and no template file takes gptkit's template."""
    tokenizer = gptkit_tokenizer(tmp_path)
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    assert template.is_gptkit and template.stops == ("<|end|>",)
    messages = CONVERSATIONS[1]
    assert template.render(messages[:3], add_generation_prompt=True) == (
        "<|system|>You are terse.<|end|><|user|>2 + 2?<|end|><|assistant|>4<|end|><|assistant|>")
    ids, mask = template.encode(tokenizer, messages)
    assert tokenizer.decode([i for i, m in zip(ids, mask) if m]) == "4<|end|>" + messages[4]["content"] + "<|end|>"
    with pytest.raises(ChatError, match="role tool: gptkit's chat template knows system, user and assistant"):
        template.render([{"role": "tool", "content": "x"}])


def test_no_template_no_chat_tokens(tmp_path):
    gptkit_tokenizer(tmp_path, ["<|endoftext|>"])
    with pytest.raises(InputError, match=r"tokenizer.json: no chat template .*chat_template.jinja is missing.*"
                                         r"tokenizer train --chat"):
        ChatTemplate.beside(tmp_path / "tokenizer.json")


def test_template_breaking_the_prefix_property_is_refused(tmp_path):
    """A template that renders earlier turns differently once later ones follow (as Qwen3's drops
    earlier reasoning) leaves no way to find the assistant's tokens by prefixes."""
    tokenizer = gptkit_tokenizer(tmp_path)
    (tmp_path / TEMPLATE_FILE).write_text(
        "{% for m in messages %}<|{{ m.role }}|>{% if m.role == 'assistant' and not loop.last %}...{% else %}"
        "{{ m.content }}{% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    with pytest.raises(ChatError, match=r"chat_template.jinja: rendering the first 2 message\(s\) is not a beginning"):
        template.encode(tokenizer, messages)


def test_template_errors_are_one_line(tmp_path):
    tokenizer = gptkit_tokenizer(tmp_path)
    (tmp_path / TEMPLATE_FILE).write_text("{% if messages[0]['role'] != 'user' %}{{ raise_exception('users first') }}"
                                          "{% endif %}{{ messages[0].content }}")
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    with pytest.raises(ChatError, match=r"chat_template.jinja: TemplateError: users first$"):
        template.render([{"role": "system", "content": "x"}])
    (tmp_path / TEMPLATE_FILE).write_text("{% for %}")
    with pytest.raises(ChatError, match=r"chat_template.jinja: not a Jinja template \(TemplateSyntaxError"):
        ChatTemplate.beside(tmp_path / "tokenizer.json")
