"""``kir compile FILE``: the main job. Today: parse, verify, and check the kernel on the
interpreter at the spec's default and ragged sizes."""

from __future__ import annotations

import argparse

from kir.load import load_kernel, parse_size_overrides
from kir.printer import print_kernel
from kir.targets import check_on_target
from kir.verify import verify


def register(sub) -> None:
    from kir.cli import add_kernel_args

    p = sub.add_parser("compile", help="compile a CUDA kernel for the target (parse, verify, check)",
                       description="Parse FILE, verify its IR, print it, and check it on the kir "
                                   "interpreter against the spec's reference at the default sizes "
                                   "and at the spec's ragged sizes.")
    add_kernel_args(p)
    p.add_argument("--quiet", "-q", action="store_true", help="don't print the IR")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    overrides = parse_size_overrides(args.size)
    loaded = load_kernel(args.file, spec_path=args.spec, sizes=overrides, kernel_name=args.kernel)
    verify(loaded.kernel)
    if not args.quiet:
        print(print_kernel(loaded.kernel), end="")
    if loaded.bound is None:
        print(f"{args.file}: no spec, so no check (write a .kir.toml beside it)")
        return 0
    size_sets = [overrides]
    if loaded.spec.ragged and not overrides:
        size_sets.append(dict(loaded.spec.ragged))
    ok = True
    for sizes in size_sets:
        current = load_kernel(args.file, spec_path=args.spec, sizes=sizes, kernel_name=args.kernel)
        outcome = check_on_target(current, "interp")
        label = ", ".join(f"{k}={v}" for k, v in current.bound.sizes.items())
        verdict = "PASS" if outcome.result.ok else "FAIL"
        print(f"interp check ({label}) against {outcome.reference_name}: {verdict}, "
              f"max error {outcome.result.max_abs_err:.3g}")
        if not outcome.result.ok:
            print(outcome.result.describe())
        ok &= outcome.result.ok
    return 0 if ok else 1
