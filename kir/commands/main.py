"""The ``kir`` command line: argument parsing and dispatch to :mod:`kir.commands`.

Exit codes: 0 success, 1 a check failed (outputs differ from the reference), 2 bad input
(malformed CUDA, unsupported construct, broken spec, target limit, a limit of
:mod:`kir.limits` run out) — reported as ``file:line:col: error: ...`` without a traceback —
3 an internal error (a bug in kir), 130 interrupted (Ctrl-C; a search writes its best so far).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from kir.errors import KirError
from kir.limits import DESCRIPTIONS, Limits, TimeLimitExceeded, configured, parse_limits

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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


def load_for(args: argparse.Namespace, *, sizes: dict[str, int] | None = None,
             notes: bool = True):
    """The kernel a command's FILE, ``--spec``, ``--size`` (or ``sizes``), ``--kernel`` and
    ``-I`` name, loaded (:func:`kir.driver.load.load_kernel`); its notes (which launch a ``.kir``
    runs with, say) go to stderr unless ``notes`` is False."""
    from kir.driver.load import load_kernel, parse_size_overrides

    loaded = load_kernel(args.file, spec_path=args.spec,
                         sizes=parse_size_overrides(args.size) if sizes is None else sizes,
                         kernel_name=args.kernel, include_dirs=getattr(args, "include", ()))
    for note in loaded.notes if notes else ():
        print(f"note: {note}", file=sys.stderr)
    return loaded


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
    for name, command_parser in sub.choices.items():
        if name == "db":
            continue  # runs no user code (and its --limit counts rows)
        command_parser.add_argument(
            "--limit", action="append", dest="limits", metavar="NAME=VALUE",
            help="raise or lower a limit (repeatable): " + ", ".join(
                f"{name} ({text}, default {getattr(Limits(), name):g})"
                for name, text in DESCRIPTIONS.items()))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kir`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with configured(parse_limits(getattr(args, "limits", None))):
            return int(args.handler(args) or 0)
    except KirError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except TimeLimitExceeded:
        # A limit that ran out at the very moment its block ended (kir.limits' guarded calls
        # report their own): still a limit, not a bug.
        print("error: a time limit ran out (see docs/RELIABILITY.md; --limit raises them)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("error: kir ran out of memory\n  hint: use smaller sizes (--size), or raise "
              "the machine's memory limit", file=sys.stderr)
        return EXIT_BAD_INPUT
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
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
