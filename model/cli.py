"""`gptkit model`: inspect a model config, make a random checkpoint, export to and import from
Hugging Face. Run `gptkit model --help`."""

import os

import click

from gptkit.shared.cli import CONTEXT, Group, checkpoint_option, overwrite_option, version_option
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import Input, cause, looked_up
from gptkit.shared.text import EOT
from gptkit.tokenizer import Tokenizer

from .config import load_config, preset_names
from .info import describe, model_cost, training_memory

config_option = click.option(
    "--config",
    "config_name",
    required=True,
    metavar="PRESET|FILE",
    help=f"A preset ({', '.join(preset_names())}) or a JSON file of model settings.",
)


@click.group(cls=Group, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """A Llama- or GPT-2-style TransformerLM: presets, costs, checkpoints, Hugging Face export and import."""


@cli.command()
@config_option
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Sequences per step, all processes together (as train's --batch-size), for the memory estimate.",
)
@click.option(
    "--ranks",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Processes (GPUs) the training runs in: the memory is one process's.",
)
@click.option(
    "--parallel",
    type=click.Choice(["ddp", "fsdp"]),
    default="ddp",
    show_default=True,
    help="As train's --parallel: fsdp shards the weights, gradients and optimizer state among the processes.",
)
def info(config_name: str, batch_size: int, ranks: int, parallel: str) -> None:
    """Parameters, training FLOPs per token and training memory of a model config."""
    if batch_size % ranks:
        raise InputError(
            f"--batch-size {batch_size}: not divisible among --ranks {ranks} (it counts the sequences of all of them)"
        )
    config = load_config(config_name)
    cost = model_cost(config)
    click.echo(f"config: {config_name}")
    for key, value in config.to_dict().items():
        click.echo(f"  {key}: {value}")
    click.echo(
        f"parameters: {cost.params:,} ({cost.params / 1e6:.1f}M); without the embeddings: "
        f"{cost.non_embedding_params:,} ({cost.non_embedding_params / 1e6:.1f}M)"
    )
    click.echo(
        f"training FLOPs per token: {cost.flops_per_token:,} ({cost.flops_per_token / 1e6:.1f} MFLOP) = "
        f"6 x {cost.matmul_params:,} matmul weights + {cost.attention_flops_per_token:,} attention"
    )
    per_rank, shards = batch_size // ranks, ranks if parallel == "fsdp" else 1
    where = f"in each of {ranks} processes ({parallel}) at batch {per_rank}" if ranks > 1 else f"at batch {batch_size}"
    click.echo(
        f"training memory {where} x {config.context_length} = {per_rank * config.context_length:,} tokens (estimate):"
    )
    for precision, activation_bytes in (("float32", 4), ("bf16 autocast", 2)):
        for recompute, how in ((False, ""), (True, " with activation checkpointing")):
            memory = training_memory(
                config, per_rank, activation_bytes, shards=shards, activation_checkpointing=recompute
            )
            parts = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in memory.items())
            click.echo(f"  {precision}{how}: {sum(memory.values()) / 2**30:.2f} GiB ({parts})")


