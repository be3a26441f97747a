"""pretokenize download: resume with Range, SHA-256 check against the published hash, a clear error offline."""

import hashlib
import io
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import gptkit.pretokenize.download as dl
from gptkit.pretokenize.cli import cli
from tests.conftest import assert_input_error

PAYLOAD = bytes(range(256)) * 5000  # 1.28 MB: two read chunks


class FakeResponse(io.BytesIO):
    def __init__(self, body, status, headers):
        super().__init__(body)
        self.status, self.headers = status, headers

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeServer:
    """Serves PAYLOAD with its SHA-256 in X-Linked-Etag; honours Range; can die after some bytes."""

    def __init__(self, published=None, die_after=None):
        self.published = published or hashlib.sha256(PAYLOAD).hexdigest()
        self.die_after, self.ranges = die_after, []

    def __call__(self, request, timeout=None):
        headers = {"X-Linked-Etag": f'"{self.published}"', "X-Linked-Size": str(len(PAYLOAD))}
        if request.get_method() == "HEAD":
            return FakeResponse(b"", 200, headers)
        start = int(request.headers.get("Range", "bytes=0-")[6:-1])
        self.ranges.append(start)
        body = PAYLOAD[start:]
        if self.die_after is not None:
            body, self.die_after = body[: self.die_after], None
            response = FakeResponse(body, 206 if start else 200, headers)
            real_read = response.read
            response.read = lambda n=-1: real_read(n) or (_ for _ in ()).throw(ConnectionResetError("connection reset"))
            return response
        return FakeResponse(body, 206 if start else 200, headers)


def test_download_resumes_and_checks(tmp_path, monkeypatch):
    server = FakeServer(die_after=300_000)
    monkeypatch.setattr(urllib.request, "urlopen", server)
    target = tmp_path / "corpus.txt"
    with pytest.raises(dl.InputError, match="run again to resume"):
        dl.download("https://example.org/corpus.txt", target, quiet=True)
    assert not target.exists() and (tmp_path / "corpus.txt.part").stat().st_size == 300_000
    dl.download("https://example.org/corpus.txt", target, quiet=True)
    assert server.ranges == [0, 300_000]  # the second request asked only for the rest
    assert target.read_bytes() == PAYLOAD and not (tmp_path / "corpus.txt.part").exists()
    dl.download("https://example.org/corpus.txt", target, quiet=True)  # checked already: nothing fetched
    assert server.ranges == [0, 300_000]


def test_download_refuses_a_wrong_hash(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", FakeServer(published="0" * 64))
    with pytest.raises(dl.InputError, match="SHA-256"):
        dl.download("https://example.org/corpus.txt", tmp_path / "corpus.txt", quiet=True)
    assert list(tmp_path.iterdir()) == []  # nothing that looks complete, no partial file either


def test_offline_is_one_clear_line(tmp_path, monkeypatch):
    def offline(request, timeout=None):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    res = CliRunner().invoke(cli, ["download", "tinystories", "--out", str(tmp_path)])
    assert_input_error(res, "huggingface.co", "offline")


def test_unknown_dataset():
    assert_input_error(CliRunner().invoke(cli, ["download", "wikipedia"]), "wikipedia", "tinystories", "fineweb-edu")


def test_out_that_is_a_file_is_one_line_and_left_alone(tmp_path, two_file_dataset):
    mine = tmp_path / "notes"
    mine.write_text("mine")
    assert_input_error(CliRunner().invoke(cli, ["download", "stories", "--out", str(mine)]), f"--out {mine}: is a file")
    (tmp_path / "data-val").write_text("mine too")  # the validation files' directory, DIR-val
    assert_input_error(
        CliRunner().invoke(cli, ["download", "stories", "--out", str(tmp_path / "data")]), "data-val is a file"
    )
    assert (
        mine.read_text() == "mine" and (tmp_path / "data-val").read_text() == "mine too" and not two_file_dataset.ranges
    )


@pytest.fixture
def two_file_dataset(monkeypatch):
    """A dataset of one training and one validation file, both PAYLOAD, served by a FakeServer."""
    server = FakeServer()
    monkeypatch.setattr(urllib.request, "urlopen", server)
    monkeypatch.setitem(
        dl.DATASETS, "stories", (["https://example.org/s-train.txt"], ["https://example.org/s-valid.txt"])
    )
    return server


def test_the_validation_file_goes_beside_the_training_files_not_among_them(tmp_path, two_file_dataset):
    paths = dl.download_dataset("stories", tmp_path / "stories", quiet=True)
    assert paths == [tmp_path / "stories/s-train.txt", tmp_path / "stories-val/s-valid.txt"]
    assert sorted(p.name for p in (tmp_path / "stories").iterdir()) == ["s-train.txt", "s-train.txt.sha256"]
    assert sorted(p.name for p in (tmp_path / "stories-val").iterdir()) == ["s-valid.txt", "s-valid.txt.sha256"]


def test_a_validation_file_left_among_the_training_files_is_moved_out_not_fetched_again(tmp_path, two_file_dataset):
    old = tmp_path / "stories"
    old.mkdir()
    (old / "s-valid.txt").write_bytes(PAYLOAD)
    (old / "s-valid.txt.sha256").write_text(hashlib.sha256(PAYLOAD).hexdigest() + "\n")
    dl.download_dataset("stories", old, quiet=True)
    assert two_file_dataset.ranges == [0]  # the training file only
    assert not (old / "s-valid.txt").exists() and (tmp_path / "stories-val/s-valid.txt").read_bytes() == PAYLOAD


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("with_val", [True, False])
def test_make_encode_takes_the_validation_text_beside_the_corpus(tmp_path, with_val):
    corpus = tmp_path / "data/tinystories"
    corpus.mkdir(parents=True)
    if with_val:
        (tmp_path / "data/tinystories-val").mkdir()
    res = subprocess.run(
        ["make", "-n", "-C", str(Path(__file__).parents[2]), "encode", f"CORPUS={corpus}"],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(line for line in res.stdout.splitlines() if "gptkit pretokenize" in line)
    assert f"--input {corpus} " in line
    assert (f"--val-input {corpus}-val" in line) == with_val
