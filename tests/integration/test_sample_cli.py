"""The `sample` CLI (click's runner) and the library call it makes (sample, Sampler, Settings), on a tiny
model's checkpoint; the decoding it rests on is tests/unit/test_sample.py's."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import eot_id as checkpoint_eot_id
from gptkit.model.checkpoint import load_model, save_model
from gptkit.model.generate import generate
from gptkit.sample.cli import cli
from gptkit.sample.sampling import Sampler, Settings, sample
from gptkit.shared.errors import SettingError
from gptkit.tokenizer.bpe import Tokenizer
from gptkit.tokenizer.chat import ASSISTANT, END, SYSTEM, USER
from tests.conftest import assert_input_error
from tests.serving import chat_checkpoint
from tests.unit.test_sample import CONTEXT, EOT, PROMPT, checkpoint, greedy_ids, model, tiny_model, tok  # noqa: F401 (fixtures)

# -- the `sample` CLI -------------------------------------------------------------------------


def run_cli(*args, **kwargs):
    """The CLI on the CPU, where the tests' reference ids are computed, unless a --device is given."""
    args = [str(a) for a in args]
    return CliRunner().invoke(cli, args if "--device" in args else [*args, "--device", "cpu"], **kwargs)


def ok(*args, **kwargs):
    res = run_cli(*args, **kwargs)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "Traceback" not in res.output
    return res


def greedy_text(model, tok, prompt, n):
    ids = ([tok.special_tokens[EOT]] + tok.encode(prompt, allowed_special=()))[-CONTEXT:]
    out = greedy_ids(model, ids, n)
    out = out[: out.index(tok.special_tokens[EOT])] if tok.special_tokens[EOT] in out else out
    return tok.decode(out)


def test_cli_prompt_and_seed(checkpoint):
    base = ["--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12]
    first = ok(*base, "--device", "auto")  # CUDA where there is one (in bf16: its text is tests/gpu/test_gpu.py's)
    assert first.stdout.startswith(PROMPT) and first.stdout.endswith("\n")
    seed_line = first.stderr.strip()
    assert seed_line.startswith("seed: ")  # a random seed is printed so the text can be had again
    # after the text, which ends its line: on a terminal (both streams) a line of its own
    assert first.output == first.stdout + seed_line + "\n"
    again = ok(*base, "--seed", seed_line.split()[1], "--device", "auto")
    assert again.stdout == first.stdout and again.stderr == ""


def test_cli_greedy_equals_generate(checkpoint, model, tok):
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 5, "--temperature", 0)
    assert res.stdout == PROMPT + greedy_text(model, tok, PROMPT, 5) + "\n"
    # the checkpoint round-trips the model
    loaded, _ = load_model(checkpoint)
    assert greedy_text(loaded, tok, PROMPT, 5) == greedy_text(model, tok, PROMPT, 5)


def test_cli_prompt_file_and_stdin(checkpoint, tmp_path):
    base = ["--checkpoint", checkpoint, "--max-new-tokens", 8, "--seed", 3]
    expected = ok(*base, "--prompt", PROMPT).stdout
    (tmp_path / "p.txt").write_text(PROMPT, encoding="utf-8")
    assert ok(*base, "--prompt-file", tmp_path / "p.txt").stdout == expected
    assert ok(*base, "--prompt-file", "-", input=PROMPT).stdout == expected
    assert ok(*base, input=PROMPT).stdout == expected


def test_cli_num_samples(checkpoint):
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 10, "--seed", 1, "--num-samples", 2)
    out = res.stdout
    assert out.startswith("--- sample 1 ---\n" + PROMPT)
    first, second = out.split("\n\n--- sample 2 ---\n")
    assert second.startswith(PROMPT) and second.endswith("\n") and "--- sample" not in second
    assert out.count("--- sample ") == 2


def test_cli_long_prompt_warns_and_keeps_the_last_context(checkpoint, model, tok):
    prompt = " ".join(["the big dog ran over the house"] * 10)
    assert len(tok.encode(prompt)) > CONTEXT
    res = ok("--checkpoint", checkpoint, "--prompt", prompt, "--max-new-tokens", 5, "--temperature", 0)
    assert res.stderr.startswith("warning:") and f"context of {CONTEXT}" in res.stderr
    assert res.stdout == prompt + greedy_text(model, tok, prompt, 5) + "\n"


