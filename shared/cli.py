"""What the stage CLIs share: one-line usage errors and a group with a default command."""
import click


def _one_line(error: click.UsageError) -> click.UsageError:
    """Click shows a usage error in three lines (the usage, a hint, the error); without a
    context it shows the error line alone, so the hint moves into that line."""
    ctx = error.ctx
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    one = click.UsageError(error.format_message() + hint)
    one.exit_code = error.exit_code
    return one


class Command(click.Command):
    """A command whose usage errors are one line."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise _one_line(e) from None


class Group(click.Group):
    """A group whose usage errors, and its commands', are one line."""

    command_class = Command

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise _one_line(e) from None

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            raise _one_line(e) from None


Group.group_class = Group


class DefaultGroup(Group):
    """A command group whose first command is the default: `tool --flag` means `tool first --flag`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [next(iter(self.commands)), *args]
        return super().parse_args(ctx, args)
