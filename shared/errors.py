"""The one error type a stage raises for bad user input."""
import click


class InputError(click.ClickException):
    """A problem with what the user gave us (a file, a flag, a value).

    The CLIs show it as a single line, `Error: <message>`, and exit with status 2;
    library callers can catch it like any exception.
    """

    exit_code = 2
