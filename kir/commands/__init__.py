"""One module per ``kir`` subcommand; each has ``register(subparsers)`` which sets
``handler`` on its parser. The order here is the order ``kir --help`` lists them."""

from kir.commands import apply_cmd, compile_cmd, parse_cmd, rules_cmd, run_cmd

COMMANDS = [parse_cmd, run_cmd, compile_cmd, rules_cmd, apply_cmd]

from kir.commands import db_cmd, emit_cmd  # noqa: E402 - search, db and emit (issue 5)

COMMANDS += [emit_cmd, db_cmd]

from kir.commands import check_cmd  # noqa: E402 - MLX kernels written by hand (issue 16)

COMMANDS += [check_cmd]

from kir.commands import examples_cmd, spec_cmd  # noqa: E402 - issue 13

COMMANDS += [spec_cmd, examples_cmd]

from kir.commands import campaign_cmd  # noqa: E402 - scale-out (issue 15)

COMMANDS += [campaign_cmd]