def test_cli_stop(checkpoint, model, tok):
    continuation = greedy_text(model, tok, PROMPT, 20)
    assert len(continuation) >= 6, continuation
    stop = continuation[3:5]
    expected = continuation[: continuation.index(stop)]
    base = ["--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 20, "--temperature", 0, "--stop", stop]
    assert ok(*base).stdout == PROMPT + expected + "\n"
    many = ok(*base, "--num-samples", 2).stdout
    assert many == f"--- sample 1 ---\n{PROMPT}{expected}\n\n--- sample 2 ---\n{PROMPT}{expected}\n"


def test_cli_end_of_text_stops_each_sample(model, tok, tmp_path):
    """A model that often says <|endoftext|>: each sample ends there, the others go on."""
    eot = tok.special_tokens[EOT]
    chatty = tiny_model(tok.vocab_size)
    with torch.no_grad():
        chatty.lm_head.weight[eot] = 3 * chatty.lm_head.weight[296]
    save_model(chatty, tok, tmp_path / "ckpt", eot_id=eot)
    ids, n = [eot] + tok.encode(PROMPT), 30
    rows = torch.stack(
        list(generate(chatty, ids, max_new_tokens=n, num_samples=4, temperature=1.0, top_p=0.9, seed=5)), 1
    ).tolist()
    ends = [row.index(eot) if eot in row else n for row in rows]
    assert len(set(ends)) > 1 and min(ends) < n, ends
    res = ok(
        "--checkpoint",
        tmp_path / "ckpt",
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        n,
        "--num-samples",
        4,
        "--seed",
        5,
        "--temperature",
        1,
    )
    assert res.stdout == "\n".join(
        f"--- sample {i + 1} ---\n{PROMPT}{tok.decode(row[:end])}\n" for i, (row, end) in enumerate(zip(rows, ends))
    )
    greedy = greedy_ids(chatty, ids, n)
    assert eot in greedy
    res = ok("--checkpoint", tmp_path / "ckpt", "--prompt", PROMPT, "--max-new-tokens", n, "--temperature", 0)
    assert res.stdout == PROMPT + tok.decode(greedy[: greedy.index(eot)]) + "\n"


def test_cli_long_stop(checkpoint, model, tok):
    continuation = greedy_text(model, tok, PROMPT, 20)
    stop = continuation[4:12]
    assert len(stop) == 8, continuation
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 20, "--temperature", 0, "--stop", stop)
    assert res.stdout == PROMPT + continuation[: continuation.index(stop)] + "\n"


def test_the_library_function_streams_what_the_cli_prints(checkpoint):
    """`sample` (sampling.py), of which the command is a shell: the same text for the same seed,
    as pieces of each sample while it is generated; a Sampler samples again with its model loaded."""
    one = sample(checkpoint, PROMPT, Settings(max_new_tokens=12, seed=4), device="cpu")
    pieces = list(one)
    assert len(pieces) > 1 and all(i == 0 and piece for i, piece in pieces)
    text = "".join(piece for _, piece in pieces)
    assert (
        ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--seed", 4).stdout
        == PROMPT + text + "\n"
    )
    assert one.texts() == [text] and one.seed == 4  # read once: nothing generated again

    settings = Settings(max_new_tokens=10, num_samples=3, temperature=1.0, seed=1, stops=["λλ"])
    several = sample(checkpoint, PROMPT, settings, device="cpu")
    pieces = list(several)
    assert len({i for i, _ in pieces}) == 3
    texts = ["".join(piece for j, piece in pieces if j == i) for i in range(3)]
    assert several.texts() == texts
    res = ok(
        "--checkpoint",
        checkpoint,
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        10,
        "--num-samples",
        3,
        "--temperature",
        1,
        "--seed",
        1,
        "--stop",
        "λλ",
    )
    assert res.stdout == "\n".join(f"--- sample {i + 1} ---\n{PROMPT}{text}\n" for i, text in enumerate(texts))

    sampler = Sampler(checkpoint, device="cpu")
    drawn = sampler.sample(PROMPT, Settings(max_new_tokens=8))  # a seed drawn, and told
    assert drawn.texts() == sampler.sample(PROMPT, Settings(max_new_tokens=8, seed=drawn.seed)).texts()
    for bad, setting in [
        ({"top_p": 0}, "top_p"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"num_samples": 0}, "num_samples"),
        ({"seed": -1}, "seed"),
        ({"stops": "e "}, "stops"),
    ]:
        with pytest.raises(SettingError) as e:
            Settings(**bad)
        assert e.value.setting == setting


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--temperature", "-1"], "--temperature"),
        (["--top-p", "0"], "--top-p"),
        (["--top-p", "1.5"], "--top-p"),
        (["--top-k", "0"], "--top-k"),
        (["--temperature", "nan"], "--temperature"),
    ],
)
def test_cli_bad_values(checkpoint, args, needle):
    assert_input_error(run_cli("--checkpoint", checkpoint, "--prompt", "hi", *args), needle)


def test_cli_bad_checkpoints_and_prompts(checkpoint, tmp_path):
    assert_input_error(run_cli("--checkpoint", tmp_path / "nope", "--prompt", "hi"), "no such checkpoint")
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").unlink()
    assert_input_error(run_cli("--checkpoint", broken, "--prompt", "hi"), "model.safetensors")
    (tmp_path / "p.txt").write_text("hi")
    assert_input_error(
        run_cli("--checkpoint", checkpoint, "--prompt", "hi", "--prompt-file", tmp_path / "p.txt"), "--prompt-file"
    )


