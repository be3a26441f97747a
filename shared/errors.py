"""The errors the stages raise for what they cannot do. Plain exceptions: a library caller
catches them like any other; the command-line interfaces (shared/cli.py) show them as one
line, `Error: <message>`, and exit with their `exit_code`."""


class GptkitError(Exception):
    """Something a stage cannot do; the command exits with status 1."""

    exit_code = 1


class InputError(GptkitError):
    """A problem with what the user gave us (a file, a setting, a value): exit status 2."""

    exit_code = 2


class SettingError(InputError):
    """A setting whose value cannot work. `setting` is its name in the library (a config field,
    a function's argument: `batch_size`); a command line names its flag instead (`--batch-size`)."""

    def __init__(self, setting: str, problem: str):
        super().__init__(f"{setting} {problem}")
        self.setting, self.problem = setting, problem
