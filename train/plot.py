"""`train plot`: a run's training and validation loss against tokens, with the learning rate, the
validation bits per byte and, for a run with --eval-hellaswag, its HellaSwag accuracy, as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import Input, StrPath, atomic_path, cause, check_output
from gptkit.shared.shard_dir import ShardDir

from .run_dir import CONFIG_FILE, METRICS_FILE, load_run_config, read_metrics

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CREATOR = "gptkit train plot"  # in the PNG's text chunks: how a plot tells itself from a user's picture


def plot_run(run_dir: StrPath, out: StrPath | None = None, overwrite: bool = False) -> Path:
    """Draw `run_dir`'s metrics.jsonl to `out` (default: RUN/loss.png), a PNG; the path written.
    An existing `out` is replaced if it is a plot of ours, anything else only with `overwrite`, and
    never the run's metrics.jsonl or config.json, which it reads."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(
            "plot: matplotlib is not installed (pip install matplotlib, or pip install -e '.[plot]')"
        ) from None
    run_dir = Path(run_dir)
    out = Path(out or run_dir / "loss.png")
    read = [Input(path, f"{path}, which it plots") for path in (run_dir / METRICS_FILE, run_dir / CONFIG_FILE)]
    check_output(out, _is_plot, "a gptkit loss plot", overwrite, inputs=read)
    records = read_metrics(run_dir)
    train = [r for r in records if "loss" in r]
    val = [r for r in records if "val_loss" in r]
    if not train:
        raise InputError(f"{run_dir / METRICS_FILE}: no training records yet")
    hellaswag = [r for r in val if "hellaswag_acc" in r]
    panels = 3 if hellaswag else 2
    fig, (loss_axis, bpb_axis, *hellaswag_axis) = plt.subplots(
        1, panels, figsize=(4 * panels + 4, 5), width_ratios=(2, 1, 1)[:panels], layout="constrained"
    )
    loss_axis.plot([r["tokens"] for r in train], [r["loss"] for r in train], label="train loss", color="tab:blue")
    if val:
        loss_axis.plot(
            [r["tokens"] for r in val], [r["val_loss"] for r in val], "o-", label="validation loss", color="tab:orange"
        )
    entropy = _unigram_entropy(run_dir)
    if entropy is not None:
        loss_axis.axhline(
            entropy, linestyle="--", color="tab:red", label=f"unigram entropy of the training tokens ({entropy:.2f})"
        )
    loss_axis.set_xlabel("tokens")
    loss_axis.set_ylabel("loss (nats per token)")
    lr_axis = loss_axis.twinx()
    lr_axis.plot(
        [r["tokens"] for r in train], [r["lr"] for r in train], label="learning rate", color="tab:gray", alpha=0.5
    )
    lr_axis.set_ylabel("learning rate")
    handles = loss_axis.get_lines() + lr_axis.get_lines()
    fig.legend(
        handles, [h.get_label() for h in handles], loc="outside lower center", ncols=len(handles)
    )  # off the data
    bpb = [r for r in val if "val_bpb" in r]
    bpb_axis.plot([r["tokens"] for r in bpb], [r["val_bpb"] for r in bpb], "o-", color="tab:green")
    bpb_axis.set_xlabel("tokens")
    bpb_axis.set_ylabel("validation bits per byte of text")
    bpb_axis.set_title("tokenizer-independent" if bpb else "no bits per byte recorded")
    if hellaswag:
        _plot_hellaswag(hellaswag_axis[0], hellaswag)
    fig.suptitle(str(run_dir))
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format="png", dpi=120, metadata={"Creator": CREATOR})
    except OSError as e:
        raise SettingError("out", f"{out}: cannot write there ({cause(e)})") from None
    return out


def _plot_hellaswag(axis: Axes, records: list[dict]) -> None:
    """HellaSwag's acc and acc_norm against tokens, above chance (a quarter: four endings)."""
    tokens = [r["tokens"] for r in records]
    axis.plot(tokens, [r["hellaswag_acc"] for r in records], "o-", label="acc", color="tab:purple")
    axis.plot(tokens, [r["hellaswag_acc_norm"] for r in records], "o-", label="acc_norm", color="tab:brown")
    axis.axhline(0.25, linestyle="--", color="tab:red", label="chance")
    axis.set_xlabel("tokens")
    axis.set_ylabel("HellaSwag accuracy")
    axis.legend()


def _is_plot(path: Path) -> bool:
    """Whether `path` is a PNG this wrote (its Creator text chunk comes before the image data)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(PNG_SIGNATURE) and b"tEXtCreator\x00" + CREATOR.encode() in head


def _unigram_entropy(run_dir: StrPath) -> float | None:
    """The unigram entropy of the run's training tokens, if its settings and data can be read."""
    try:
        return ShardDir(load_run_config(run_dir)["data"]).unigram_entropy
    except (InputError, KeyError, TypeError):
        return None
