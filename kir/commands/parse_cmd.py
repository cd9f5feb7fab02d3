"""``kir parse FILE``: print a kernel's IR text (CUDA in, or IR text read back)."""

from __future__ import annotations

import argparse

import sys

from kir.driver.load import ir_header
from kir.ir.printer import print_kernel
from kir.ir.verify import verify


def register(sub) -> None:
    from kir.commands.main import add_kernel_args

    p = sub.add_parser("parse", help="print the kir IR of a CUDA kernel or of IR text",
                       description="Parse FILE (.cu or .kir) and print its kir IR text. The text "
                                   "can be edited and fed back to any kir command as FILE.kir; "
                                   "its first line names the spec it was parsed with.")
    add_kernel_args(p)
    p.add_argument("--no-locations", action="store_true",
                   help="omit the '# file:line:col' source comments")
    p.add_argument("--no-verify", action="store_true", help="skip the IR verifier")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.commands.main import load_for

    loaded = load_for(args)
    if not args.no_verify:
        verify(loaded.kernel)
    if loaded.spec is None:
        print(f"note: {args.file} has no spec, so its launch is unknown: the IR shows "
              "grid=(1,1,1) block=(1,1,1) as a placeholder (marked so in the dump; a spec's "
              "launch replaces it)", file=sys.stderr)
    # The header names the spec (or the placeholder), so the dump reads back on its own.
    print(ir_header(loaded) + print_kernel(loaded.kernel, locations=not args.no_locations),
          end="")
    return 0
