"""A conversation's ids through a chat template: gptkit's ChatTemplate (tokenizer/chat.py) against
transformers' apply_chat_template on the same tokenizer, template and conversations, per
conversation, medians, with the load; and, with --against REV, the ChatTemplate of a git revision
beside today's (what a change to it costs: its tokenizer/ package, chat.py and the modules it uses).

    python bench/chat_template.py CHATS.jsonl [--count 2000] [--repeat 5] [--busy 2] [--against REV]

CHATS.jsonl: conversations, one {"messages": [...]} a line (`gptkit stories --chat --out F`
writes them). A byte-level BPE of 2,048 tokens with gptkit's chat tokens and Qwen2's
(<|im_start|>, <|im_end|>) is trained on their text first (not timed); both templates render with
it. Ours computes the ids and the mask of the assistant's tokens (encode, what pretokenize --chat
does) and the prompt of the next reply (prompt_ids, what serve and sample --chat do); transformers
computes the ids alone. Ours encodes the messages' texts as text where they spell a special token,
which transformers does not: the conversations here spell none, so the ids are checked equal.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import busy_processes, cpu, load_average  # noqa: E402 (after the path is set)
from gptkit.shared.corpus import Corpus  # noqa: E402
from gptkit.tokenizer import train_bpe  # noqa: E402
from gptkit.tokenizer.chat import GPTKIT_TEMPLATE, SPECIAL_TOKENS, ChatTemplate  # noqa: E402

QWEN2_TEMPLATE = (  # Qwen2-7B-Instruct's, as its tokenizer_config.json gives it
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TEMPLATES = {"gptkit": GPTKIT_TEMPLATE, "qwen2": QWEN2_TEMPLATE}
SPECIALS = ["<|endoftext|>", *SPECIAL_TOKENS, "<|im_start|>", "<|im_end|>"]


def chat_template_at(revision, directory):
    """The ChatTemplate class of tokenizer/ as git revision `revision` has it, loaded beside
    today's: the whole package, extracted into `directory` under another name, so that the
    modules chat.py imports (its bounds, its sandbox) are that revision's too."""
    name = "tokenizer_at_" + re.sub(r"\W", "_", revision)
    archive = subprocess.run(["git", "archive", revision, "tokenizer"], cwd=ROOT, capture_output=True, check=True)
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(directory)
    (Path(directory) / "tokenizer").rename(Path(directory) / name)
    sys.path.insert(0, str(directory))
    return importlib.import_module(f"{name}.chat").ChatTemplate


def median_us(work, items, repeat):
    """Median over `repeat` rounds of the microseconds `work` takes per item of `items`."""
    for item in items[:50]:
        work(item)
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            work(item)
        rounds.append((time.perf_counter() - start) / len(items) * 1e6)
    return statistics.median(rounds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chats", help="conversations, one JSON record a line")
    parser.add_argument("--count", type=int, default=2000, help="conversations timed")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the timing")
    parser.add_argument("--against", metavar="REV", help="also time tokenizer/ as git revision REV has it")
    args = parser.parse_args()
    import transformers

    with open(args.chats, encoding="utf-8") as f:
        chats = [json.loads(line)["messages"] for line, _ in zip(f, range(args.count))]
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text("\n".join(m["content"] for chat in chats for m in chat), encoding="utf-8")
        tokenizer = train_bpe(Corpus([text]), 2048, SPECIALS, quiet=True)
        tokenizer.save(Path(tmp) / "tokenizer.json")
        theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=str(Path(tmp) / "tokenizer.json"))
    print(
        f"machine: {cpu()}, transformers {transformers.__version__}; {len(chats):,} conversations of {args.chats}, "
        f"{args.busy} busy processes beside, medians of {args.repeat}"
    )
    kinds = {"ours": ChatTemplate}
    revisions = tempfile.TemporaryDirectory()  # for the whole run: a module may import another when first used
    if args.against:
        kinds[args.against] = chat_template_at(args.against, revisions.name)
    print(
        "\n| template | work | "
        + " | ".join(f"{kind} (us)" for kind in kinds)
        + " | transformers (us) | "
        + " | ".join(f"{kind} / transformers" for kind in kinds)
        + (f" | ours / {args.against}" if args.against else "")
        + " | load |"
    )
    print("|---|---|" + "---:|" * (2 * len(kinds) + 1 + bool(args.against)) + "---:|")
    with busy_processes(args.busy):
        for name, source in TEMPLATES.items():
            templates = {kind: cls(source, tokenizer, origin=name) for kind, cls in kinds.items()}
            for conversation in chats[:200]:  # the references agree first
                assert templates["ours"].prompt_ids(tokenizer, conversation) == theirs.apply_chat_template(
                    conversation, chat_template=source, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            works = {
                "ids and mask (pretokenize --chat)": (
                    lambda template: lambda chat: template.encode(tokenizer, chat),
                    lambda chat, source=source: theirs.apply_chat_template(
                        chat, chat_template=source, tokenize=True, return_dict=False
                    ),
                ),
                "prompt (serve, sample --chat)": (
                    lambda template: lambda chat: template.prompt_ids(tokenizer, chat),
                    lambda chat, source=source: theirs.apply_chat_template(
                        chat, chat_template=source, add_generation_prompt=True, tokenize=True, return_dict=False
                    ),
                ),
            }
            for work, (ours_of, reference) in works.items():
                times = {kind: median_us(ours_of(template), chats, args.repeat) for kind, template in templates.items()}
                reference_us = median_us(reference, chats, args.repeat)
                ratios = [f"{t / reference_us:.2f}" for t in times.values()]
                against = [f"{times['ours'] / times[args.against]:.2f}"] if args.against else []
                print(
                    f"| {name} | {work} | "
                    + " | ".join(f"{t:.0f}" for t in times.values())
                    + f" | {reference_us:.0f} | "
                    + " | ".join(ratios + against)
                    + f" | {load_average():.2f} |"
                )


if __name__ == "__main__":
    main()
