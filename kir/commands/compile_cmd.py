"""``kir compile FILE``: the main job. Without ``--search``: parse, verify, and check the
kernel on the interpreter at the spec's default and ragged sizes (``-o`` writes the
unrewritten kernel as an MLX module or Metal source). With ``--search``: find the fastest
valid rewrite for the target (see :mod:`kir.commands.compile_search`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kir.backends import TARGETS
from kir.driver.load import parse_size_overrides
from kir.driver.runners import check_on_target
from kir.errors import KirError
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.spec.compare import nan_notes


def register(sub) -> None:
    from kir.commands.main import add_kernel_args
    from kir.search.engine import STRATEGIES

    p = sub.add_parser("compile", help="compile a CUDA kernel for the target (check, or --search)",
                       description="Parse FILE, verify its IR, print it, and check it on the kir "
                                   "interpreter against the spec's reference at the default sizes "
                                   "and at the spec's ragged sizes. With --search: search rule "
                                   "sequences for the fastest valid kernel on the target and "
                                   "write it (MLX module, trace, IR, report).")
    add_kernel_args(p)
    p.add_argument("--quiet", "-q", action="store_true", help="don't print the IR")
    p.add_argument("-o", "--output", metavar="NAME.py|NAME.metal",
                   help="write the kernel as an MLX module (.py) or, without --search, as full "
                        "Metal source (.metal)")
    p.add_argument("--target", choices=["metal", "cuda", "model"],
                   help="what to time (default: this machine's MLX GPU, else the Apple M2 "
                        "cost model); without --search, the module's language (default metal)")
    s = p.add_argument_group("search")
    s.add_argument("--search", action="store_true", help="search for the fastest valid rewrite")
    s.add_argument("--budget", type=int, metavar="N",
                   help="evaluations to spend (default 40, or unbounded with --time)")
    s.add_argument("--time", metavar="DURATION", help="time limit, e.g. 90s, 5m")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--strategy", choices=STRATEGIES,
                   help="search strategy (default: steady when timing on a GPU, evolve with "
                        "the cost model)")
    s.add_argument("--check-size", action="append", metavar="NAME=VALUE",
                   help="validate candidates on the interpreter at these sizes instead of the "
                        "compiled ones (default: the spec's `check` table); repeatable")
    s.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache dir)")
    s.add_argument("--no-db", action="store_true",
                   help="search without a tuning database: judge every candidate afresh, "
                        "store nothing")
    s.add_argument("--out-dir", metavar="DIR",
                   help="folder for the module, trace, IR and report (default kir-out/STEM/)")
    s.add_argument("--report", metavar="DIR", help="report folder (default: the output folder)")
    s.add_argument("--rules", action="append", default=[], metavar="PATH",
                   help="also load rules from PATH (.rules or .py); repeatable")
    s.add_argument("--cluster", metavar="ray[:ADDRESS]",
                   help="judge candidates on a Ray cluster: validation on its CPUs, checks "
                        "and timings on its device workers (needs the ray extra; see "
                        "docs/SCALE_OUT.md)")
    s.add_argument("--device-resource", metavar="NAME",
                   help="with --cluster: the Ray custom resource the device workers' nodes "
                        "offer (default kir-device)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.commands.main import load_for

    overrides = parse_size_overrides(args.size)
    loaded = load_for(args, sizes=overrides)
    # The target's limits come first: a kernel no GPU of the target can launch must not PASS.
    verify(loaded.kernel, TARGETS["cuda" if args.target == "cuda" else "metal"])
    if args.search:
        from kir.commands.compile_search import run_search

        return run_search(args, loaded)
    if not args.quiet:
        print(print_kernel(loaded.kernel), end="")
    if loaded.bound is None:
        if args.output:
            raise KirError(f"-o needs a spec: {args.file} has none",
                           hint="write a .kir.toml beside the kernel (see examples/)")
        print(f"{args.file}: no spec, so no check (write a .kir.toml beside it)")
        return 0
    # The kernel loaded above is the first check; the ragged sizes need their own lowering
    # (templates, launch and dynamic shared memory follow the sizes).
    kernels = [loaded]
    if loaded.spec.ragged and not overrides:
        kernels.append(load_for(args, sizes=dict(loaded.spec.ragged), notes=False))
    ok = True
    for current in kernels:
        outcome = check_on_target(current, "interp")
        label = ", ".join(f"{k}={v}" for k, v in current.bound.sizes.items())
        verdict = "PASS" if outcome.result.ok else "FAIL"
        print(f"interp check ({label}) against {outcome.reference_name}: {verdict}, "
              f"max error {outcome.result.max_abs_err:.3g}")
        if not outcome.result.ok:
            print(outcome.result.describe())
        for note in nan_notes(outcome.reference):
            print(note)
        ok &= outcome.result.ok
    if args.output and not ok:
        print(f"{args.output} not written: the kernel failed its check", file=sys.stderr)
    elif args.output:
        write_output(loaded, Path(args.output), args.target)
    return 0 if ok else 1


def write_output(loaded, path: Path, target: str | None) -> None:
    """``-o NAME.py``: the MLX module (Metal, or CUDA with --target cuda); ``-o NAME.metal``:
    the full Metal source MLX would compile."""
    from kir.backends import emit
    from kir.backends.module import write_metal_source

    if path.suffix == ".metal":
        if target == "cuda":
            raise KirError("-o NAME.metal writes Metal source; --target cuda asks for CUDA",
                           hint="use -o NAME.py for the CUDA MLX module")
        write_metal_source(emit(loaded.kernel, loaded.bound, "metal"), path)
    elif path.suffix == ".py":
        from kir.api.modules import build_module
        from kir.commands.compile_search import note_unimportable

        note_unimportable(path)
        language = "cuda" if target == "cuda" else "metal"
        build_module(loaded, target=language).write(path)
    else:
        raise KirError(f"don't know what to write to {path.name}",
                       hint="-o NAME.py (MLX module) or -o NAME.metal (Metal source)")
    print(f"wrote {path}")
