"""A Hugging Face model's chat template, both ways. The import reads it (chat_template.jinja,
which transformers reads first, else tokenizer_config.json's chat_template) with the
special-token names transformers renders it with (tokenizer_config.json's bos_token, eos_token,
...), and writes both beside the checkpoint's tokenizer.json, where tokenizer/chat.py's
ChatTemplate.beside reads them: chat_template.jinja and a tokenizer_config.json of those names.
The export writes the checkpoint's template (gptkit's own where its tokenizer has the chat tokens)
and names back into tokenizer_config.json, so that transformers renders what gptkit renders."""

from __future__ import annotations

import json
from pathlib import Path

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, regular_file
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import CONFIG_FILE, SPECIAL_TOKENS, TEMPLATE_FILE, ChatTemplate, config_template, token_names

from ..checkpoint import TOKENIZER_FILE, checkpoint_directory
from .files import read_json_object

HF_TEMPLATE_DIR = "additional_chat_templates"  # transformers' other named templates, one .jinja file each
CHECKPOINT_FILES = (TEMPLATE_FILE, CONFIG_FILE)  # what an imported checkpoint may carry beside its tokenizer.json


def read_chat_template(hf_dir: Path, notes: list[str]) -> tuple[str | None, dict[str, str]]:
    """(the template, {bos_token: its text, ...}) of a Hugging Face directory, or (None, {}) where
    it has none. Of named templates the "default" is kept; the others are dropped, with a note."""
    config_path = hf_dir / CONFIG_FILE
    config = read_json_object(config_path) if config_path.exists() else {}
    template, dropped = config_template(config, config_path)
    if dropped:
        notes.append(
            f"{CONFIG_FILE}: chat_template: the default is kept, the others ({', '.join(dropped)}) are dropped"
        )
    file = hf_dir / TEMPLATE_FILE
    if file.exists():  # transformers' order: the file before tokenizer_config.json's field
        try:
            template = regular_file(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{file}: not a readable UTF-8 file ({e})") from None
    others = sorted(p.name for p in (hf_dir / HF_TEMPLATE_DIR).glob("*.jinja"))
    if others:
        notes.append(
            f"{HF_TEMPLATE_DIR}/: the chat templates {', '.join(others)} are dropped (a checkpoint carries "
            "the default one)"
        )
    if template is None:
        return None, {}
    return template, token_names(config, config_path)


def checkpoint_files(template: str | None, names: dict) -> dict:
    """save_model's extra_files that carry `template` and its `names` (none without a template)."""
    if template is None:
        return {}
    return {
        TEMPLATE_FILE: lambda path: path.write_text(template, encoding="utf-8"),
        CONFIG_FILE: lambda path: path.write_text(
            json.dumps(names, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        ),
    }


def checkpoint_template(checkpoint: StrPath, tokenizer: Tokenizer) -> ChatTemplate | None:
    """The chat template a checkpoint renders with (ChatTemplate.beside its tokenizer.json), None
    where it has none: no template file and not gptkit's chat tokens. One it has but cannot
    read is an error, not None."""
    path = checkpoint_directory(checkpoint) / TOKENIZER_FILE
    try:
        return ChatTemplate.beside(path, tokenizer)
    except InputError:
        if (path.parent / TEMPLATE_FILE).exists() or set(SPECIAL_TOKENS) <= set(tokenizer.special_tokens):
            raise
        return None
