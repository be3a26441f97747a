"""`gptkit model import-hf`: tiny random models of every accepted Hugging Face architecture,
saved by `transformers`, imported through the command line, compute what `transformers` computes
(logits within 1e-4, the same greedy tokens from the same framing), and come back bit for bit
through export-hf and import-hf; everything else is refused in one line, with nothing written.
Also the gpt2 architecture itself: GPT-2 small's count, training, sampling."""

import copy
import json
import os
import shutil
from dataclasses import dataclass, field

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from gptkit.model.checkpoint import bos_id, eot_id, load_model
from gptkit.model.cli import cli
from gptkit.model.config import load_config
from gptkit.model.generate import generate, prompt_ids
from gptkit.model.hf.families import ARCHITECTURES
from gptkit.model.hf.framing import hf_tokenizer_json
from gptkit.model.hf.llama import ROPE_THETA_DEFAULT
from gptkit.model.info import model_cost
from gptkit.model.model import rope_frequencies
from gptkit.sample.cli import cli as sample_cli
from gptkit.tokenizer import Tokenizer
from tests.conftest import assert_input_error, english_like

transformers = pytest.importorskip("transformers")

EOT, BEGIN, END, IM_START, IM_END = (
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|im_start|>",
    "<|im_end|>",
)
PROMPTS = ["Once upon a time, the little cat", "東京 café: don't stop 42\n\n  ok"]
LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 4.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
}


@dataclass
class Case:
    architecture: str
    config: dict  # beside the shapes every case shares
    specials: tuple  # special tokens added to the test tokenizer, after its <|endoftext|>
    bos: str | None  # the framing the import must record
    eos: str | None
    template: bool = False  # the tokenizer.json puts `bos` before a text (Llama 3's); else it adds nothing
    padded: int = 0  # rows of the embedding beyond the tokenizer's vocabulary (Qwen's)
    save: dict = field(default_factory=dict)  # save_pretrained's options
    gpt2_files: bool = False  # vocab.json and merges.txt instead of tokenizer.json
    export: str = ""  # the architecture export-hf writes back: the same unless given


CASES = {
    "llama-gqa": Case("LlamaForCausalLM", {}, (BEGIN, END), BEGIN, END, template=True),
    "llama-tied-sharded": Case(
        "LlamaForCausalLM",
        {"tie_word_embeddings": True},
        (BEGIN, END),
        BEGIN,
        END,
        template=True,
        save={"max_shard_size": "60KB"},
    ),
    "llama3-rope-scaling": Case(
        "LlamaForCausalLM", {"rope_scaling": LLAMA3_SCALING}, (BEGIN, END), BEGIN, END, template=True
    ),
    "mistral": Case("MistralForCausalLM", {"sliding_window": None}, (), None, EOT, export="LlamaForCausalLM"),
    "qwen2": Case("Qwen2ForCausalLM", {"tie_word_embeddings": True}, (IM_START, IM_END), None, IM_END, padded=60),
    "qwen3": Case("Qwen3ForCausalLM", {"head_dim": 32}, (IM_START, IM_END), None, EOT),
    "gpt2": Case("GPT2LMHeadModel", {}, (), EOT, EOT),
    "gpt2-untied-vocab-merges": Case("GPT2LMHeadModel", {"tie_word_embeddings": False}, (), EOT, EOT, gpt2_files=True),
}


def with_specials(tok, names):
    specials = dict(tok.special_tokens)
    for name in names:
        specials[name] = tok.vocab_size + len(specials) - len(tok.special_tokens)
    return Tokenizer(
        tok.vocab + [name.encode() for name in names],
        tok.merges,
        specials,
        pattern=tok.pattern,
        normalizer=tok.normalizer,
    )


def hf_config(case, tok, **overrides):
    ids = {
        "bos_token_id": tok.special_tokens[case.bos] if case.bos else None,
        "eos_token_id": tok.special_tokens[case.eos],
    }
    if case.architecture == "GPT2LMHeadModel":
        shape = dict(n_positions=128, n_embd=64, n_layer=2, n_head=4)
    else:
        shape = dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rms_norm_eps=1e-5,
            rope_theta=500.0,
        )
    kind = ARCHITECTURES[case.architecture][0]
    return transformers.CONFIG_MAPPING[kind](
        vocab_size=tok.vocab_size + case.padded,
        initializer_range=0.2,
        **shape,
        **ids,
        **copy.deepcopy({**case.config, **overrides}),
    )  # transformers edits it


