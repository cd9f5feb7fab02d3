"""``kir examples [DIR]``: copy the example kernels (CUDA, specs, references) to DIR, so the
quick start works from any install, a wheel included."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("examples", help="copy the example kernels and their specs to a folder",
                       description="Copy kir's example kernels with their specs, numpy/MLX "
                                   "references and saved traces to DIR (default "
                                   "./kir-examples), then list them.")
    p.add_argument("dir", nargs="?", default="kir-examples", help="folder to create")
    p.add_argument("--where", action="store_true",
                   help="print the folder the examples are installed in, copy nothing")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.driver.examples import copy_examples, example_files, examples_dir

    if args.where:
        print(examples_dir())
        return 0
    target = Path(args.dir)
    copy_examples(target)
    kernels = example_files(target)
    print(f"copied {len(kernels)} example kernels to {target}/:")
    for path in kernels:
        print(f"  {path}")
    print(f"try: kir compile {kernels[0] if kernels else target} --search")
    return 0
