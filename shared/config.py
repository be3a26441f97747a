"""Settings files: a preset shipped with a package, named, or any JSON file, by its path."""

from pathlib import Path
from typing import Any

from gptkit.shared.errors import SettingError
from gptkit.shared.files import StrPath, looked_up
from gptkit.shared.jsonfile import read_json


def preset_names(presets_dir: StrPath) -> list[str]:
    return sorted(p.stem for p in Path(presets_dir).glob("*.json"))


def read_settings(name_or_path: StrPath, presets_dir: StrPath, what: str) -> tuple[dict[str, Any], Path]:
    """The JSON object of a preset of `presets_dir` (a name without a suffix that is no file)
    or of a file, and the path it came from; `what` names its contents in errors. The setting is
    `config`, as the commands call a preset or settings file."""
    path = looked_up(name_or_path, "config")
    if not path.suffix and not path.exists():
        path = Path(presets_dir) / f"{name_or_path}.json"
        if not path.exists():
            raise SettingError(
                "config", f"{name_or_path}: no such preset (presets: {', '.join(preset_names(presets_dir))}) or file"
            )
    try:
        settings = read_json(path)
    except OSError as e:
        raise SettingError("config", f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:
        raise SettingError("config", f"{path}: not valid JSON ({e})") from None
    if not isinstance(settings, dict):
        raise SettingError("config", f"{path}: expected a JSON object of {what}")
    return settings, path
