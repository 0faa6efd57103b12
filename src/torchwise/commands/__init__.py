"""Thin click commands, one module per ``torchwise`` subcommand (see ``cli.COMMANDS``)."""
