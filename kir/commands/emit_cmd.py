"""``kir emit FILE --target metal|cuda [--trace T]``: print the kernel source MLX would get,
with its launch (grid, threadgroup, template arguments, outputs and their initial values)."""

from __future__ import annotations

import argparse

from kir.driver.load import load_kernel, parse_size_overrides
from kir.errors import KirError


def register(sub) -> None:
    from kir.commands.main import add_kernel_args

    p = sub.add_parser("emit", help="print the Metal or CUDA source of a kernel and its launch",
                       description="Emit FILE (after the steps of --trace, if given) for MLX's "
                                   "mx.fast.metal_kernel or mx.fast.cuda_kernel and print the "
                                   "body with a header comment describing the launch.")
    add_kernel_args(p)
    p.add_argument("--target", choices=["metal", "cuda"], default="metal",
                   help="source language (default metal)")
    p.add_argument("--trace", help="apply this trace first (e.g. best.trace.json)")
    p.add_argument("--rules", action="append", default=[], metavar="PATH",
                   help="also load rules from PATH (for traces that use them)")
    p.add_argument("--full", action="store_true",
                   help="Metal only: the whole source MLX compiles (header and signature)")
    p.set_defaults(handler=run)


def launch_comment(emitted, spec=None, comment: str = "//") -> str:
    """The launch of an emitted kernel as comment lines (``spec``, when given, names the
    initial contents of XOR-encoded outputs)."""
    e = emitted
    lines = [f"kernel {e.name} for mx.fast.{e.target}_kernel",
             f"grid (threads) = {tuple(e.grid)}, threadgroup = {tuple(e.threadgroup)}, "
             f"blocks = {tuple(e.blocks)}"]
    if e.template:
        lines.append("template: " + ", ".join(f"{n}={v}" for n, v in e.template))
    ins = [f"{n}: {d}{list(s) if s else ''}" + (" (scalar)" if k == "scalar" else
                                                 " (xor key)" if k == "key" else "")
           for n, d, s, k in zip(e.input_names, e.input_dtypes, e.input_shapes, e.input_kinds)]
    lines.append("inputs: " + ", ".join(ins))
    outs = []
    for name, arg, dtype, shape in zip(e.output_names, e.output_args, e.output_dtypes,
                                       e.output_shapes):
        enc = e.encoding_for(arg)
        wanted = spec.args[arg].init if spec is not None and arg in spec.args else None
        if wanted == "none":
            init = "written in full by the kernel, no fill"
        elif e.accumulation_for(arg) is not None:
            init = f"init {wanted}: starts at 0, added to after the kernel"
        elif enc is None:
            init = f"init {e.init_value}"
        else:
            init = f"init {wanted if wanted is not None else '?'}, xor-encoded"
        outs.append(f"{name}: {dtype}{list(shape)} ({init})")
    lines.append("outputs: " + ", ".join(outs))
    lines.append(f"init_value = {e.init_value}"
                 + (", atomic outputs" if e.atomic_outputs else "")
                 + (f", shared memory {e.shared_memory} bytes" if e.shared_memory else ""))
    if e.scalar_values:
        lines.append("scalars: " + ", ".join(f"{n}={v}" for n, v in e.scalar_values))
    return "\n".join(f"{comment} {line}" for line in lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from kir.backends import emit, target_named
    from kir.backends.module import full_metal_source
    from kir.ir.verify import verify

    loaded = load_kernel(args.file, spec_path=args.spec, sizes=parse_size_overrides(args.size),
                         kernel_name=args.kernel, include_dirs=args.include)
    if loaded.bound is None:
        raise KirError(f"{args.file} has no spec: emitting needs its shapes and launch",
                       hint="write a .kir.toml beside the kernel (see examples/) or pass --spec")
    kernel = loaded.kernel
    if args.trace:
        from kir.driver.registry import load_registry
        from kir.rules import apply_trace, context_for, load_trace

        registry = load_registry(args.rules)
        steps = load_trace(args.trace, registry)
        kernel = apply_trace(kernel, steps, registry, context_for(loaded, target_named(args.target)),
                             strict=True).kernel
    verify(kernel)
    emitted = emit(kernel, loaded.bound, args.target)
    print(launch_comment(emitted, loaded.spec), end="")
    if args.full:
        if args.target != "metal":
            raise KirError("--full is for Metal (MLX generates the CUDA signature itself)")
        print(full_metal_source(emitted), end="")
    else:
        if emitted.header:
            print(emitted.header.rstrip("\n") + "\n")
        print(emitted.source.rstrip("\n"))
    return 0
