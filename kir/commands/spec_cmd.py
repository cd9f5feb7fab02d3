"""``kir spec init FILE.cu [--kernel K] [--host FILE...]``: draft the kernel's spec from the
host code that launches it (:mod:`kir.driver.spec_draft`), every guess and gap marked
``# TODO``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kir.errors import KirError


def register(sub) -> None:
    p = sub.add_parser("spec", help="draft a kernel's spec from its launch site",
                       description="`kir spec init FILE.cu`: read the <<<grid, block, shared>>> "
                                   "launch in FILE (or in --host files) and the host code "
                                   "around it, and write FILE's spec (sizes named after host "
                                   "variables, launch, template values, scalar values, dtypes, "
                                   "roles, initial contents) with every guess marked TODO.")
    p.add_argument("action", choices=["init"], help="init: draft a spec")
    p.add_argument("file", help="the CUDA file with the kernel")
    p.add_argument("--kernel", help="which __global__ function (when the file has several)")
    p.add_argument("--host", action="append", default=[], metavar="FILE",
                   help="another file with host code that launches it; repeatable")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the spec (default FILE's stem + .kir.toml beside it; "
                        "- for standard output)")
    p.add_argument("--force", action="store_true", help="overwrite an existing spec")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.driver.spec_draft import draft_spec

    draft = draft_spec(args.file, kernel=args.kernel, host=args.host)
    source = Path(args.file)
    out = args.output or str(source.with_name(source.name.split(".")[0] + ".kir.toml"))
    if out == "-":
        sys.stdout.write(draft.text)
        sys.stdout.flush()
    else:
        path = Path(out)
        if path.exists() and not args.force:
            raise KirError(f"{path} already exists: nothing written",
                           hint="pass --force to overwrite it, or -o another path (- for "
                                "standard output)")
        path.write_text(draft.text)
        print(f"wrote {path}" + (f" from the launch at {draft.launch}" if draft.launch
                                 else " (no launch site found: a partial draft)"))
    if draft.todos:
        print(f"{len(draft.todos)} TODO(s) to check:", file=sys.stderr)
        for todo in draft.todos:
            print(f"  {todo}", file=sys.stderr)
    else:
        print("no TODO left: check it with kir run " + str(source), file=sys.stderr)
    return 0