def random_hf_model(architecture, config, seed=0, dtype=torch.float32):
    """A random model whose norm gains are not 1 and whose biases are not 0 (a misplaced one shows),
    with weights large enough for greedy decoding to have no near-ties."""
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.2)
            elif p.dim() == 1:
                p.uniform_(0.5, 1.5)
    return model.to(dtype).eval()


def write_hf_dir(directory, case, model, tok):
    model.save_pretrained(directory, **case.save)
    if case.gpt2_files:
        data = tok.to_json()["model"]
        (directory / "vocab.json").write_text(json.dumps(data["vocab"], ensure_ascii=False), encoding="utf-8")
        (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(data["merges"]) + "\n", encoding="utf-8")
    else:
        tokenizer_json = hf_tokenizer_json(tok, case.bos if case.template else None)
        (directory / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    return directory


def make_hf(tmp_path, small_tokenizer, name, dtype=torch.float32):
    case = CASES[name]
    tok = with_specials(small_tokenizer[0], case.specials)
    model = random_hf_model(case.architecture, hf_config(case, tok), dtype=dtype)
    return case, tok, model, write_hf_dir(tmp_path / "hf", case, model, tok)


def invoke(*args, command=cli):
    return CliRunner().invoke(command, [str(a) for a in args])


def assert_ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def import_hf(hf_dir, out):
    return assert_ok(invoke("import-hf", "--from", hf_dir, "--out", out))


def logits(model, idx):
    with torch.no_grad():
        out = model(idx)
    return out.logits if hasattr(out, "logits") else out[0]


def checkpoint_files(ckpt):
    return json.loads((ckpt / "config.json").read_text()), load_file(ckpt / "model.safetensors")


def assert_same_checkpoint(a, b):
    (config_a, tensors_a), (config_b, tensors_b) = checkpoint_files(a), checkpoint_files(b)
    assert config_a["model"] == config_b["model"] and config_a["tokenizer"] == config_b["tokenizer"]
    assert tensors_a.keys() == tensors_b.keys()
    for name, tensor in tensors_a.items():
        assert tensor.dtype == tensors_b[name].dtype and torch.equal(tensor, tensors_b[name]), name


# -- what transformers computes ------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_import_computes_what_transformers_computes_and_round_trips(tmp_path, small_tokenizer, name):
    case, tok, hf_model, hf_dir = make_hf(tmp_path, small_tokenizer, name)
    ckpt = tmp_path / "ckpt"
    res = import_hf(hf_dir, ckpt)
    assert res.stdout.startswith(f"wrote {ckpt}: {case.architecture}, ")
    assert ("rows no token uses are dropped" in res.stderr) == bool(case.padded)
    model, loaded_tok = load_model(ckpt)
    model.eval()
    assert loaded_tok.fingerprint == tok.fingerprint and model.config.vocab_size == tok.vocab_size
    config = model.config
    assert config.architecture == ("gpt2" if case.architecture == "GPT2LMHeadModel" else "llama")
    assert config.tie_embeddings == hf_model.config.tie_word_embeddings
    assert config.head_dim == case.config.get("head_dim", 16) and config.qk_norm == (
        case.architecture == "Qwen3ForCausalLM"
    )
    assert config.rope_scaling == case.config.get("rope_scaling")
    bos, eot = bos_id(ckpt, loaded_tok), eot_id(ckpt, loaded_tok)
    assert (bos, eot) == (tok.special_tokens.get(case.bos), tok.special_tokens[case.eos])

    idx = torch.randint(tok.vocab_size, (2, 100), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(logits(model, idx), logits(hf_model, idx)[..., : tok.vocab_size], atol=1e-4, rtol=0)

    if case.template:  # what AutoTokenizer gives for a text is what sample starts from
        hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
        assert all(hf_tok(p)["input_ids"] == prompt_ids(tok, p, bos) for p in PROMPTS)
    padding = list(range(tok.vocab_size, tok.vocab_size + case.padded)) or None  # rows the import dropped
    compared = 0
    for prompt in PROMPTS:
        ids = prompt_ids(tok, prompt, bos)
        ours = [int(step[0]) for step in generate(model, ids, max_new_tokens=16, temperature=0)]
        ours = ours[: ours.index(eot) + 1] if eot in ours else ours
        theirs = hf_model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=16,
            do_sample=False,
            eos_token_id=eot,
            pad_token_id=eot,
            suppress_tokens=padding,
        )[0, len(ids) :].tolist()
        assert ours == theirs, prompt
        compared += len(ours)
    assert compared >= 16

    # import -> export-hf -> import: the same checkpoint, bit for bit; transformers computes the same from the export
    assert_ok(invoke("export-hf", "--checkpoint", ckpt, "--out", tmp_path / "exported"))
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "exported", dtype=torch.float32).eval()
    assert type(exported).__name__ == (case.export or case.architecture)
    torch.testing.assert_close(logits(exported, idx), logits(model, idx), atol=1e-4, rtol=0)
    import_hf(tmp_path / "exported", tmp_path / "again")
    assert_same_checkpoint(ckpt, tmp_path / "again")


