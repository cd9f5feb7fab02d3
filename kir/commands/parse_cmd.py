"""``kir parse FILE``: print a kernel's IR text (CUDA in, or IR text read back)."""

from __future__ import annotations

import argparse

from kir.driver.load import load_kernel, parse_size_overrides
from kir.ir.printer import print_kernel
from kir.ir.verify import verify


def register(sub) -> None:
    from kir.commands.main import add_kernel_args

    p = sub.add_parser("parse", help="print the kir IR of a CUDA kernel or of IR text",
                       description="Parse FILE (.cu or .kir) and print its kir IR text. The text "
                                   "can be edited and fed back to any kir command as FILE.kir.")
    add_kernel_args(p)
    p.add_argument("--no-locations", action="store_true",
                   help="omit the '# file:line:col' source comments")
    p.add_argument("--no-verify", action="store_true", help="skip the IR verifier")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_kernel(args.file, spec_path=args.spec, sizes=parse_size_overrides(args.size),
                         kernel_name=args.kernel, include_dirs=args.include)
    if not args.no_verify:
        verify(loaded.kernel)
    print(print_kernel(loaded.kernel, locations=not args.no_locations), end="")
    return 0
