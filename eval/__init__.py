"""The eval stage: a checkpoint's loss and bits per byte on any text or a data directory's
validation split, and its accuracy on multiple-choice sets (HellaSwag, or your own) scored as
llm.c scores HellaSwag. The trainer's validation uses the same code (train/evaluate.py).

    from gptkit.eval import Scorer, hellaswag_accuracy, text_loss, val_loss

    scorer = Scorer.load("runs/demo/latest")  # or pass the directory to each function
    print(text_loss(scorer, ["book.txt"]).bpb, val_loss(scorer, "out/stories").loss)
    print(hellaswag_accuracy(scorer, limit=500, out="hellaswag.json").acc_norm)

Each function is a command of `gptkit eval` (cli.py), its arguments the command's flags: it
returns the numbers the command prints (a frozen dataclass: TextLoss, Accuracy) and, given
`out`, writes the results file --out writes (results.py). Its errors are SettingErrors naming
its arguments (`batch_size`), which the command shows as flags (`--batch-size`).

The names load their modules when first used (PEP 562): `gptkit eval --help` imports this
package, and must not import torch (2-3 s).
"""

from gptkit.shared.lazy import lazy_names

_MODULE_OF = {
    "Scorer": "scorer",
    "TextLoss": "text",
    "text_loss": "text",
    "val_loss": "text",
    "Accuracy": "choice",
    "hellaswag_accuracy": "choice",
    "choice_accuracy": "choice",
    "download_hellaswag": "tasks",
}
__all__ = sorted(_MODULE_OF)

__getattr__ = lazy_names(__name__, _MODULE_OF)
