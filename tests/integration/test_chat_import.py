"""A chat template through `gptkit model import-hf` and `export-hf`: the import carries a Hugging
Face model's template (tokenizer_config.json's chat_template, a list of named ones, or
chat_template.jinja) and the token names it renders with into the checkpoint, where gptkit renders
what transformers renders; the export writes it back, and transformers' AutoTokenizer on the
export gives the ids gptkit gives."""

import json

import pytest

from gptkit.model.hf.chat import HF_TEMPLATE_DIR
from gptkit.tokenizer.chat import CONFIG_FILE, GPTKIT_TEMPLATE, SPECIAL_TOKENS, TEMPLATE_FILE, ChatTemplate
from tests.conftest import assert_input_error
from tests.integration.test_import_hf import assert_ok, import_hf, invoke, make_hf, with_specials
from tests.unit.test_chat_template import QWEN2_TEMPLATE

transformers = pytest.importorskip("transformers")

# One that uses the token names: they must reach the template at render time.
NAMED = "{{ eos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{{ pad_token }}{% endfor %}"
CHATS = [
    [{"role": "user", "content": "Once upon a time, the little cat"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "東京 café?"},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "don't stop 42\n\n  ok"},
    ],
]
TOKEN_NAMES = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}


def qwen_dir(tmp_path, small_tokenizer, **tokenizer_config):
    """A Qwen3 model (transformers 5's AutoTokenizer gives a qwen2 one Qwen's own pre-tokenizer, whatever its
    tokenizer.json says) with Qwen's special tokens and `tokenizer_config`."""
    _, tok, _, hf_dir = make_hf(tmp_path, small_tokenizer, "qwen3")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", **TOKEN_NAMES, **tokenizer_config}
    (hf_dir / CONFIG_FILE).write_text(json.dumps(config))
    return tok, hf_dir


def gptkit_ids(ckpt, tok, chat):
    return ChatTemplate.beside(ckpt / "tokenizer.json", tok).prompt_ids(tok, chat)


def hf_ids(hf_dir, chat):
    return list(
        transformers.AutoTokenizer.from_pretrained(hf_dir).apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )


@pytest.mark.parametrize("template", [QWEN2_TEMPLATE, NAMED], ids=["qwen2", "token-names"])
def test_import_carries_the_template_and_export_writes_it_back(tmp_path, small_tokenizer, template):
    tok, hf_dir = qwen_dir(tmp_path, small_tokenizer, chat_template=template)
    ckpt = tmp_path / "ckpt"
    res = import_hf(hf_dir, ckpt)
    assert "its chat template is carried" in res.stdout
    assert (ckpt / TEMPLATE_FILE).read_text(encoding="utf-8") == template
    assert json.loads((ckpt / CONFIG_FILE).read_text()) == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    for chat in CHATS:  # gptkit renders what transformers renders from the model's own directory
        assert gptkit_ids(ckpt, tok, chat) == hf_ids(hf_dir, chat)
    assert_ok(invoke("export-hf", "--checkpoint", ckpt, "--out", tmp_path / "hf2"))
    written = json.loads((tmp_path / "hf2" / CONFIG_FILE).read_text())
    assert written["chat_template"] == template and written["eos_token"] == "<|im_end|>"
    for chat in CHATS:
        assert hf_ids(tmp_path / "hf2", chat) == gptkit_ids(ckpt, tok, chat)
    import_hf(tmp_path / "hf2", tmp_path / "again")  # the round trip keeps it
    assert {name: (tmp_path / "again" / name).read_bytes() for name in (TEMPLATE_FILE, CONFIG_FILE)} == {
        name: (ckpt / name).read_bytes() for name in (TEMPLATE_FILE, CONFIG_FILE)
    }


def test_the_jinja_file_wins_as_in_transformers_and_named_templates_keep_the_default(tmp_path, small_tokenizer):
    named = [{"name": "default", "template": NAMED}, {"name": "tool_use", "template": "{{ 'tools' }}"}]
    tok, hf_dir = qwen_dir(tmp_path, small_tokenizer, chat_template=named)
    res = import_hf(hf_dir, tmp_path / "a")
    assert "chat_template: the default is kept, the others (tool_use) are dropped" in res.stderr
    assert (tmp_path / "a" / TEMPLATE_FILE).read_text() == NAMED
    (hf_dir / TEMPLATE_FILE).write_text(QWEN2_TEMPLATE, encoding="utf-8")
    (hf_dir / HF_TEMPLATE_DIR).mkdir()
    (hf_dir / HF_TEMPLATE_DIR / "rag.jinja").write_text("{{ 'rag' }}")
    res = import_hf(hf_dir, tmp_path / "b")
    assert "the chat templates rag.jinja are dropped" in res.stderr
    assert (tmp_path / "b" / TEMPLATE_FILE).read_text() == QWEN2_TEMPLATE
    assert gptkit_ids(tmp_path / "b", tok, CHATS[1]) == hf_ids(hf_dir, CHATS[1])


def test_a_model_without_a_template_imports_and_exports_none(tmp_path, small_tokenizer):
    _, hf_dir = qwen_dir(tmp_path, small_tokenizer)
    res = import_hf(hf_dir, tmp_path / "ckpt")
    assert "chat template" not in res.stdout and not (tmp_path / "ckpt" / TEMPLATE_FILE).exists()
    assert_ok(invoke("export-hf", "--checkpoint", tmp_path / "ckpt", "--out", tmp_path / "hf2"))
    assert "chat_template" not in json.loads((tmp_path / "hf2" / CONFIG_FILE).read_text())


@pytest.mark.parametrize(
    "template, needle",
    [(42, "chat_template is not a string or a list"), ([{"name": "tool_use", "template": "x"}], 'no "default"')],
)
def test_a_bad_template_is_refused_in_one_line(tmp_path, small_tokenizer, template, needle):
    _, hf_dir = qwen_dir(tmp_path, small_tokenizer, chat_template=template)
    assert_input_error(invoke("import-hf", "--from", hf_dir, "--out", tmp_path / "ckpt"), CONFIG_FILE, needle)
    assert not (tmp_path / "ckpt").exists()


def test_gptkits_own_template_is_exported_for_a_checkpoint_with_the_chat_tokens(tmp_path, small_tokenizer):
    from gptkit.model.checkpoint import save_model
    from tests.unit.test_export import random_model

    tok = with_specials(small_tokenizer[0], SPECIAL_TOKENS)
    save_model(random_model(tok), tok, tmp_path / "ckpt", eot_id=tok.special_tokens["<|endoftext|>"])
    assert_ok(invoke("export-hf", "--checkpoint", tmp_path / "ckpt", "--out", tmp_path / "hf"))
    assert json.loads((tmp_path / "hf" / CONFIG_FILE).read_text())["chat_template"] == GPTKIT_TEMPLATE
    for chat in CHATS:
        assert hf_ids(tmp_path / "hf", chat) == gptkit_ids(tmp_path / "ckpt", tok, chat)
