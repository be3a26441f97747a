"""What every command shares: one grammar, one-line errors, `--version`, `--threads`, logging.

- A usage error (unknown option, bad value, mistyped command) is one line with the help
  command to run; a mistyped command gets a suggestion (`no such command 'plto'; did you mean
  'plot'?`).
- A library error (shared/errors.py) is one line, `Error: <message>`, exit status 2 for input
  and 1 for a failure; a SettingError names the setting's flag.
- Warnings go through `logging` (logger `gptkit`), as `warning: ...` on standard error, from
  rank 0 only under torchrun.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar

import click

from gptkit import __version__

from .errors import NAMED, GptkitError, SettingError
from .workers import MAX_THREADS, cores_per_process, default_threads

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

# What click's decorators take and give back: a command's function, or a command already made.
FC = TypeVar("FC", bound="Callable[..., Any] | click.Command")


def flag(setting: str) -> str:
    """The command-line flag of a setting: batch_size -> --batch-size."""
    return "--" + setting.replace("_", "-")


def _one_line(error: click.UsageError) -> click.UsageError:
    """Click shows a usage error in three lines (the usage, a hint, the error); without a
    context it shows the error line alone, so the hint moves into that line."""
    ctx = error.ctx
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    one = click.UsageError(error.format_message() + hint)
    one.exit_code = error.exit_code  # type: ignore[misc]  # click types exit_code a ClassVar; an instance's own is what exit() uses
    return one


def error_line(error: GptkitError) -> str:
    """What a command shows of a library error, after `Error: `: a SettingError names its flag."""
    if not isinstance(error, SettingError):
        return str(error)
    return f"{flag(error.setting)} {NAMED.sub(lambda m: flag(m.group(1)), error.marked)}"


def _as_click(error: GptkitError) -> click.ClickException:
    shown = click.ClickException(error_line(error))
    shown.exit_code = error.exit_code  # type: ignore[misc]  # click types exit_code a ClassVar; an instance's own is what exit() uses
    return shown


# A mixin for click's commands: mypy reads it as one, so that its super() calls are checked.
if TYPE_CHECKING:
    _MixinBase = click.Command
else:
    _MixinBase = object


class _OneLine(_MixinBase):
    """Usage errors and library errors in one line; logging set up before the command runs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise _one_line(e) from None
        except GptkitError as e:  # a default read from the environment (threads_option's OMP_NUM_THREADS)
            raise _as_click(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        configure_logging()
        try:
            return super().invoke(ctx)
        except GptkitError as e:
            raise _as_click(e) from None


class Command(_OneLine, click.Command):
    """A command of ours."""


class Group(_OneLine, click.Group):
    """A group of ours: its commands are ours too, listed in the order of their use."""

    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            self.no_such_command(ctx, args[0])
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            raise _one_line(e) from None

    def no_such_command(self, ctx: click.Context, word: str) -> NoReturn:
        close = difflib.get_close_matches(word, self.list_commands(ctx), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (commands: {', '.join(self.list_commands(ctx))})"
        raise _one_line(click.UsageError(f"No such command {word!r}{hint}", ctx))


Group.group_class = Group


class DefaultGroup(Group):
    """A group whose first command is the default: `tool --flag` means `tool first --flag`.

    A first word that is no command goes to the default command only where that command takes
    it (a path it reads); a word like a command's name (`plto`, `inpsect`) that is no existing
    path is a mistyped command. `tool --help` shows the default command's options with the group's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names and args[0] != "--version":
            default = next(iter(self.commands))
            word = args[0]
            if not word.startswith("-"):
                takes_words = any(isinstance(p, click.Argument) for p in self.commands[default].params)
                close = difflib.get_close_matches(word, self.list_commands(ctx), n=1, cutoff=0.6)
                if not takes_words or (close and not os.path.exists(word)):
                    self.no_such_command(ctx, word)
            args = [default, *args]
        return super().parse_args(ctx, args)

    def _default(self, ctx: click.Context) -> tuple[click.Command, click.Context]:
        """The default command and a context for it, to show its usage and options."""
        name = next(iter(self.commands))
        return self.commands[name], click.Context(self.commands[name], info_name=name, parent=ctx)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        command, sub = self._default(ctx)
        formatter.write_usage(ctx.command_path, " ".join(command.collect_usage_pieces(sub)))
        formatter.write_usage(ctx.command_path, " ".join(Group.collect_usage_pieces(self, ctx)), prefix="   or: ")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The default command's options before the group's: `tool --help` shows what `tool` takes."""
        command, sub = self._default(ctx)
        rows = [p.get_help_record(sub) for p in command.params if isinstance(p, click.Option)]
        with formatter.section(f"Options of {command.name}, the default command"):
            formatter.write_dl([row for row in rows if row is not None])
        super().format_options(ctx, formatter)


def version_option(command: FC) -> FC:
    return click.version_option(
        __version__, "--version", package_name="gptkit", prog_name="gptkit", message="%(prog)s %(version)s"
    )(command)


# -- outputs ---------------------------------------------------------------------------------------


def overwrite_option(ours: str | None) -> Callable[[FC], FC]:
    """`--overwrite`, the same flag in every command that writes a file: without it the command
    replaces only `ours`, its own kind of output (None: nothing, it cannot tell its own), and
    refuses anything else (shared/files.py, check_output)."""
    replaced = f"only {ours} is replaced" if ours else "an existing --out is never replaced"
    return click.option("--overwrite", is_flag=True, help=f"Replace --out whatever it holds  [without it: {replaced}]")


# -- a checkpoint to read, a device to run it on ---------------------------------------------------

# One wording for --checkpoint wherever it appears: every reader finds its checkpoint alike (model/checkpoint.py,
# checkpoint_directory and CheckpointReader).
CHECKPOINT_HELP = (
    "A checkpoint directory (RUN/latest, one of RUN/checkpoints/, a model import-hf wrote), or a training run's "
    "directory RUN, meaning its newest checkpoint; a LoRA run's checkpoint is read with the checkpoint it adapts."
)


def checkpoint_option(command: FC) -> FC:
    """`--checkpoint DIR`, the same flag and help in every command that reads a checkpoint."""
    return click.option("--checkpoint", required=True, metavar="DIR", help=CHECKPOINT_HELP)(command)


def device_option(command: FC) -> FC:
    """`--device`, the same in every command that runs a model (train's is a setting of the run's)."""
    return click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),  # runtime/device.py's resolve_device, which imports torch
        default="auto",
        show_default=True,
        help="Where the model runs; auto: a CUDA GPU where there is one, else the CPU.",
    )(command)


