"""--log-to: TensorBoard's event files and an offline wandb run, read back with their own readers,
hold every record of metrics.jsonl (the same names, steps and values; samples as text), a resumed
run included; a tracker that cannot start or write is one warning line and the run goes on."""

import builtins
import json
import struct
import sys
from pathlib import Path

import pytest

from gptkit.train.config import TrainConfig
from gptkit.train.run import train
from gptkit.train.trackers import TensorBoard, flatten
from tests.conftest import assert_input_error
from tests.training import config, invoke, run_flags, stopped_after

pytest.importorskip("tensorboard")
pytest.importorskip("wandb")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


@pytest.fixture(autouse=True)
def wandb_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))


def expected(run):
    """metrics.jsonl's scalars and texts: {(name, step): value}."""
    scalars, texts = {}, {}
    for record in map(json.loads, (Path(run) / "metrics.jsonl").read_text().splitlines()):
        for name, value in flatten(record).items():
            (texts if isinstance(value, str) else scalars)[name, record["step"]] = value
    return scalars, texts


def tensorboard_events(run):
    events = EventAccumulator(str(Path(run) / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    scalars = {(tag, e.step): e.value for tag in events.Tags()["scalars"] for e in events.Scalars(tag)}
    texts = {
        (tag.removesuffix("/text_summary"), e.step): e.tensor_proto.string_val[0].decode()
        for tag in events.Tags()["tensors"]
        for e in events.Tensors(tag)
    }
    return scalars, texts


def wandb_history(run):
    """The history rows of the run's offline wandb runs, from their .wandb files: a LevelDB log of
    wandb's Record protobufs (the format of wandb-core, which ships no Python reader)."""
    from wandb.proto.wandb_internal_pb2 import Record

    rows = []
    for path in sorted(Path(run, "wandb").glob("offline-run-*/run-*.wandb")):
        data, position, chunks = path.read_bytes(), 7, b""  # 7: the file's header, ":W&B" and its version
        while position + 7 <= len(data):
            if 32768 - position % 32768 < 7:  # a block's tail too short for a header is padding
                position += 32768 - position % 32768
                continue
            _, length, kind = struct.unpack("<IHB", data[position : position + 7])
            chunks += data[position + 7 : position + 7 + length]
            position += 7 + length
            if kind in (1, 4):  # a whole record, or the last piece of one
                record = Record.FromString(chunks)
                chunks = b""
                if record.HasField("history"):
                    items = {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.history.item
                    }
                    rows.append({"_step": record.history.step.num, **items})
    return rows


def test_every_record_reaches_tensorboard_and_wandb(data, model_json, tmp_path):
    run = tmp_path / "run"
    train(config(data, run, model_json, log_to="tensorboard,wandb", eval_interval=2, sample_interval=2), threads=1)
    scalars, texts = expected(run)
    assert {name for name, _ in scalars} >= {"loss", "lr", "val_loss", "tokens"} and {name for name, _ in texts} == {
        "sample"
    }
    tb_scalars, tb_texts = tensorboard_events(run)
    assert tb_scalars.keys() == scalars.keys() and tb_texts == texts
    for key, value in scalars.items():
        assert tb_scalars[key] == pytest.approx(value, rel=1e-6, abs=1e-30), key  # float32
    rows = wandb_history(run)
    logged = {(name, row["_step"]): value for row in rows for name, value in row.items() if not name.startswith("_")}
    assert logged == {**scalars, **texts}
    assert (run / "wandb" / "gptkit-run-id").read_text().strip() in str(next((run / "wandb").glob("offline-run-*")))


def test_the_wandb_file_is_whole_when_the_run_returns(data, model_json, tmp_path, monkeypatch):
    """run.finish() returns before wandb's service process writes the run's records: they reach
    the .wandb file when the service closes the run's stream, on a request finish() sends without
    waiting for it. Held back here (the service not yet at it when train() returns, as on a busy
    machine), the file is whole all the same: the tracker waits for the service to close it."""
    from wandb.sdk.lib.service.service_connection import ServiceConnection

    monkeypatch.setattr(ServiceConnection, "inform_finish", lambda self, run_id: None)
    run = tmp_path / "run"
    train(config(data, run, model_json, log_to="wandb", max_steps=3), threads=1)
    assert [row["_step"] for row in wandb_history(run) if "loss" in row] == [1, 2, 3]


def test_a_resumed_run_appends_without_duplicates(data, model_json, tmp_path):
    run = tmp_path / "run"
    settings = dict(log_to=["tensorboard", "wandb"], checkpoint_interval=2, max_steps=4)
    train(config(data, run, model_json, **settings), threads=1)
    first_id = (run / "wandb" / "gptkit-run-id").read_text()
    stopped_after(run, 2)  # steps 3 and 4 are done again: metrics.jsonl and TensorBoard drop the first ones
    assert TrainConfig.of(**json.loads((run / "config.json").read_text())).metrics.log_to == ["tensorboard", "wandb"]
    train(TrainConfig.of(**{**json.loads((run / "config.json").read_text()), "max_steps": 5}), resume=True, threads=1)
    scalars, _ = expected(run)
    tb_scalars, _ = tensorboard_events(run)
    assert tb_scalars.keys() == scalars.keys()
    assert all(tb_scalars[key] == pytest.approx(value, rel=1e-6) for key, value in scalars.items())
    assert (run / "wandb" / "gptkit-run-id").read_text() == first_id  # the same wandb run goes on
    assert {row["_step"] for row in wandb_history(run) if "loss" in row} == {1, 2, 3, 4, 5}


def test_unknown_trackers_are_refused(data, model_json, tmp_path):
    assert_input_error(
        invoke(*run_flags(data, tmp_path / "run", model_json, max_steps=1, log_to="tensorboard,mlflow")),
        "--log-to",
        "'mlflow'",
        "tensorboard, wandb",
    )
    assert TrainConfig.of(data="d", out="o", log_to=" wandb,,wandb ").metrics.log_to == ["wandb"]
    assert TrainConfig.of(data="d", out="o", log_to="").metrics.log_to is None


def test_a_missing_package_is_one_warning_and_the_run_goes_on(data, model_json, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_wandb(name, *args, **kw):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kw)

    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_wandb)
    run = tmp_path / "run"
    res = invoke(*run_flags(data, run, model_json, max_steps=2, log_to="wandb,tensorboard", threads=1))
    assert res.exit_code == 0, res.output
    assert res.stderr == (
        "warning: --log-to wandb: the wandb package is not installed (pip install 'gptkit[wandb]'); "
        "going on without it\n"
    )
    scalars, _ = expected(run)
    assert [step for name, step in scalars if name == "loss"] == [1, 2]
    assert tensorboard_events(run)[0].keys() == scalars.keys()  # the other tracker is unaffected


def test_a_tracker_that_fails_to_start_or_write_is_one_warning(data, model_json, tmp_path, monkeypatch):
    import wandb

    def refuse(*args, **kw):
        raise wandb.Error("api_key not configured\n(no-tty)")

    def broken(*args):
        raise OSError("No space left on device")

    monkeypatch.setattr(wandb, "init", refuse)
    monkeypatch.setattr(TensorBoard, "send", broken)
    run = tmp_path / "run"
    res = invoke(*run_flags(data, run, model_json, max_steps=3, log_to="tensorboard,wandb", threads=1))
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [
        "warning: --log-to wandb: cannot start (api_key not configured (no-tty)); going on without it",
        "warning: --log-to tensorboard: cannot write (No space left on device); going on without it",
    ]
    assert [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r] == [
        1,
        2,
        3,
    ]