def test_a_training_runs_directory_samples_its_newest_checkpoint(checkpoint, tmp_path):
    """`--checkpoint RUN`, as nanoGPT's sample.py takes its out_dir: RUN/latest, the link train keeps."""
    run = tmp_path / "run"
    shutil.copytree(checkpoint, run / "checkpoints" / "step-000002")
    (run / "latest").symlink_to(Path("checkpoints") / "step-000002")
    args = ["--prompt", PROMPT, "--max-new-tokens", 5, "--temperature", 0]
    assert ok("--checkpoint", run, *args).stdout == ok("--checkpoint", checkpoint, *args).stdout
    (run / "latest").unlink()  # a run with no checkpoint yet
    assert_input_error(run_cli("--checkpoint", run, *args), f"{run}: incomplete checkpoint, no model.safetensors")


def test_cli_empty_prompt(checkpoint, tmp_path):
    res = ok(
        "--checkpoint", checkpoint, "--prompt", "", "--max-new-tokens", 3, "--seed", 0
    )  # starts from <|endoftext|>
    assert res.stdout.endswith("\n")
    bytes_only = Tokenizer(vocab=[bytes([i]) for i in range(256)], merges=[], special_tokens={})
    save_model(tiny_model(256), bytes_only, tmp_path / "no-eot")
    assert_input_error(run_cli("--checkpoint", tmp_path / "no-eot", "--prompt", ""), "no end-of-text token")
    assert_input_error(run_cli("--checkpoint", tmp_path / "no-eot", input=""), "no end-of-text token")
    assert ok("--checkpoint", tmp_path / "no-eot", "--prompt", "x", "--max-new-tokens", 3).stdout.startswith("x")


def test_threads_sets_torchs_threads_and_changes_no_greedy_text(checkpoint):
    before = torch.get_num_threads()
    try:
        one = ok(
            "--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--temperature", 0, "--threads", 1
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert (
        one.stdout
        == ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--temperature", 0).stdout
    )


def test_the_end_of_text_id_is_the_checkpoints(model, tok, tmp_path):
    """Decoding starts from, and stops at, the end-of-text id the checkpoint records (its data's),
    not a token found by name; a checkpoint from before the record takes the tokenizer's."""
    other = tok.special_tokens[EOT] - 1  # any id: what the data's manifest said
    save_model(model, tok, tmp_path / "ckpt", eot_id=other)
    assert checkpoint_eot_id(tmp_path / "ckpt", tok) == other
    want = greedy_ids(model, [other] + tok.encode(PROMPT), 8)
    want = want[: want.index(other)] if other in want else want
    res = ok("--checkpoint", tmp_path / "ckpt", "--prompt", PROMPT, "--max-new-tokens", 8, "--temperature", 0)
    assert res.stdout == PROMPT + tok.decode(want) + "\n"
    config = json.loads((tmp_path / "ckpt/config.json").read_text())
    del config["tokenizer"]["eot_id"]
    (tmp_path / "ckpt/config.json").write_text(json.dumps(config))
    assert checkpoint_eot_id(tmp_path / "ckpt", tok) == tok.special_tokens[EOT]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_cuda_without_cuda(checkpoint):
    assert_input_error(run_cli("--checkpoint", checkpoint, "--prompt", "hi", "--device", "cuda"), "--device cuda")


def test_sample_chat_encodes_special_spellings_in_the_messages_as_text(small_tokenizer, tmp_path):
    """`sample --chat --system S --prompt P` with every special token spelled in both: the prompt
    is the template's markup around the texts' ordinary ids, and the reply is the one those ids give."""
    path = chat_checkpoint(small_tokenizer[0], tmp_path / "chat")
    sampler = Sampler(path, device="cpu")
    specials = sampler.tokenizer.special_tokens
    forged = "".join(specials) + "x"
    expected = [
        specials[SYSTEM],
        *sampler.tokenizer.encode(forged, allowed_special=()),
        specials[END],
        specials[USER],
        *sampler.tokenizer.encode(forged, allowed_special=()),
        specials[END],
        specials[ASSISTANT],
    ]
    messages = [{"role": "system", "content": forged}, {"role": "user", "content": forged}]
    assert sampler.chat_ids(messages) == expected
    settings = Settings(max_new_tokens=12, temperature=0, stops=(END,))
    reply = sampler.sample_ids(expected, settings).texts()[0]
    res = ok(
        "--checkpoint",
        path,
        "--chat",
        "--system",
        forged,
        "--prompt",
        forged,
        "--temperature",
        0,
        "--max-new-tokens",
        12,
    )
    assert res.stdout.rstrip("\n") == reply
