"""``kir run FILE``: run a kernel on random inputs from its spec and check it against the
spec's reference."""

from __future__ import annotations

import argparse
import sys
import time

from kir.backends import TARGETS
from kir.driver.runners import RUNNERS, check_on_target
from kir.errors import KirError
from kir.ir.verify import verify
from kir.spec.compare import nan_notes


def register(sub) -> None:
    from kir.commands.main import add_kernel_args

    p = sub.add_parser("run",
                       help="run a kernel on random inputs and check it against the reference",
                       description="Run FILE on random inputs made from its spec and compare the "
                                   "outputs with the spec's reference (or, without one, with the "
                                   "kir interpreter). Exit 0 when they match, 1 when not.")
    add_kernel_args(p)
    p.add_argument("--target", default="interp", choices=sorted(RUNNERS),
                   help="where to run it (default: interp, the numpy interpreter)")
    p.add_argument("--seed", type=int, default=0, help="random input seed (default 0)")
    p.add_argument("--max-steps", type=int, metavar="N",
                   help="interpreter: loop iterations before a run counts as a hang "
                        "(default 10,000,000)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.commands.main import load_for

    if args.seed < 0:
        raise KirError(f"--seed {args.seed}: seeds are non-negative integers")
    if args.max_steps is not None and args.max_steps < 1:
        raise KirError(f"--max-steps {args.max_steps}: give a positive number of iterations")
    loaded = load_for(args)
    if loaded.bound is None:
        raise KirError(f"{args.file} has no spec: kir needs one to make inputs",
                       hint="write a .kir.toml beside the kernel (see examples/) or pass --spec")
    # As `kir compile` does: a kernel the verifier refuses does not run anywhere, and one over
    # its GPU's limits does not run on it (the interpreter takes CUDA's, the looser).
    language = "metal" if "metal" in args.target else "cuda"
    verify(loaded.kernel, TARGETS[language])
    start = time.perf_counter()
    outcome = check_on_target(loaded, args.target, seed=args.seed, max_steps=args.max_steps)
    elapsed = time.perf_counter() - start
    sizes = ", ".join(f"{k}={v}" for k, v in loaded.bound.sizes.items())
    print(f"{loaded.kernel.name} on {args.target} ({sizes}) against {outcome.reference_name}: "
          f"{elapsed:.2f} s")
    print(outcome.result.describe())
    verdict = "PASS" if outcome.result.ok else "FAIL"
    print(f"{verdict}: max error {outcome.result.max_abs_err:.3g}")
    for note in nan_notes(outcome.reference):
        print(note)
    sys.stdout.flush()
    return 0 if outcome.result.ok else 1
