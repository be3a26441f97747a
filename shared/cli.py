"""What the stage CLIs share."""
import click


class DefaultGroup(click.Group):
    """A command group whose first command is the default: `tool --flag` means `tool first --flag`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [next(iter(self.commands)), *args]
        return super().parse_args(ctx, args)