def test_bf16_weights_stay_bf16(tmp_path, small_tokenizer):
    case, tok, hf_model, hf_dir = make_hf(tmp_path, small_tokenizer, "llama-gqa", dtype=torch.bfloat16)
    import_hf(hf_dir, tmp_path / "ckpt")
    _, tensors = checkpoint_files(tmp_path / "ckpt")
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    model, _ = load_model(tmp_path / "ckpt")  # widened to float32 for CPU compute, exactly
    assert model.embedding.weight.dtype == torch.float32
    assert torch.equal(model.embedding.weight, hf_model.model.embed_tokens.weight.float())
    idx = torch.randint(tok.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    in_float32 = transformers.AutoModelForCausalLM.from_pretrained(
        hf_dir, dtype=torch.float32
    ).eval()  # RoPE's tables too
    torch.testing.assert_close(logits(model.eval(), idx), logits(in_float32, idx), atol=1e-4, rtol=0)
    assert_ok(invoke("export-hf", "--checkpoint", tmp_path / "ckpt", "--out", tmp_path / "exported"))
    assert json.loads((tmp_path / "exported" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert {t.dtype for t in load_file(tmp_path / "exported" / "model.safetensors").values()} == {torch.bfloat16}
    import_hf(tmp_path / "exported", tmp_path / "again")
    assert_same_checkpoint(tmp_path / "ckpt", tmp_path / "again")


def test_sample_frames_an_imported_model_as_transformers_does(tmp_path, small_tokenizer):
    """sample starts from the import's <|begin_of_text|> and stops at its <|end_of_text|>."""
    _, tok, _, hf_dir = make_hf(tmp_path, small_tokenizer, "llama-gqa")
    import_hf(hf_dir, tmp_path / "ckpt")
    model, _ = load_model(tmp_path / "ckpt")
    ids = [tok.special_tokens[BEGIN]] + tok.encode(PROMPTS[0])
    greedy = [int(step[0]) for step in generate(model.eval(), ids, max_new_tokens=12, temperature=0)]
    end = tok.special_tokens[END]
    res = assert_ok(
        invoke(
            "--checkpoint",
            tmp_path / "ckpt",
            "--prompt",
            PROMPTS[0],
            "--temperature",
            0,
            "--max-new-tokens",
            12,
            "--seed",
            0,
            "--device",
            "cpu",
            command=sample_cli,
        )
    )
    assert res.stdout == PROMPTS[0] + tok.decode(greedy[: greedy.index(end)] if end in greedy else greedy) + "\n"


def test_an_eos_list_stops_at_its_first_and_says_so(tmp_path, small_tokenizer):
    _, tok, _, hf_dir = make_hf(tmp_path, small_tokenizer, "qwen3")
    ids = [tok.special_tokens[IM_END], tok.special_tokens[EOT]]
    (hf_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}))
    res = import_hf(hf_dir, tmp_path / "ckpt")
    assert f"eos_token_id {json.dumps(ids)}" in res.stderr and EOT in res.stderr
    assert eot_id(tmp_path / "ckpt", tok) == ids[0] and bos_id(tmp_path / "ckpt", tok) is None


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_defaults_are_those_of_transformers(architecture):
    """What the import takes for a field config.json leaves out is what transformers takes."""
    kind, defaults = ARCHITECTURES[architecture]
    shape = {"n_embd": 64, "n_head": 4} if kind == "gpt2" else {"hidden_size": 64, "num_attention_heads": 4}
    config = transformers.CONFIG_MAPPING[kind](**shape)
    derived = {"num_key_value_heads": 4, "head_dim": 16}  # what None stands for
    for key, ours in defaults.items():
        theirs = getattr(config, key, None)
        assert (derived.get(key) if ours is None and theirs is not None else ours) == theirs, key
    if kind != "gpt2":
        assert config.rope_parameters == {"rope_type": "default", "rope_theta": ROPE_THETA_DEFAULT}


def test_llama3_rope_frequencies_are_transformers():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }  # Llama 3.1's
    config = transformers.LlamaConfig(
        hidden_size=4096,
        num_attention_heads=32,
        max_position_embeddings=131072,
        rope_parameters={**scaling, "rope_theta": 500000.0},
    )
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = rope_frequencies(128, 500000.0, scaling)
    torch.testing.assert_close(ours.float(), theirs, rtol=1e-6, atol=0)
    unscaled = rope_frequencies(128, 500000.0)
    assert ours[0] == unscaled[0] and ours[-1] == unscaled[-1] / 8  # the highest frequency kept, the lowest divided


