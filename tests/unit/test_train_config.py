"""The training settings (train/config.py): checked when made, one flag per field, presets, lengths."""

import dataclasses
import json
import re

import pytest

from gptkit.model.config import preset_names as model_preset_names
from gptkit.shared.errors import SettingError
from gptkit.train.cli import cli
from gptkit.train.config import SETTINGS, TrainConfig, preset_names
from gptkit.train.settle import load_train_config


def test_every_field_of_train_config_is_a_flag_with_its_help_and_type():
    options = {option.name: option for option in cli.commands["run"].params if option.name in SETTINGS}
    assert list(options) == list(SETTINGS)
    click_types = {bool: "boolean", int: "integer", float: "float", str: "text"}
    for name, option in options.items():
        assert option.help.startswith(SETTINGS[name].help), name
        default = SETTINGS[name].default
        if default not in (None, dataclasses.MISSING):
            assert option.type.name == click_types[type(default)], name


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("batch_size", 0, "batch_size 0: expected a whole number, 1 or more"),
        ("lr", float("nan"), "lr nan: expected a finite number 0 or more"),
        ("loader", "shuffled", "loader 'shuffled': expected one of random, sequential"),
        ("verify_data", "no", "verify_data 'no': expected true or false"),
        ("max_time", "soon", "max_time 'soon': expected a duration above 0"),
        ("max_time", "99999999999h", "max_time '99999999999h': longer than a year; at most 8784h"),
        ("max_time", "9" * 400 + "h", "max_time '999"),  # not an infinite budget
        ("data", "", "data '': expected a pretokenize output directory"),
        ("model", 3, "model 3: expected a preset name"),
    ],
)
def test_a_train_config_checks_every_field_when_made_and_names_it(setting, value, message):
    with pytest.raises(SettingError, match=f"^{re.escape(message)}") as error:
        TrainConfig.of(**{"data": "d", "out": "o", setting: value})
    assert error.value.setting == setting  # the command line shows the flag, --batch-size ...


@pytest.mark.parametrize(
    "given, message",
    [
        (
            {"max_steps": 3, "max_tokens": 999},
            "max_steps 3 and max_tokens 999: give one (each sets the length of the run)",
        ),
        ({"max_tokens": 999, "max_time": "1m"}, "max_tokens 999 and max_time 1m: give one"),
        ({"lr": 0.0, "min_lr": 1e-4}, "min_lr 0.0001: above the peak lr 0.0"),
        ({"schedule": "wsd", "decay_steps": 50}, "decay_steps 50: only with schedule cosine"),
    ],
)
def test_settings_that_cannot_hold_together_are_refused_naming_the_first(given, message):
    """Where a setting would be dropped or overruled by another, the two are refused together."""
    with pytest.raises(SettingError, match=f"^{re.escape(message)}") as error:
        TrainConfig.of(data="d", out="o", **given)
    assert error.value.setting == message.split()[0]


def test_a_train_config_takes_paths_and_needs_data_and_out(tmp_path):
    config = TrainConfig.of(data=tmp_path / "d", out=tmp_path / "o")
    assert config.job.data == str(tmp_path / "d") and json.loads(json.dumps(config.to_dict()))["out"] == str(
        tmp_path / "o"
    )
    with pytest.raises(SettingError, match="^out is needed"):
        load_train_config("tiny", {"data": "d"})


@pytest.mark.parametrize("model", model_preset_names())
def test_every_model_preset_has_a_training_preset(model):
    config = load_train_config(model, {"data": "d", "out": "o"})
    assert config.job.model == model and config.optim.lr > config.lr_schedule.min_lr


def test_a_length_on_the_command_line_beats_the_presets():
    where = {"data": "d", "out": "o"}
    assert load_train_config("gpt2-small", where).length.max_tokens == 10_000_000_000
    assert load_train_config("gpt2-small", {**where, "max_steps": 12}).length.max_tokens is None
    assert load_train_config("gpt2-small", {**where, "max_tokens": 5000}).length.max_tokens == 5000
    assert load_train_config("gpt2-small", {**where, "max_time": "1m"}).length.max_tokens is None


@pytest.mark.parametrize("preset", preset_names())
def test_presets_compile_on_cuda_only(preset):
    assert (
        load_train_config(preset, {"data": "d", "out": "o"}).parallelism.compile is None
    )  # None: compile where the device is CUDA


def test_data_not_recorded_by_an_old_checkpoint_is_named_however_the_run_lost_it(tmp_path):
    """A checkpoint from before runs recorded their data's content is resumed with the data at the
    place config.json names: where that place is gone, or config.json (edited) names none, the
    line says which."""
    from gptkit.train.resume import _check_data

    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    with pytest.raises(SettingError, match=rf"^data {re.escape(new)}: .*and the run's config.json names none: resume"):
        _check_data(None, None, new, {})
    with pytest.raises(SettingError, match=rf"and {re.escape(old)} is gone: resume"):
        _check_data(None, old, new, {})
