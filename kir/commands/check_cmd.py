"""``kir check MODULE.py:FUNCTION --reference MODULE.py:REF``: run a hand-written MLX Metal
kernel wrapper on the CPU emulator at several shapes against a reference, with the emulator's
checks (bounds, reads before writes, threadgroup races and barriers, chip limits). Exit 0 when
nothing was found, 1 when something was, 2 on bad input. See docs/MLX_KERNELS.md."""

from __future__ import annotations

import argparse
import sys

from kir.errors import KirError


def register(sub) -> None:
    p = sub.add_parser(
        "check", help="run a hand-written mx.fast.metal_kernel wrapper on the emulator and "
                      "check it against a reference",
        description="Run FUNCTION (a Python function that launches mx.fast.metal_kernel "
                    "kernels) on kir's CPU emulator at each --shapes case and a ragged variant "
                    "of each, on random inputs, and compare it with REF (numpy or MLX ops). "
                    "Every launch is checked for out-of-bounds accesses, reads of outputs "
                    "before any write, unwritten outputs, threadgroup races, divergent "
                    "barriers and the M1-M4 threadgroup limits. Exit 0 when nothing is found, "
                    "1 when something is.")
    p.add_argument("function", metavar="MODULE.py:FUNCTION", help="the kernel wrapper")
    p.add_argument("--reference", required=True, metavar="[MODULE.py:]REF",
                   help="the reference function (in FUNCTION's module when no file is named)")
    p.add_argument("--shapes", nargs="+", metavar="SHAPES",
                   help="input shapes, one case each: dimensions joined by x, one shape per "
                        "argument separated by commas (e.g. 8x4096 or 64x100,100; "
                        "default: 4096 1000 33)")
    p.add_argument("--dtype", default="float32",
                   choices=["float32", "float16", "bfloat16", "int32"],
                   help="dtype of the random inputs (default float32)")
    p.add_argument("--seed", type=int, default=0, help="random input seed (default 0)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default by dtype)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default by dtype)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.backends.emulated_runner import require_emulator
    from kir.emulate.check import (
        DEFAULT_SHAPES,
        load_function,
        parse_shapes,
        run_check,
        with_ragged_variants,
    )
    from kir.emulate.patch import emulate_metal_kernels
    from kir.emulate.session import CheckSession

    require_emulator()
    if args.seed < 0:
        raise KirError(f"--seed {args.seed}: seeds are non-negative integers")
    cases = with_ragged_variants(parse_shapes(args.shapes) if args.shapes else DEFAULT_SHAPES)
    session = CheckSession()
    with emulate_metal_kernels(session=session, force=True):
        modules: dict = {}
        function, path = load_function(args.function, modules=modules)
        reference, _ = load_function(args.reference, default_path=path, modules=modules)

    def progress(result) -> None:
        extra = f": {result.note}" if result.note else ""
        count = f", {len(result.findings)} finding(s)" if result.findings else ""
        print(f"  {result.case}: {result.status}{count}{extra}", flush=True)

    print(f"kir check {args.function} against {args.reference} ({args.dtype}, "
          f"{len(cases)} cases)")
    result = run_check(function, reference, cases, session=session, dtype=args.dtype,
                       seed=args.seed, rtol=args.rtol, atol=args.atol, progress=progress)
    findings = result.findings()
    for finding, seen in findings:
        print()
        print(finding)
        print(f"  seen at shapes: {'; '.join(str(case) for case in seen)}")
    print()
    launches = len(session.launches)
    if result.ok:
        print(f"PASS: {len(cases)} cases, {launches} launches, no findings")
        return 0
    print(f"FAIL: {len(findings)} finding(s) in {len(cases)} cases ({launches} launches)")
    sys.stdout.flush()
    return 1