def test_gpt2_preset_is_gpt2_small():
    with torch.device("meta"):
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    assert hf.num_parameters() == model_cost(load_config("gpt2-124m-arch")).params == 124_439_808
    res = assert_ok(invoke("info", "--config", "gpt2-124m-arch"))
    assert "parameters: 124,439,808 (124.4M)" in res.stdout and "architecture: gpt2" in res.stdout


# -- refusals -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_dirs(small_tokenizer, tmp_path_factory):
    """A Llama and a GPT-2 directory the import accepts, which each refusal spoils a copy of."""
    root = tmp_path_factory.mktemp("good")
    dirs = {}
    for name in ("llama-gqa", "gpt2"):
        case = CASES[name]
        tok = with_specials(small_tokenizer[0], case.specials)
        (root / name).mkdir()
        dirs[name] = write_hf_dir(root / name, case, random_hf_model(case.architecture, hf_config(case, tok)), tok)
    return dirs


def spoiled(good_dirs, tmp_path, name, change):
    hf_dir = tmp_path / "hf"
    shutil.copytree(good_dirs[name], hf_dir)
    change(hf_dir)
    return hf_dir


def edit_json(path, **fields):
    data = json.loads(path.read_text(encoding="utf-8"))
    for key, value in fields.items():
        target, *rest = key.split("__")
        if rest:
            data[target][rest[0]] = value
        else:
            data[key] = value
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def config_edit(**fields):
    return lambda hf_dir: edit_json(hf_dir / "config.json", **fields)


def poisoned(name, value):
    """Tensor `name` with `value` in its first element."""
    return tensors_edit(lambda tensors: tensors[name].view(-1).__setitem__(0, value))


def as_mistral(**fields):
    return config_edit(architectures=["MistralForCausalLM"], model_type="mistral", **fields)


def named_pipe(name):
    """`name` of the directory replaced by a named pipe nobody writes to: reading it would wait for ever."""

    def change(hf_dir):
        (hf_dir / name).unlink(missing_ok=True)
        os.mkfifo(hf_dir / name)

    return change


def sharded_into(name):
    """The weights moved to a shard `name` that model.safetensors.index.json lists."""

    def change(hf_dir):
        tensors = load_file(hf_dir / "model.safetensors")
        (hf_dir / "model.safetensors").rename(hf_dir / name)
        (hf_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {key: name for key in tensors}}))

    return change


def tensors_edit(edit):
    def change(hf_dir):
        tensors = load_file(hf_dir / "model.safetensors")
        edit(tensors)
        save_file(tensors, hf_dir / "model.safetensors", metadata={"format": "pt"})

    return change