# -- threads ----------------------------------------------------------------------------------------


def threads_option(what: str, measured: bool = False) -> Callable[[FC], FC]:
    """`--threads N`, the same flag in every stage; `what` says what the threads do there.
    `measured`: torch's threads, which the stage chooses by measurement when the flag is not given
    (runtime/threads.py)."""
    if measured:
        return click.option(
            "--threads",
            type=click.IntRange(1, MAX_THREADS),
            metavar="N",
            help=(
                f"{what}  [default: measured, 1 to {cores_per_process()} as the load allows; OMP_NUM_THREADS fixes it]"
            ),
        )
    return click.option(
        "--threads",
        type=click.IntRange(1, MAX_THREADS),
        default=default_threads,  # called when the command runs: OMP_NUM_THREADS refused there, in one line
        show_default="one per physical core",
        metavar="N",
        help=what,
    )


# -- logging ----------------------------------------------------------------------------------------


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record arrives (test runners swap it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"  # warning: ..., error: ...


def configure_logging() -> None:
    """Warnings of the `gptkit` loggers to standard error as `warning: ...`, on rank 0 only
    (torchrun sets RANK): the other ranks show errors alone."""
    logger = logging.getLogger("gptkit")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_Format())
        logger.addHandler(handler)
    logger.setLevel(logging.WARNING if os.environ.get("RANK", "0") == "0" else logging.ERROR)
