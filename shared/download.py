"""Downloads with resume: a file goes to `NAME.part` (resumed with an HTTP Range request after an
interruption), is checked, and is renamed into place only then; its SHA-256 goes to
`NAME.sha256`. Where the server publishes the file's SHA-256 (Hugging Face names it in the
`X-Linked-Etag` header of its Git LFS files) the download must have it; a `NAME` without the
`.sha256` is kept if it has the published hash (a kill came between the two), else it is not
ours: it is replaced only with `overwrite`. Where the server publishes none, `NAME` is kept while
it has the hash recorded when it was downloaded, and `check` (a format check) stands in for the
hash."""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, check_output
from gptkit.shared.progress import Progress

CHUNK = 1 << 20


def download(
    url: str,
    path: StrPath,
    quiet: bool = False,
    overwrite: bool = False,
    check: Callable[[Path], object] | None = None,
) -> Path:
    """Fetch `url` to `path` unless it is there already with the published SHA-256 (or, where
    none is published, the one recorded when it was downloaded). `check(part)`: raises InputError
    for a downloaded file that is not what was expected, before it takes the name `path`."""
    path = Path(path)
    expected, size = _published(url)
    checked = path.with_name(path.name + ".sha256")
    if path.is_file() and checked.exists() and checked.read_text().strip() == (expected or _sha256(path)):
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
        raise InputError(
            f"{url}: SHA-256 {actual}, the server publishes {expected}; the partial file was removed, run again"
        )
    if check is not None:
        try:
            check(part)
        except InputError:
            part.unlink()  # complete but wrong: resuming it would only append to it
            raise
    os.replace(part, path)
    checked.write_text(actual + "\n")
    return path


def _published(url: str) -> tuple[str | None, int | None]:
    """(SHA-256, size) that the server gives for `url` (None where it gives none)."""
    with _open(urllib.request.Request(url, method="HEAD")) as response:
        etag = response.headers.get("X-Linked-Etag") or ""
        size = response.headers.get("X-Linked-Size") or response.headers.get("Content-Length")
    sha = etag.strip('"').removeprefix("W/").strip('"')
    return (sha if len(sha) == 64 else None), (int(size) if size else None)


def _open(request: urllib.request.Request) -> Any:  # an HTTP response (urlopen's type)
    try:
        return urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as e:
        raise InputError(f"{request.full_url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise InputError(f"{request.full_url}: cannot reach the server ({reason}); are you offline?") from None


def _sha256(path: StrPath) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
