"""`train plot`: a run's training and validation loss against tokens, with the learning rate and
the validation bits per byte, as a PNG."""
from __future__ import annotations

from pathlib import Path

from gptkit.shared.errors import InputError

from .data import unigram_entropy
from .run_dir import METRICS_FILE, load_run_config, read_metrics


def plot_run(run_dir, out=None) -> Path:
    """Draw `run_dir`'s metrics.jsonl to `out` (default: RUN/loss.png); the path written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plot: matplotlib is not installed (pip install matplotlib, or pip install -e '.[plot]')") from None
    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    train = [r for r in records if "loss" in r]
    val = [r for r in records if "val_loss" in r]
    if not train:
        raise InputError(f"{run_dir / METRICS_FILE}: no training records yet")
    fig, (loss_axis, bpb_axis) = plt.subplots(1, 2, figsize=(12, 5), width_ratios=(2, 1), layout="constrained")
    loss_axis.plot([r["tokens"] for r in train], [r["loss"] for r in train], label="train loss", color="tab:blue")
    if val:
        loss_axis.plot([r["tokens"] for r in val], [r["val_loss"] for r in val], "o-", label="validation loss", color="tab:orange")
    entropy = _unigram_entropy(run_dir)
    if entropy is not None:
        loss_axis.axhline(entropy, linestyle="--", color="tab:red", label=f"unigram entropy of the training tokens ({entropy:.2f})")
    loss_axis.set_xlabel("tokens")
    loss_axis.set_ylabel("loss (nats per token)")
    lr_axis = loss_axis.twinx()
    lr_axis.plot([r["tokens"] for r in train], [r["lr"] for r in train], label="learning rate", color="tab:gray", alpha=0.5)
    lr_axis.set_ylabel("learning rate")
    handles = loss_axis.get_lines() + lr_axis.get_lines()
    fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncols=len(handles))  # off the data
    bpb = [r for r in val if "val_bpb" in r]
    bpb_axis.plot([r["tokens"] for r in bpb], [r["val_bpb"] for r in bpb], "o-", color="tab:green")
    bpb_axis.set_xlabel("tokens")
    bpb_axis.set_ylabel("validation bits per byte of text")
    bpb_axis.set_title("tokenizer-independent" if bpb else "no bits per byte recorded")
    fig.suptitle(str(run_dir))
    out = out or run_dir / "loss.png"
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        raise InputError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    return out


def _unigram_entropy(run_dir):
    """The unigram entropy of the run's training tokens, if its settings and data can be read."""
    try:
        return unigram_entropy(load_run_config(run_dir)["data"])
    except (InputError, KeyError, TypeError):
        return None
