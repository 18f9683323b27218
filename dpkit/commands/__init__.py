"""Subcommands of the ``dpkit`` command, one module each (see :mod:`dpkit.cli`)."""