REFUSALS = {
    "another architecture": (
        "llama-gqa",
        config_edit(architectures=["MixtralForCausalLM"], model_type="mixtral"),
        "config.json",
        "architectures",
        "MixtralForCausalLM",
    ),
    "two architectures": (
        "llama-gqa",
        config_edit(architectures=["LlamaForCausalLM", "Qwen2ForCausalLM"]),
        "architectures",
    ),
    "model_type": ("llama-gqa", config_edit(model_type="mistral"), "config.json", "model_type"),
    "Mistral v0.1's window": ("llama-gqa", as_mistral(sliding_window=32), "config.json", "sliding_window 32"),
    "Mistral's default window": ("llama-gqa", as_mistral(max_position_embeddings=8192), "sliding_window 4096"),
    "Mistral's context null": (
        "llama-gqa",
        as_mistral(sliding_window=4096, max_position_embeddings=None),
        "config.json",
        "max_position_embeddings null",
    ),
    "Mistral's window and context null": (
        "llama-gqa",
        as_mistral(sliding_window=None, max_position_embeddings=None),
        "max_position_embeddings null",
    ),
    "Qwen2's sliding window": (
        "llama-gqa",
        config_edit(architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=True),
        "config.json",
        "use_sliding_window true",
    ),
    "sliding layers": ("llama-gqa", config_edit(layer_types=["full_attention", "sliding_attention"]), "layer_types"),
    "layer_types an object": (
        "llama-gqa",
        config_edit(layer_types={"0": "full_attention"}),
        "config.json",
        "layer_types",
    ),
    "layer_types holding an object": (
        "llama-gqa",
        config_edit(layer_types=["full_attention", {"type": "full_attention"}]),
        "config.json",
        "layer_types",
    ),
    "yarn": (
        "llama-gqa",
        config_edit(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
        "config.json",
        "rope_scaling",
        "yarn",
    ),
    "linear": (
        "llama-gqa",
        config_edit(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}),
        "rope_parameters",
        "linear",
    ),
    "dynamic, the old key": (
        "llama-gqa",
        config_edit(rope_scaling={"type": "dynamic", "factor": 2.0}),
        "rope_scaling",
        "dynamic",
    ),
    "partial rotary": ("llama-gqa", config_edit(partial_rotary_factor=0.5), "partial_rotary_factor"),
    "mixture of experts": ("llama-gqa", config_edit(num_local_experts=8), "config.json", "num_local_experts 8"),
    "experts, Qwen's name": ("llama-gqa", config_edit(num_experts=4), "num_experts 4"),
    "gelu in a llama": ("llama-gqa", config_edit(hidden_act="gelu"), "config.json", 'hidden_act "gelu"', "silu"),
    "attention_bias": ("llama-gqa", config_edit(attention_bias=True), "attention_bias true"),
    "mlp_bias": ("llama-gqa", config_edit(mlp_bias=True), "mlp_bias true"),
    "quantized": ("llama-gqa", config_edit(quantization_config={"quant_method": "gptq"}), "quantization_config"),
    "heads": ("llama-gqa", config_edit(num_key_value_heads=3), "config.json", "num_attention_heads 4"),
    "a size of the wrong type": ("llama-gqa", config_edit(hidden_size="64"), 'hidden_size "64"'),
    "GPT-2's n_embd null": ("gpt2", config_edit(n_embd=None), "config.json", "n_embd null"),
    "an infinite norm epsilon": (
        "llama-gqa",
        config_edit(rms_norm_eps=float("inf")),
        "config.json",
        "rms_norm_eps Infinity",
    ),
    "GPT-2's infinite norm epsilon": (
        "gpt2",
        config_edit(layer_norm_epsilon=float("inf")),
        "layer_norm_epsilon Infinity",
    ),
    "an initializer_range that is no number": (
        "llama-gqa",
        config_edit(initializer_range="abc"),
        "config.json",
        "initializer_range 'abc'",
    ),
    # no tensor depends on these: the files' headers and this machine's memory bound them before anything is built
    "2**40 layers": (
        "llama-gqa",
        config_edit(num_hidden_layers=2**40),
        "config.json",
        "num_hidden_layers 1,099,511,627,776",
        "model.safetensors has tensors",
    ),
    "a context of 2**40": (
        "llama-gqa",
        config_edit(max_position_embeddings=2**40),
        "config.json",
        "max_position_embeddings 1,099,511,627,776",
        "RoPE tables of 384.00 TiB",
        "memory available",
    ),
    "weights named elsewhere": (
        "llama-gqa",
        config_edit(transformers_weights="other.safetensors"),
        "config.json",
        "transformers_weights",
    ),
    "inverse layer scaling": (
        "gpt2",
        config_edit(scale_attn_by_inverse_layer_idx=True),
        "config.json",
        "scale_attn_by_inverse_layer_idx true",
    ),
    "upcast attention": ("gpt2", config_edit(reorder_and_upcast_attn=True), "reorder_and_upcast_attn true"),
    "gelu in a gpt2": ("gpt2", config_edit(activation_function="gelu"), 'activation_function "gelu"', "gelu_new"),
    "cross-attention": ("gpt2", config_edit(add_cross_attention=True), "add_cross_attention true"),
    "eos out of range": (
        "gpt2",
        lambda d: edit_json(d / "generation_config.json", eos_token_id=50256),
        "generation_config.json",
        "eos_token_id 50256",
    ),
    "a missing tensor": (
        "llama-gqa",
        tensors_edit(lambda t: t.pop("model.layers.1.mlp.up_proj.weight")),
        "model.safetensors",
        "'model.layers.1.mlp.up_proj.weight'",
    ),
    "an extra tensor": (
        "gpt2",
        tensors_edit(lambda t: t.update({"transformer.h.0.mlp.gate.weight": torch.zeros(2)})),
        "model.safetensors",
        "'transformer.h.0.mlp.gate.weight'",
        "not part of the model",
    ),
    "a mismatched tensor": (
        "llama-gqa",
        config_edit(intermediate_size=96),
        "model.safetensors",
        "mlp.gate_proj.weight",
        "(128, 64)",
        "(96, 64)",
    ),
    "an untied head with tie_word_embeddings": (
        "llama-gqa",
        config_edit(tie_word_embeddings=True),
        "lm_head.weight",
        "tie_word_embeddings",
    ),
    "quantized weights": (
        "llama-gqa",
        tensors_edit(lambda t: t.update({"model.norm.weight": torch.ones(64, dtype=torch.int8)})),
        "'model.norm.weight'",
        "torch.int8",
    ),
    "a NaN weight": (
        "llama-gqa",
        poisoned("model.layers.1.mlp.up_proj.weight", torch.nan),
        "model.safetensors",
        "'model.layers.1.mlp.up_proj.weight'",
        "NaN or infinite",
    ),
    "an infinite weight": (
        "gpt2",
        poisoned("transformer.h.0.ln_1.bias", -torch.inf),
        "model.safetensors",
        "'transformer.h.0.ln_1.bias'",
        "NaN or infinite",
    ),
    "config.json a named pipe": (
        "llama-gqa",
        named_pipe("config.json"),
        "config.json",
        "not a regular file but a named pipe",
    ),
    "tokenizer.json a named pipe": ("gpt2", named_pipe("tokenizer.json"), "tokenizer.json", "named pipe"),
    "a shard a named pipe": (
        "llama-gqa",
        lambda d: [change(d) for change in (sharded_into("shard.safetensors"), named_pipe("shard.safetensors"))],
        "shard.safetensors",
        "named pipe",
    ),
    "pickled weights only": (
        "llama-gqa",
        lambda d: (d / "model.safetensors").rename(d / "pytorch_model.bin"),
        "no model.safetensors",
        "unpickling",
    ),
    "no config.json": ("llama-gqa", lambda d: (d / "config.json").unlink(), "config.json: no such file"),
    "no tokenizer": (
        "llama-gqa",
        lambda d: (d / "tokenizer.json").unlink(),
        "refused because of its tokenizer",
        "tokenizer.json: no such file",
    ),
    "a SentencePiece-style tokenizer": (
        "llama-gqa",
        lambda d: edit_json(d / "tokenizer.json", model__byte_fallback=True),
        "refused because of its tokenizer",
        "tokenizer.json",
        "model.byte_fallback",
    ),
    "a Metaspace pre-tokenizer": (
        "llama-gqa",
        lambda d: edit_json(
            d / "tokenizer.json",
            pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        ),
        "refused because of its tokenizer",
        "pre_tokenizer",
        "Metaspace",
    ),
    "a template after the text": (
        "llama-gqa",
        lambda d: edit_json(
            d / "tokenizer.json",
            post_processor__single=[
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": BEGIN, "type_id": 0}},
            ],
        ),
        "tokenizer.json",
        "post_processor",
    ),
    "a post_processor that is a string": (
        "llama-gqa",
        lambda d: edit_json(d / "tokenizer.json", post_processor="BertProcessing"),
        "tokenizer.json",
        'post_processor "BertProcessing" is not supported',
    ),
    "special_tokens a list": (
        "llama-gqa",
        lambda d: edit_json(d / "tokenizer.json", post_processor__special_tokens=[BEGIN]),
        "tokenizer.json",
        f'post_processor puts "{BEGIN}" before a text',
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refused_in_one_line_and_nothing_written(good_dirs, tmp_path, case):
    name, change, *needles = REFUSALS[case]
    hf_dir = spoiled(good_dirs, tmp_path, name, change)
    res = invoke("import-hf", "--from", hf_dir, "--out", tmp_path / "out")
    assert_input_error(res, *needles)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary directory left either


def test_a_directory_that_is_not_a_checkpoint_is_not_replaced(good_dirs, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    assert_input_error(
        invoke("import-hf", "--from", good_dirs["gpt2"], "--out", tmp_path / "mine"), "mine", "--overwrite"
    )
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"
    import_hf(good_dirs["gpt2"], tmp_path / "ckpt")
    import_hf(good_dirs["llama-gqa"], tmp_path / "ckpt")  # a checkpoint is replaced
    assert load_model(tmp_path / "ckpt")[0].config.architecture == "llama"
    assert_ok(invoke("import-hf", "--from", good_dirs["gpt2"], "--out", tmp_path / "mine", "--overwrite"))
    assert load_model(tmp_path / "mine")[0].config.architecture == "gpt2"


def test_a_training_checkpoint_is_not_replaced(good_dirs, tmp_path):
    """A checkpoint with files beside the model's (a training checkpoint's optimizer and trainer
    state) is no output of import-hf, which would lose them."""
    step = tmp_path / "run" / "checkpoints" / "step-000004"
    import_hf(good_dirs["gpt2"], step)
    (step / "trainer_state.json").write_text('{"step": 4}')
    before = files_of(step)
    assert_input_error(
        invoke("import-hf", "--from", good_dirs["llama-gqa"], "--out", step),
        f"--out {step}",
        "not a checkpoint of a model alone",
        "--overwrite",
    )
    assert files_of(step) == before


def files_of(directory):
    return {path.relative_to(directory): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def test_the_input_is_never_the_output_nor_holds_it_nor_lies_inside_it(good_dirs, tmp_path):
    hub = tmp_path / "hub"
    model = hub / "m"
    shutil.copytree(good_dirs["gpt2"], model)
    before = files_of(hub)
    for out, relation in ((model, "is"), (hub, "holds"), (model / "ckpt", "lies inside")):
        assert_input_error(
            invoke("import-hf", "--from", model, "--out", out, "--overwrite"),
            f"--out {out}: {relation} --from {model}, the input",
        )
    assert files_of(hub) == before
    ckpt = tmp_path / "ckpt"
    import_hf(model, ckpt)
    before = files_of(ckpt)
    for out, relation in ((ckpt, "is"), (tmp_path, "holds"), (ckpt / "hf", "lies inside")):
        assert_input_error(
            invoke("export-hf", "--checkpoint", ckpt, "--out", out, "--overwrite"),
            f"--out {out}: {relation} --checkpoint {ckpt}, the input",
        )
    assert files_of(ckpt) == before


def test_gpt2s_own_file_layout(good_dirs, tmp_path):
    """openai-community/gpt2's model.safetensors holds GPT2Model's names, without "transformer.",
    and each layer's causal mask, a buffer transformers skips (as the import does)."""

    def as_openai_wrote_it(hf_dir):
        tensors = load_file(hf_dir / "model.safetensors")
        renamed = {name.removeprefix("transformer."): tensor for name, tensor in tensors.items()}
        renamed.update({f"h.{i}.attn.bias": torch.ones(1, 1, 128, 128).tril() for i in range(2)})
        save_file(renamed, hf_dir / "model.safetensors", metadata={"format": "pt"})

    import_hf(good_dirs["gpt2"], tmp_path / "ckpt")
    import_hf(spoiled(good_dirs, tmp_path, "gpt2", as_openai_wrote_it), tmp_path / "again")
    assert_same_checkpoint(tmp_path / "ckpt", tmp_path / "again")


def test_a_single_file_beside_an_index_is_read_as_transformers_reads_it(good_dirs, small_tokenizer, tmp_path):
    """model.safetensors and model.safetensors.index.json of other weights: transformers reads the
    single file, and so does the import."""
    case = CASES["llama-gqa"]
    other = random_hf_model(
        case.architecture, hf_config(case, with_specials(small_tokenizer[0], case.specials)), seed=1
    )
    other.save_pretrained(tmp_path / "other", max_shard_size="60KB")

    def add_the_index_and_its_shards(hf_dir):
        for path in (tmp_path / "other").glob("model-*.safetensors"):
            shutil.copy(path, hf_dir)
        shutil.copy(tmp_path / "other" / "model.safetensors.index.json", hf_dir)

    hf_dir = spoiled(good_dirs, tmp_path, "llama-gqa", add_the_index_and_its_shards)
    import_hf(hf_dir, tmp_path / "ckpt")
    model, tok = load_model(tmp_path / "ckpt")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    idx = torch.randint(tok.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(logits(model, idx), logits(theirs, idx), atol=1e-4, rtol=0)
    assert (logits(other, idx) - logits(theirs, idx)).abs().max() > 0.1  # the index's weights are another model


# -- the gpt2 architecture trains and samples -----------------------------------------------------


@pytest.fixture(scope="module")
def data(small_tokenizer, tmp_path_factory):
    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    root = tmp_path_factory.mktemp("gpt2-data")
    (root / "docs.txt").write_text(EOT.join(english_like(200, seed=i) for i in range(40)))
    encode_corpus(
        Corpus([root / "docs.txt"]),
        small_tokenizer[0],
        root / "data",
        split=Split(val_fraction=0.1),
        shard_tokens=4000,
        workers=1,
        quiet=True,
    )
    return root / "data"


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_the_gpt2_architecture_trains_samples_and_exports(data, small_tokenizer, tmp_path, optimizer):
    from gptkit.train.config import TrainConfig
    from gptkit.train.run import train

    model = {
        "architecture": "gpt2",
        "context_length": 64,
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 2,
        "d_ff": 128,
        "tie_embeddings": True,
    }
    run = tmp_path / "run"
    train(
        TrainConfig.of(
            data=str(data),
            out=str(run),
            model=model,
            device="cpu",
            batch_size=4,
            context_length=32,
            max_steps=3,
            warmup_steps=1,
            lr=3e-3,
            optimizer=optimizer,
            eval_interval=0,
            eval_tokens=256,
            log_interval=1,
            sample_interval=2,
            sample_tokens=4,
            checkpoint_interval=0,
        )
    )
    losses = [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert len(losses) == 3 and losses[-1] < losses[0]
    trained, tok = load_model(run / "latest")
    assert trained.config.architecture == "gpt2"
    res = assert_ok(
        invoke(
            "--checkpoint",
            run / "latest",
            "--prompt",
            "the cat",
            "--max-new-tokens",
            8,
            "--seed",
            1,
            "--device",
            "cpu",
            command=sample_cli,
        )
    )
    assert res.stdout.startswith("the cat")
    assert_ok(invoke("export-hf", "--checkpoint", run / "latest", "--out", tmp_path / "hf"))
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert type(hf).__name__ == "GPT2LMHeadModel"
    idx = torch.randint(tok.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(logits(hf, idx), logits(trained.eval(), idx), atol=1e-4, rtol=0)
