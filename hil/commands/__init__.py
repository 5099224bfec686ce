"""The ``hil`` subcommands with the most options, one module each (hil.cli builds the parser
and dispatches)."""
