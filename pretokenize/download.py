"""Public corpora, downloaded with resume and checked against the SHA-256 the server publishes
(Hugging Face names each file's in the `X-Linked-Etag` header; shared/download.py). One process
downloads into a directory at a time (shared/lock.py, output_lock).
"""

from __future__ import annotations

import os
from pathlib import Path

from gptkit.shared.download import download
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath, looked_up
from gptkit.shared.lock import output_lock

HF = "https://huggingface.co/datasets"
DATASETS = {
    # name: (training files, official validation files); `pretokenize --input DIR --val-input DIR-val`
    "tinystories": (
        [f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-train.txt"],
        [f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-valid.txt"],
    ),
    "fineweb-edu": ([f"{HF}/HuggingFaceFW/fineweb-edu/resolve/main/sample/10BT/000_00000.parquet"], []),
}


def val_dir(out_dir: StrPath) -> Path:
    """Where a dataset's official validation files go: beside its training files, not among
    them, so that a directory given as a corpus is training text only."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + "-val")


def download_dataset(name: str, out_dir: StrPath, quiet: bool = False, overwrite: bool = False) -> list[Path]:
    """Training files into `out_dir`, official validation files into `val_dir(out_dir)`."""
    if name not in DATASETS:
        raise InputError(f"DATASET {name!r}: unknown (known: {', '.join(DATASETS)})")
    out_dir = Path(out_dir)
    train_urls, val_urls = DATASETS[name]
    for directory in (out_dir, *([val_dir(out_dir)] if val_urls else [])):
        if looked_up(directory, "out").exists() and not directory.is_dir():
            which = "is a file" if directory == out_dir else f"its validation directory {directory} is a file"
            raise SettingError("out", f"{out_dir}: {which}; expected a directory for the downloaded files")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SettingError("out", f"{out_dir}: cannot make the directory ({e.strerror})") from None
    with output_lock(out_dir, "gptkit pretokenize download"):
        paths = [download(url, out_dir / _file_name(url), quiet, overwrite) for url in train_urls]
        for url in val_urls:
            val_dir(out_dir).mkdir(exist_ok=True)
            # Earlier versions downloaded validation files among the training files: move them (and
            # their checksum or partial download) out, rather than fetch them again.
            for name in (_file_name(url), f"{_file_name(url)}.sha256", f"{_file_name(url)}.part"):
                if (out_dir / name).exists():
                    os.replace(out_dir / name, val_dir(out_dir) / name)
            paths.append(download(url, val_dir(out_dir) / _file_name(url), quiet, overwrite))
    return paths


def _file_name(url: str) -> str:
    return url.rsplit("/", 1)[1]
