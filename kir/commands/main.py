"""The ``kir`` command line: argument parsing and dispatch to :mod:`kir.commands`.

Exit codes: 0 success, 1 a check failed (outputs differ from the reference), 2 bad input
(malformed CUDA, unsupported construct, broken spec, target limit) — reported as
``file:line:col: error: ...`` without a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from kir.errors import KirError

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def add_kernel_args(parser: argparse.ArgumentParser) -> None:
    """Arguments every command that loads a kernel takes."""
    parser.add_argument("file", help="CUDA source (.cu) or kir IR text (.kir)")
    parser.add_argument("--kernel", help="which __global__ function (when the file has several)")
    parser.add_argument("--spec",
                        help="kernel spec TOML (default: FILE's stem + .kir.toml beside it)")
    parser.add_argument("--size", action="append", metavar="NAME=VALUE",
                        help="override a spec size (repeatable)")
    parser.add_argument("-I", "--include", action="append", metavar="DIR", default=[],
                        help='search DIR for #include "..." headers, after the source\'s own '
                             "folder (repeatable; the spec's `include` list adds more)")


def build_parser() -> argparse.ArgumentParser:
    from kir.commands import COMMANDS

    parser = argparse.ArgumentParser(
        prog="kir",
        description="Port CUDA kernels to Apple Silicon: "
                    "CUDA -> kir IR -> rewrites -> Metal for MLX.",
    )
    from kir.version import __version__

    parser.add_argument("--version", action="version", version=f"kir {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kir`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KirError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `kir parse x.cu | head`: the reader went away; that is not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # an internal bug: say so plainly, traceback only on request
        if args.debug:
            traceback.print_exc()
        print(f"kir: internal error: {type(exc).__name__}: {exc}\n"
              "  this is a bug in kir, not in your kernel; rerun with --debug for a traceback",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
