"""The errors the stages raise for what they cannot do. Plain exceptions: a library caller
catches them like any other; the command-line interfaces (shared/cli.py) show them as one
line, `Error: <message>`, and exit with their `exit_code`."""

import re


class GptkitError(Exception):
    """Something a stage cannot do; the command exits with status 1."""

    exit_code = 1


class InputError(GptkitError):
    """A problem with what the user gave us (a file, a setting, a value): exit status 2."""

    exit_code = 2


# Marks another setting's name inside a problem (named), so that a command line can show its flag. Private-use
# characters: no text a user gives is rewritten by mistake.
NAMED = re.compile("\ue000([a-z0-9_]+)\ue001")


def named(setting: str) -> str:
    """Another setting's name, written into a SettingError's problem: `batch_size` to a library caller,
    `--batch-size` on a command line."""
    return f"\ue000{setting}\ue001"


class SettingError(InputError):
    """A setting whose value cannot work. `setting` is its name in the library (a config field,
    a function's argument: `batch_size`); a command line names its flag instead (`--batch-size`).
    The `problem` may name other settings with named()."""

    def __init__(self, setting: str, problem: str) -> None:
        self.setting, self.marked = setting, problem
        self.problem = NAMED.sub(r"\1", problem)
        super().__init__(f"{setting} {self.problem}")
