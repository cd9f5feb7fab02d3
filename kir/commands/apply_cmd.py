"""``kir apply FILE --step S ...``: apply rule steps (or a saved trace) and print the IR."""

from __future__ import annotations

import argparse
import difflib

from kir.driver.load import load_kernel, parse_size_overrides
from kir.driver.registry import load_registry
from kir.errors import KirError
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import apply_trace, context_for, load_trace, parse_step


def register(sub) -> None:
    from kir.commands.main import add_kernel_args

    p = sub.add_parser("apply", help="apply rewrite steps to a kernel and print the result",
                       description="Apply rule steps such as 'tile-loop{loop=L2,factor=4}' in "
                                   "order (or the steps of a saved trace) and print the IR.")
    add_kernel_args(p)
    p.add_argument("--step", action="append", default=[], metavar="STEP",
                   help="a step, e.g. 'unroll-loop{loop=L1,factor=4}'; repeatable")
    p.add_argument("--trace", help="a trace JSON file (e.g. best.trace.json from a search)")
    p.add_argument("--rules", action="append", default=[], metavar="PATH",
                   help="also load rules from PATH (.rules or .py)")
    p.add_argument("--diff", action="store_true", help="print a unified IR diff per step")
    p.add_argument("--check", action="store_true",
                   help="run the result and the original on the interpreter and compare")
    p.add_argument("-o", "--output", help="write the resulting IR text to this .kir file")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_kernel(args.file, spec_path=args.spec, sizes=parse_size_overrides(args.size),
                         kernel_name=args.kernel, include_dirs=args.include)
    registry = load_registry(args.rules)
    steps = load_trace(args.trace, registry) if args.trace else []
    steps += [parse_step(s, registry) for s in args.step]
    if not steps:
        raise KirError("nothing to apply", hint="give --step 'RULE{...}' or --trace FILE")
    ctx = context_for(loaded)
    result = apply_trace(loaded.kernel, steps, registry, ctx, strict=True)
    verify(result.kernel)
    if args.diff:
        before = loaded.kernel
        for step, after in zip(result.applied, result.kernels):
            print(f"=== {step}")
            print("".join(difflib.unified_diff(
                print_kernel(before, locations=False).splitlines(keepends=True),
                print_kernel(after, locations=False).splitlines(keepends=True),
                fromfile="before", tofile="after")), end="")
            before = after
    else:
        print(print_kernel(result.kernel), end="")
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(print_kernel(result.kernel))
    if args.check:
        return check_equivalent(loaded, result.kernel)
    return 0


def check_equivalent(loaded, kernel) -> int:
    """Run the rewritten and the original kernel on the interpreter with the same random
    inputs and compare their outputs within the spec's tolerances."""
    import dataclasses

    from kir.driver.runners import copy_inputs, run_interp
    from kir.spec.compare import compare_outputs

    bound = loaded.bound
    if bound is None:
        raise KirError("--check needs a spec to make inputs")
    inputs = bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=kernel), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda out: bound.tolerance(bound.spec.args[out].dtype))
    verdict = "PASS" if result.ok else "FAIL"
    print(f"check against the original kernel (interpreter): {verdict}, "
          f"max error {result.max_abs_err:.3g}")
    if not result.ok:
        print(result.describe())
    return 0 if result.ok else 1

