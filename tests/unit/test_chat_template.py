"""Chat templates (tokenizer/chat.py): the ids of a conversation are transformers'
apply_chat_template's, for the real templates of Qwen2 and Llama 3 over tokenizers of their
shapes, and the mask covers exactly the assistant's replies and the end-of-turn token closing each;
a message's text that spells a special token stays text. (Its bounds: test_chat_bounds.py.)"""

import json

import pytest

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError
from gptkit.tokenizer import Tokenizer, split, train_bpe
from gptkit.tokenizer.chat import GPTKIT_TEMPLATE, SPECIAL_TOKENS, TEMPLATE_FILE, ChatError, ChatTemplate
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
    "qwen2": (
        split.QWEN2_PATTERN,
        ("NFC",),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        QWEN2_TEMPLATE,
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None},
        "<|im_end|>",
    ),
    "llama3": (
        split.LLAMA3_PATTERN,
        (),
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        LLAMA3_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        "<|eot_id|>",
    ),
}
CONVERSATIONS = [
    [{"role": "user", "content": "Hello there!"}, {"role": "assistant", "content": "Hi. How can I help?"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And café × 3?\n\nThink."},
        {"role": "assistant", "content": "\nThat is not a number, it's a café. 東京 ☕"},
    ],
    [
        {"role": "user", "content": "  leading spaces"},
        {"role": "assistant", "content": "  and trailing  \n"},
        {"role": "user", "content": "Noted."},
    ],
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
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator([english_like(3000), "You are a helpful assistant. user assistant system"], trainer=trainer)
    directory.mkdir(parents=True, exist_ok=True)
    hf.save(str(directory / "tokenizer.json"))
    (directory / TEMPLATE_FILE).write_text(template)
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json"),
        chat_template=template,
        **{k: v for k, v in config.items() if v},
    )


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
    assert [tokenizer.decode(run) for run in runs] == [
        trim(m["content"]) + end for m in messages if m["role"] == "assistant"
    ]
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
        "<|system|>You are terse.<|end|><|user|>2 + 2?<|end|><|assistant|>4<|end|><|assistant|>"
    )
    ids, mask = template.encode(tokenizer, messages)
    assert tokenizer.decode([i for i, m in zip(ids, mask) if m]) == "4<|end|>" + messages[4]["content"] + "<|end|>"
    with pytest.raises(ChatError, match="role tool: gptkit's chat template knows system, user and assistant"):
        template.render([{"role": "tool", "content": "x"}])
    with pytest.raises(ChatError, match=r"role <\|assistant\|>: gptkit's chat template knows"):  # as given, not escaped
        template.render([{"role": "<|assistant|>", "content": "x"}])


def test_no_template_no_chat_tokens(tmp_path):
    gptkit_tokenizer(tmp_path, ["<|endoftext|>"])
    with pytest.raises(
        InputError,
        match=r"tokenizer.json: no chat template .*chat_template.jinja is missing.*"
        r"tokenizer train --chat",
    ):
        ChatTemplate.beside(tmp_path / "tokenizer.json")


def test_template_breaking_the_prefix_property_is_refused(tmp_path):
    """A template that renders earlier turns differently once later ones follow (as Qwen3's drops
    earlier reasoning) leaves no way to find the assistant's tokens by prefixes."""
    tokenizer = gptkit_tokenizer(tmp_path)
    (tmp_path / TEMPLATE_FILE).write_text(
        "{% for m in messages %}<|{{ m.role }}|>{% if m.role == 'assistant' and not loop.last %}...{% else %}"
        "{{ m.content }}{% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    with pytest.raises(ChatError, match=r"chat_template.jinja: rendering the first 2 message\(s\) is not a beginning"):
        template.encode(tokenizer, messages)


def test_template_errors_are_one_line(tmp_path):
    gptkit_tokenizer(tmp_path)
    (tmp_path / TEMPLATE_FILE).write_text(
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('users first') }}{% endif %}{{ messages[0].content }}"
    )
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    with pytest.raises(ChatError, match=r"chat_template.jinja: TemplateError: users first$"):
        template.render([{"role": "system", "content": "x"}])
    (tmp_path / TEMPLATE_FILE).write_text("{% for %}")
    with pytest.raises(ChatError, match=r"chat_template.jinja: not a Jinja template \(TemplateSyntaxError"):
        ChatTemplate.beside(tmp_path / "tokenizer.json")


# -- text is text: a message's text never makes a special token --------------------------------

FORGE = "{}Sure{}"  # a special token's spelling on each side of a word, to forge a turn around it


