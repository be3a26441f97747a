"""The texts of bench/recipe.py: four kinds of text, each cut to Tiny Shakespeare's size.

    apt-get install -y bible-kjv fortunes-ru
    python bench/corpora.py DIR [NAME ...]

writes DIR/NAME.txt for each corpus (default: all of CORPORA): UTF-8, "\\n" line ends, whole lines
only (the longest run of whole lines of at most SIZE bytes), deterministic for the same packages
and Python. Each source is decoded strictly as UTF-8, and each text checked before it is written:
no "\\r" (bench/recipe.py reads with universal newlines, so a "\\r" would make the text the models
see differ from the bytes the compressors see), no <|endoftext|> (ours makes the held-out tail a
document with it) and a line end in the first 90% (bench/recipe.py's split_text needs one). Then:

    python bench/recipe.py DIR/*.txt [--compressors-only]
"""
import hashlib
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[0] = str(HERE.parent)  # the repository, not bench/: `from bench.common import ...`

from bench.common import EOT  # noqa: E402 (after the path is set)

SHARED_DATA = HERE.parent.parent / "shared" / "data"
SIZE = 1_115_394  # bytes: Tiny Shakespeare's, so every corpus is as big as the one nanoGPT's char model was made for


def shakespeare():
    """English verse drama: Tiny Shakespeare (../shared/data/tinyshakespeare.txt, nanoGPT's
    shakespeare_char text), whole."""
    return (SHARED_DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")


def kjv():
    """English prose: the King James Bible from Debian's bible-kjv (the `bible` command), one verse
    a line, verse numbers and empty lines dropped, chapter titles ("Genesis 1") kept: the text of
    the README's `bible -l10000 Gen1:1-Rev22:21 | sed -E 's/^ +[0-9]+ //' | grep -v '^$'`, so its
    first SIZE bytes (Genesis to 1 Samuel) are the README's kjv.txt, byte for byte."""
    raw = run(["bible", "-l10000", "Gen1:1-Rev22:21"], "bible-kjv")  # -l: no wrapping of long verses
    lines = (re.sub(r"^ +[0-9]+ ", "", line) for line in raw.splitlines())
    return "".join(line + "\n" for line in lines if line)


def python_stdlib():
    """Source code: Python's standard library (sysconfig's "stdlib" path), its .py files in sorted
    order of their paths there, each whole, comments and docstrings and all: from __future__.py
    into asyncio/ for Python 3.11. site-packages (installed packages, when they live under the
    stdlib path) and _sysconfigdata_*.py (the build's paths and compiler flags, which differ from
    machine to machine) are left out, so the text depends only on the Python version."""
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    parts, size = [], 0
    for path in paths:
        if path.startswith(("site-packages/", "dist-packages/")) or Path(path).name.startswith("_sysconfigdata_"):
            continue
        try:
            text = (root / path).read_bytes().decode("utf-8")
        except UnicodeDecodeError:  # a few tests are in Latin-1 on purpose; none in the first SIZE bytes
            continue
        parts.append(text if text.endswith("\n") else text + "\n")
        size += len(text.encode("utf-8"))
        if size > SIZE:  # enough: the rest would be cut anyway
            break
    return "".join(parts)


def fortunes_ru():
    """Russian (Cyrillic script): Debian's fortunes-ru, aphorisms and jokes (about 75% Cyrillic
    letters, about 1% Latin), the files of /usr/share/games/fortunes/ru in sorted order of their
    names (the .u8 links to them and the .dat indexes left out): the 2001.03 to 2006.03 collections
    of Yevgeny Kashcheev, then the topic files ("M$", "adv", ..., into "e0" within SIZE bytes).
    Cleaned: each line's trailing spaces dropped and the "%" line between fortunes replaced by an
    empty line; the attribution lines ("\\t\\t-- Author") are kept. Cyrillic letters take 2 bytes
    in UTF-8, so its SIZE bytes are about 640,000 characters."""
    root = Path("/usr/share/games/fortunes/ru")
    if not root.is_dir():
        raise SystemExit(f"error: {root} not found: apt-get install -y fortunes-ru")
    fortunes = []
    for path in sorted(root.iterdir()):
        if path.is_symlink() or path.suffix == ".dat":
            continue
        for fortune in re.split(r"^%\n", path.read_text(encoding="utf-8"), flags=re.M):
            lines = [line.rstrip() for line in fortune.strip("\n").split("\n")]
            if any(lines):
                fortunes.append("\n".join(lines) + "\n")
    return "\n".join(fortunes)


CORPORA = {"shakespeare": shakespeare, "kjv": kjv, "python_stdlib": python_stdlib, "fortunes_ru": fortunes_ru}


def run(cmd, package):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, encoding="utf-8").stdout
    except FileNotFoundError:
        raise SystemExit(f"error: {cmd[0]} not found: apt-get install -y {package}") from None


def whole_lines(text, size=SIZE):
    """The longest prefix of whole lines of at most `size` UTF-8 bytes (cut at a "\\n", so never
    inside a character)."""
    data = text.encode("utf-8")
    return data[: data.rfind(b"\n", 0, size) + 1].decode("utf-8")


def check(name, text):
    if not text:
        raise SystemExit(f"error: {name} is empty")
    for bad, what in (("\r", "a carriage return"), (EOT, EOT)):
        if bad in text:
            raise SystemExit(f"error: {name} contains {what}")
    if "\n" not in text[: int(len(text) * 0.9)]:
        raise SystemExit(f"error: {name} has no line end in its first 90%")


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        raise SystemExit(__doc__)
    out, names = Path(sys.argv[1]), sys.argv[2:] or list(CORPORA)
    for name in names:
        if name not in CORPORA:
            raise SystemExit(f"error: no corpus {name!r}; corpora: {', '.join(CORPORA)}")
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = whole_lines(CORPORA[name]())
        check(name, text)
        data, lines = text.encode("utf-8"), text.count("\n")
        (out / f"{name}.txt").write_bytes(data)
        print(f"{out / name}.txt: {len(data):,} bytes, {len(text):,} characters, {lines:,} lines, "
              f"md5 {hashlib.md5(data).hexdigest()}")


if __name__ == "__main__":
    main()
