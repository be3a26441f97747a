"""Public corpora, downloaded with resume and checked against the SHA-256 the server publishes.

Hugging Face serves dataset files from Git LFS and names each file's SHA-256 in the
`X-Linked-Etag` header; a download goes to `NAME.part` (resumed with an HTTP Range request
after an interruption), is hashed, and is renamed into place only when the hash matches; its
hash goes to `NAME.sha256`. A `NAME` without it is kept if it has the published hash (a kill
came between the two), else it is not ours: it is replaced only with `overwrite`. One process
downloads into a directory at a time (shared/files.py, output_lock).
"""
from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import check_output, output_lock
from gptkit.shared.progress import Progress

HF = "https://huggingface.co/datasets"
DATASETS = {
    # name: (training files, official validation files); `pretokenize --input DIR --val-input DIR-val`
    "tinystories": ([f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-train.txt"],
                    [f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-valid.txt"]),
    "fineweb-edu": ([f"{HF}/HuggingFaceFW/fineweb-edu/resolve/main/sample/10BT/000_00000.parquet"], []),
}
CHUNK = 1 << 20


def val_dir(out_dir) -> Path:
    """Where a dataset's official validation files go: beside its training files, not among
    them, so that a directory given as a corpus is training text only."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + "-val")


def download_dataset(name, out_dir, quiet=False, overwrite=False) -> list[Path]:
    """Training files into `out_dir`, official validation files into `val_dir(out_dir)`."""
    if name not in DATASETS:
        raise InputError(f"DATASET {name!r}: unknown (known: {', '.join(DATASETS)})")
    out_dir = Path(out_dir)
    train_urls, val_urls = DATASETS[name]
    for directory in (out_dir, *([val_dir(out_dir)] if val_urls else [])):
        if directory.exists() and not directory.is_dir():
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


def _file_name(url):
    return url.rsplit("/", 1)[1]


def download(url, path, quiet=False, overwrite=False) -> Path:
    """Fetch `url` to `path` unless it is there already with the published SHA-256."""
    path = Path(path)
    expected, size = _published(url)
    checked = path.with_name(path.name + ".sha256")
    if path.exists() and checked.exists() and checked.read_text().strip() == expected:
        print(f"{path}: already downloaded and checked", file=sys.stderr)
        return path
    if path.is_file() and not checked.exists() and expected and _sha256(path) == expected:
        checked.write_text(expected + "\n")
        print(f"{path}: already downloaded, checked now", file=sys.stderr)
        return path
    check_output(path, lambda _: checked.exists(), "one this command downloaded (no .sha256 beside it)", overwrite)
    part = path.with_name(path.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    progress = Progress(f"downloading {path.name}", "MB", total=size, scale=1e6, quiet=quiet)
    try:
        with _open(request) as response, open(part, "ab" if response.status == 206 else "wb") as f:
            done = have if response.status == 206 else 0
            while block := response.read(CHUNK):
                f.write(block)
                done += len(block)
                progress.update(done)
    except OSError as e:
        raise InputError(f"{url}: the download stopped ({e}); run again to resume from {part}") from None
    progress.close()
    actual = _sha256(part)
    if expected and actual != expected:
        part.unlink()
        raise InputError(f"{url}: SHA-256 {actual}, the server publishes {expected}; the partial file was removed, run again")
    os.replace(part, path)
    checked.write_text(actual + "\n")
    return path


def _published(url):
    """(SHA-256, size) that the server gives for `url` (None where it gives none)."""
    with _open(urllib.request.Request(url, method="HEAD")) as response:
        etag = response.headers.get("X-Linked-Etag") or ""
        size = response.headers.get("X-Linked-Size") or response.headers.get("Content-Length")
    sha = etag.strip('"').removeprefix("W/").strip('"')
    return (sha if len(sha) == 64 else None), (int(size) if size else None)


def _open(request):
    try:
        return urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as e:
        raise InputError(f"{request.full_url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise InputError(f"{request.full_url}: cannot reach the server ({reason}); are you offline?") from None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