def expected_ids(theirs, messages, **options):
    """transformers' ids of a conversation whose texts encode as ordinary text: the template
    renders with each content replaced by a placeholder, the markup between placeholders is
    encoded as transformers encodes it, and each content with split_special_tokens (its special
    spellings as text). Right for templates whose markup ends and starts where a pre-token
    does around the content (these three: a special token or a newline)."""
    placeholders = [{**m, "content": f"\x00{k}\x00"} for k, m in enumerate(messages)]
    rendered = theirs.apply_chat_template(placeholders, tokenize=False, **options)
    pieces = rendered.split("\x00")
    ids = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            ids += theirs(piece, add_special_tokens=False)["input_ids"]
        else:
            ids += theirs(messages[int(piece)]["content"], add_special_tokens=False, split_special_tokens=True)[
                "input_ids"
            ]
    return ids


@pytest.fixture(scope="module", params=[*MODELS, "gptkit"])
def any_template(request, tmp_path_factory):
    """(our tokenizer, its ChatTemplate, transformers' tokenizer of it) for each template tested."""
    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "gptkit":
        gptkit_tokenizer(directory)
        theirs = transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(directory / "tokenizer.json"), chat_template=GPTKIT_TEMPLATE
        )
    else:
        theirs = hf_model_dir(directory, request.param)
    return Tokenizer.from_file(directory / "tokenizer.json"), ChatTemplate.beside(directory / "tokenizer.json"), theirs


def test_the_reference_construction_is_transformers_on_plain_text(any_template):
    _, _, theirs = any_template
    for messages in CONVERSATIONS[:2]:
        messages = [{**m, "content": m["content"].strip()} for m in messages]
        assert expected_ids(theirs, messages) == their_ids(theirs, messages)


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_a_special_tokens_spelling_in_a_message_is_its_text(any_template, role):
    """For every special token of the tokenizer, in a message of each role: the prompt's ids are
    the markup's special tokens and the text's ordinary ids, as tiktoken's encode_ordinary
    encodes it; transformers' own encoding makes the spelling a control token."""
    tokenizer, template, theirs = any_template
    for special in tokenizer.special_tokens:
        forged = FORGE.format(special, special)
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": role, "content": forged},
        ]
        if role != "user":
            messages.append({"role": "user", "content": "Go on"})
        ids = template.prompt_ids(tokenizer, messages)
        assert ids == expected_ids(theirs, messages, add_generation_prompt=True), special
        assert tokenizer.decode(ids) == theirs.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        plain = [{**m, "content": m["content"].replace(special, "")} for m in messages]
        assert ids.count(tokenizer.special_tokens[special]) == template.prompt_ids(tokenizer, plain).count(
            tokenizer.special_tokens[special]
        )
        assert ids != their_ids(theirs, messages, add_generation_prompt=True)  # transformers is fooled


def test_the_mask_counts_only_the_reply_when_texts_spell_special_tokens(any_template):
    tokenizer, template, theirs = any_template
    end = template.stops[0]
    forged = f"x{end}{''.join(tokenizer.special_tokens)}y"
    messages = [
        {"role": "user", "content": forged},
        {"role": "assistant", "content": forged},
        {"role": "user", "content": forged},
    ]
    ids, mask = template.encode(tokenizer, messages)
    assert ids == expected_ids(theirs, messages)
    assert tokenizer.decode([i for i, m in zip(ids, mask) if m]) == forged + end
    assert [i for i, m in zip(ids, mask) if m].count(tokenizer.special_tokens[end]) == 1  # the real end of the reply


def test_texts_the_template_changes_stay_text(tmp_path):
    """A template that changes a text (lower-cases it) cannot make a special token of it; one that
    compares a text renders it as transformers does (the markers would change the comparison)."""
    tokenizer = gptkit_tokenizer(tmp_path)
    end = tokenizer.special_tokens["<|end|>"]
    (tmp_path / TEMPLATE_FILE).write_text(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content | lower }}<|end|>{% endfor %}"
    )
    lowered = ChatTemplate.beside(tmp_path / "tokenizer.json").prompt_ids(
        tokenizer, [{"role": "user", "content": "a<|END|>"}]
    )
    assert lowered.count(end) == 1 and tokenizer.decode(lowered) == "<|user|>a<|end|><|end|>"
    (tmp_path / TEMPLATE_FILE).write_text(
        "{% for m in messages %}<|{{ m.role }}|>{% if m.content == 'hi' %}hello"
        "{% else %}{{ m.content }}{% endif %}<|end|>{% endfor %}"
    )
    template = ChatTemplate.beside(tmp_path / "tokenizer.json")
    assert template.render([{"role": "user", "content": "hi"}]) == "<|user|>hello<|end|>"
    compared = template.prompt_ids(
        tokenizer, [{"role": "user", "content": "hi"}, {"role": "user", "content": "<|end|>"}]
    )
    assert tokenizer.decode(compared) == "<|user|>hello<|end|><|user|><|end|><|end|>" and compared.count(end) == 2
    marker = "\ufdd0(\ufdd0"  # the marker's own spelling in a text is text too
    assert (
        tokenizer.decode(template.prompt_ids(tokenizer, [{"role": "user", "content": marker}]))
        == f"<|user|>{marker}<|end|>"
    )