@cli.command()
@config_option
@click.option(
    "--tokenizer",
    "-t",
    "tokenizer_path",
    required=True,
    metavar="PATH",
    help="The tokenizer.json the model is for; sets vocab_size.",
)
@click.option("--out", required=True, metavar="DIR", help="The checkpoint directory to write.")
@click.option(
    "--seed",
    type=click.IntRange(0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Seed of the random weights: the same seed, the same checkpoint.",
)
@overwrite_option("a checkpoint of a model alone (no training state)")
def init(config_name: str, tokenizer_path: str, out: str, seed: int, overwrite: bool) -> None:
    """Write a randomly initialized checkpoint (model.safetensors, config.json, tokenizer.json)."""
    import torch  # here, with the modules that import it: `gptkit model info` and --help do without torch (2-3 s)

    from gptkit.runtime.device import Memory

    from .checkpoint import check_target, save_model
    from .model import TransformerLM

    config = load_config(config_name)
    if not looked_up(tokenizer_path, "tokenizer").is_file():
        raise InputError(f"--tokenizer {tokenizer_path}: no such file")
    check_target(out, overwrite, sources=[Input.given("tokenizer", tokenizer_path)])
    tokenizer = Tokenizer.from_file(tokenizer_path)
    if config.vocab_size != tokenizer.vocab_size:
        click.echo(f"note: vocab_size {config.vocab_size:,} -> {tokenizer.vocab_size:,}, the tokenizer's", err=True)
        config.vocab_size = tokenizer.vocab_size
    memory = Memory(
        {"float32 weights": 4 * model_cost(config).params},
        torch.device("cpu"),
        "config",
        f"{config_name}: {describe(config)}",
        "choose a smaller model",
    )
    memory.check()
    torch.manual_seed(seed)
    with memory.guard():
        model = TransformerLM(config)
        try:
            save_model(model, tokenizer, out, eot_id=tokenizer.special_tokens.get(EOT), overwrite=overwrite)
        except OSError as e:
            raise _cannot_write(out, e) from None
    click.echo(f"wrote {out}: {model.num_params():,} parameters, tokenizer {tokenizer.fingerprint}")


@cli.command("export-hf")
@checkpoint_option
@click.option(
    "--out",
    "out_dir",
    required=True,
    metavar="DIR",
    help="The Hugging Face model directory to write (new, or an earlier export).",
)
@click.option(
    "--peft",
    is_flag=True,
    help="Of a LoRA run's checkpoint: its adapters in peft's format (adapter_config.json, "
    "adapter_model.safetensors) for the export of the checkpoint they adapt, instead of the model with them merged in.",
)
@overwrite_option("an earlier export")
def export_hf(checkpoint: str, out_dir: str, peft: bool, overwrite: bool) -> None:
    """Write a Hugging Face model directory (LlamaForCausalLM; Qwen3ForCausalLM with QK-norm,
    Qwen2ForCausalLM with q/k/v biases, GPT2LMHeadModel for the gpt2 architecture), or with --peft
    a LoRA run's adapters."""
    from .hf import export_hf, export_peft  # imports torch: not at the top (see init)

    try:
        (export_peft if peft else export_hf)(checkpoint, out_dir, overwrite)
    except OSError as e:
        raise _cannot_write(out_dir, e) from None
    if peft:
        click.echo(
            f"wrote {out_dir}: load with peft.PeftModel.from_pretrained(base, {str(out_dir)!r}), base the "
            "transformers model of the checkpoint the run adapts (gptkit model export-hf of it)"
        )
        return
    click.echo(f"wrote {out_dir}: load with transformers.AutoModelForCausalLM.from_pretrained({str(out_dir)!r})")


@cli.command("export-gguf")
@checkpoint_option
@click.option("--out", required=True, metavar="FILE", help="The .gguf file to write (new, or an earlier export).")
@click.option(
    "--dtype",
    type=click.Choice(["f32", "f16", "bf16", "q8_0"]),
    default="f16",
    show_default=True,
    help="The type of the weight matrices. f16 is what llama.cpp's converter writes and every llama.cpp "
    "backend computes with: half of f32's size, its logits close to ours; bf16 keeps float32's range; q8_0 "
    "is half of f16's size, a little further off. Norms and biases stay f32.",
)
@overwrite_option("an earlier export")
def export_gguf(checkpoint: str, out: str, dtype: str, overwrite: bool) -> None:
    """Write one GGUF file for llama.cpp, Ollama and LM Studio (llama.cpp's llama architecture; qwen3
    with QK-norm; gpt2), with the tokenizer and the chat template."""
    from .gguf import export_gguf  # imports torch: not at the top (see init)

    try:
        exported = export_gguf(checkpoint, out, dtype, overwrite)
    except OSError as e:
        raise _cannot_write(out, e) from None
    # Ollama reads a Modelfile's FROM path from the Modelfile's directory, and a bare name as a model's:
    # an absolute path holds wherever the Modelfile is. Past the model's context llama.cpp and Ollama run on
    # at positions it never trained on (gptkit slides its window instead): their context is set to it.
    context = exported.context
    click.echo(
        f"wrote {out}: {exported.architecture}, {dtype}, {exported.size / 2**20:.1f} MiB, a context of "
        f"{context} tokens; run it with `llama-cli -m {out} -c {context}`, or in Ollama from a Modelfile that "
        f"says `FROM {os.path.abspath(out)}` and `PARAMETER num_ctx {context}`"
    )


@cli.command("import-hf")
@click.option(
    "--from",
    "hf_dir",
    required=True,
    metavar="DIR",
    help="A Hugging Face model directory: config.json, model.safetensors (or model.safetensors.index.json and its "
    "shards), tokenizer.json (GPT-2: or vocab.json and merges.txt).",
)
@click.option("--out", required=True, metavar="DIR", help="The checkpoint directory to write.")
@overwrite_option("a checkpoint of a model alone (no training state)")
def import_hf(hf_dir: str, out: str, overwrite: bool) -> None:
    """Write a checkpoint of a Hugging Face LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
    Qwen3ForCausalLM or GPT2LMHeadModel, computing exactly what it computes, or refuse it in one line."""
    from .hf import import_hf  # imports torch: not at the top (see init)

    try:
        imported = import_hf(hf_dir, out, overwrite)
    except OSError as e:
        raise _cannot_write(out, e) from None
    for note in imported.notes:
        click.echo(f"note: {note}", err=True)
    names = {i: token for token, i in imported.tokenizer.special_tokens.items()}

    def token(token_id):
        return "nothing" if token_id is None else f"{names.get(token_id, 'token')} ({token_id})"

    click.echo(
        f"wrote {out}: {imported.architecture}, {describe(imported.config)} ({'/'.join(imported.dtypes)}); "
        f"a text starts with {token(imported.bos_id)}, sampling stops at {token(imported.eot_id)}"
        f"{'; its chat template is carried (sample --chat, serve)' if imported.chat_template else ''}"
    )


def _cannot_write(out: str, error: OSError) -> SettingError:
    """A write that failed, its cause named: the outputs are written whole or not at all."""
    return SettingError("out", f"{out}: cannot write ({cause(error)}); nothing was written there")


def main() -> None:
    cli(prog_name="gptkit model")
