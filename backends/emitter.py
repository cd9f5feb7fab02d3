"""kir IR + bound spec → :class:`Emitted` (Metal or CUDA body plus MLX launch packaging).

The printer (:mod:`kir.backends.cstyle`) only spells; this module decides what MLX sees:
which parameters are inputs (role in, scalars as 0-d arrays) and outputs (role out/inout),
the grid in threads, target limits, names that must not clash with what MLX generates
around the body, atomics and the XOR encoding of outputs' initial contents (see
:mod:`kir.backends.emitted`).
"""

from __future__ import annotations

import dataclasses
import hashlib

from kir.backends.demote_f64 import demote_f64, uses_f64
from kir.backends.cstyle import BufferInfo, Printer
from kir.backends.partial_warps import check_whole_warps
from kir.backends.emitted import KEY_TYPES, Accumulation, Emitted, plan_inits
from kir.backends.targets import target_named

from kir import ir
from kir.analysis.matrix_roles import tf32_operand_roles
from kir.errors import KirError, LimitError, UnsupportedError
from kir.ir.types import VectorType
from kir.spec.sizeexpr import eval_size_expr
from kir.target import Target


def emit(kernel: ir.Kernel, bound, target: str | Target, *,
         partial_groups_safe: bool = False) -> Emitted:
    """Emit ``kernel`` for ``target`` (a :class:`kir.target.Target`, or its name "metal" or
    "cuda") with sizes from ``bound`` (a :class:`kir.spec.BoundSpec`). Raises LimitError when
    the launch exceeds the target and UnsupportedError for constructs the target cannot
    express.

    ``partial_groups_safe`` says the kernel tolerates partial edge groups; the grid is whole
    blocks either way today (a block count × threads), so it only records the promise.
    """
    target = target_named(target)
    dialect, helpers = target.dialect, target.helpers
    bound = bound.for_kernel(kernel)  # the kernel's own workspace: outputs MLX allocates
    args = bound.spec.args
    for p in kernel.params:
        if p.name not in args:
            raise KirError(f"kernel parameter {p.name!r} has no entry in the spec's [args]",
                           hint=f"add {p.name} = {{ ... }} to {bound.spec.path.name}")
    if not target.supports_f64 and uses_f64(kernel):
        kernel = demote_f64(kernel, target.title)  # x * 0.5 on a float x: computed in f32
    check_whole_warps(kernel, target)

    blocks = tuple(_grid_dim(g, bound.sizes) for g in kernel.launch.grid)
    block = tuple(int(b) for b in kernel.launch.block)
    _check_threads(block, target)

    body = kernel.body
    shared_dynamic = kernel.launch.shared_bytes or int(bound.shared_bytes or 0)
    allocs = [s for s in body.walk() if isinstance(s, ir.Alloc)]
    dynamic = [a for a in allocs if a.dynamic]
    if dynamic and not target.dynamic_shared:
        body = _size_dynamic_allocs(body, dynamic, shared_dynamic, target)
        allocs = [s for s in body.walk() if isinstance(s, ir.Alloc)]
    _check_shared(allocs, shared_dynamic if target.dynamic_shared else 0, target)
    shared_memory = _dynamic_request(allocs, shared_dynamic, target) \
        if target.dynamic_shared and dynamic else 0

    in_params = [p for p in kernel.params if args[p.name].role == "in"]
    out_params = [p for p in kernel.params if args[p.name].role != "in"]
    for p in out_params:
        if not p.is_buffer:
            raise KirError(f"scalar parameter {p.name!r} cannot have role "
                           f"{args[p.name].role!r}; only buffers are outputs")
    if not out_params:
        raise KirError(f"kernel {kernel.name!r} has no output (role 'out' or 'inout')",
                       hint="mark the buffers it writes with role = \"out\" in the spec")

    names = _rename(kernel, dialect.keywords | set(helpers), [p.name for p in in_params])
    atomic_targets = {s.buffer for s in body.walk() if isinstance(s, ir.Atomic)}
    out_names = {p.name for p in out_params}
    atomic_outputs = target.typed_atomics and bool(atomic_targets & out_names)

    for p in out_params:
        elem = p.type.elem
        if isinstance(elem, VectorType):
            raise UnsupportedError(f"vector-typed buffer parameter {p.name!r}")
        if atomic_outputs and elem.name not in target.typed_atomic_types:
            allowed = ", ".join(sorted(target.typed_atomic_types))
            raise UnsupportedError(
                f"output {p.name!r} is {elem}: with atomics, MLX makes every output "
                f"device atomic<T>, which {target.title} allows for {allowed} only")
    init_value, encodings, accumulations, out_rows = _plan_outputs(
        out_params, args, names, atomic_targets, _only_atomically_added(body, out_names))
    enc_by_arg = {e.arg: e for e in encodings}

    buffers: dict[str, BufferInfo] = {}
    input_rows: list[tuple[str, str, str, str, tuple[int, ...]]] = []
    scalar_values = []
    for p in in_params:
        emitted_name = names.get(p.name, p.name)
        if p.is_buffer:
            shape = tuple(int(d) for d in bound.shape(p.name))
            space = target.input_space(shape)
            buffers[p.name] = BufferInfo(p.type.elem, space, writable=False)
            input_rows.append((emitted_name, p.name, "buffer", p.type.elem.name, shape))
        else:
            if isinstance(p.type, VectorType):  # a __constant__ struct's float3 member
                raise UnsupportedError(
                    f"parameter {p.name!r} is a {p.type} value, which kir does not pass to an "
                    "MLX kernel (scalars only): pass its components as separate scalars, or "
                    "the struct through a buffer", p.loc)
            value = bound.scalar(p.name)
            scalar_values.append((p.name, value))
            input_rows.append((emitted_name, p.name, "scalar", p.type.name, ()))
    for p in out_params:
        enc = enc_by_arg.get(p.name)
        width = KEY_TYPES.get(p.type.elem.nbytes)  # the unsigned type of the output's width
        key = f"0x{enc.key:x}{dialect.int_suffixes.get(width, '')}" \
            if enc is not None and enc.key is not None else None
        key_buffer = None
        if enc is not None and enc.key_input is not None:
            key_buffer = enc.key_input
            shape = tuple(int(d) for d in bound.shape(p.name))
            input_rows.append((key_buffer, p.name, "key", width, shape))
            buffers[key_buffer] = BufferInfo(p.type.elem, "", writable=False)
        buffers[p.name] = BufferInfo(p.type.elem, target.output_space,
                                     atomic=atomic_outputs, xor_key=key,
                                     xor_key_buffer=key_buffer)
    vectors = _vector_accessed(body)
    for a in allocs:
        space = target.shared_space if a.space == "shared" else target.local_space
        buffers[a.name] = BufferInfo(a.elem, space, atomic=target.typed_atomics
                                     and a.name in atomic_targets and a.space == "shared",
                                     vector_access=a.name in vectors)
    for a in allocs:
        if target.typed_atomics and a.name in atomic_targets and a.space != "shared":
            raise UnsupportedError(f"atomic on per-thread array {a.name!r}", a.loc)

    printer = Printer(dialect, buffers,
                      scalar_params=frozenset(p.name for p in in_params if not p.is_buffer),
                      names=names, barrier_orders_device=_reads_own_output(body, out_names),
                      fragment_roles=tf32_operand_roles(body) if target.tf32_matrix else {})
    if not target.narrow_shuffles:
        _check_full_width_shuffles(body, target)
    lines = printer.block(body, 1)
    if dialect.scalar_copy:
        lines = ["    " + dialect.scalar_copy.format(type=printer.type_name(p.type),
                                                  name=printer.name(p.name))
                 for p in in_params if not p.is_buffer] + lines
    source = "\n".join(lines)
    header = "\n\n".join(helpers[h] for h in helpers if h in printer.helpers)

    grid = tuple(b * t for b, t in zip(blocks, block))
    return Emitted(
        target=target.name, name=unique_name(kernel.name, source, header), source=source,
        header=header, kernel_name=kernel.name,
        input_names=tuple(r[0] for r in input_rows), input_args=tuple(r[1] for r in input_rows),
        input_kinds=tuple(r[2] for r in input_rows), input_dtypes=tuple(r[3] for r in input_rows),
        input_shapes=tuple(r[4] for r in input_rows),
        output_names=tuple(r[0] for r in out_rows), output_args=tuple(r[1] for r in out_rows),
        output_shapes=tuple(tuple(int(d) for d in bound.shape(r[1])) for r in out_rows),
        output_dtypes=tuple(r[2].name for r in out_rows),
        grid=grid, threadgroup=block, template=(), init_value=init_value,
        atomic_outputs=atomic_outputs,
        shared_memory=shared_memory,
        inout_decode=tuple(encodings), scalar_values=tuple(scalar_values), blocks=blocks,
        accumulate=tuple(accumulations), grid_exprs=tuple(kernel.launch.grid),
        scratch=tuple(kernel.launch.scratch))


def _grid_dim(expr: str, sizes: dict[str, int]) -> int:
    value = eval_size_expr(expr, sizes)
    if isinstance(value, float):
        if not value.is_integer():
            raise KirError(f"grid dimension {expr!r} = {value} is not a whole number of blocks",
                           hint="wrap it in ceil(...)")
        value = int(value)
    if value < 1:
        raise KirError(f"grid dimension {expr!r} = {value} must be at least 1")
    return value


def _check_threads(block: tuple[int, ...], target: Target) -> None:
    threads = block[0] * block[1] * block[2]
    if threads > target.max_threads:
        raise LimitError(
            f"{threads} threads per {target.group_word} exceed {target.title}'s "
            f"{target.max_threads} by {threads - target.max_threads}",
            hint=f"use a block of at most {target.max_threads} threads (block={block})")


# MLX's CUDA custom kernels raise a kernel's shared-memory limit above the default 48 KB
# (cuFuncSetAttribute, MAX_DYNAMIC_SHARED_SIZE_BYTES) only when the dynamic part asked for
# is over this many bytes (mlx/backend/cuda/custom_kernel.cpp); static arrays count against
# the same limit. On the H200 (MLX 0.30.1) a kernel of 17 KB static and 35 KB dynamic
# failed to launch ("cuGraphAddKernelNode ... invalid argument") where one of 1 KB static
# and 57 KB dynamic ran.
MLX_DYNAMIC_OPT_IN_BYTES = 48000


def _static_shared_bytes(allocs: list[ir.Alloc]) -> int:
    return sum(a.size * a.elem.nbytes for a in allocs if a.space == "shared" and not a.dynamic)


def _dynamic_request(allocs: list[ir.Alloc], dynamic_bytes: int, target: Target) -> int:
    """The dynamic shared memory to ask MLX for: the kernel's, or just over MLX's threshold
    where static and dynamic together exceed the default limit (the static arrays' own, 48 KB)
    and the dynamic part alone would not raise it (the extra bytes go unused)."""
    if _static_shared_bytes(allocs) + dynamic_bytes > target.max_static_shared_bytes:
        return max(dynamic_bytes, MLX_DYNAMIC_OPT_IN_BYTES + 16)
    return dynamic_bytes


def _check_shared(allocs: list[ir.Alloc], dynamic_bytes: int, target: Target) -> None:
    static = _static_shared_bytes(allocs)
    total = static + dynamic_bytes
    if target.max_static_shared_bytes < target.max_shared_bytes \
            and static > target.max_static_shared_bytes:
        raise LimitError(f"static {target.group_word} memory of {static} bytes exceeds "
                         f"{target.title}'s {target.max_static_shared_bytes} by "
                         f"{static - target.max_static_shared_bytes}",
                         hint="make the largest array extern __shared__ or shrink tiles")
    if total > target.max_shared_bytes:
        raise LimitError(f"{target.group_word} memory of {total} bytes exceeds "
                         f"{target.title}'s {target.max_shared_bytes} by "
                         f"{total - target.max_shared_bytes} bytes",
                         hint="shrink the shared tiles (template sizes or launch shared_bytes "
                              "in the spec)")


def _size_dynamic_allocs(body: ir.Block, dynamic: list[ir.Alloc], nbytes: int,
                         target: Target) -> ir.Block:
    # A target without launch-sized shared memory (Metal in MLX): size the array from the
    # launch instead.
    if len(dynamic) > 1:
        raise UnsupportedError(
            f"more than one extern __shared__ array (they alias in CUDA; {target.title} has no "
            f"dynamic {target.group_word} memory to alias)", dynamic[1].loc,
            hint="use one extern __shared__ array and offsets into it")
    alloc = dynamic[0]
    size = nbytes // alloc.elem.nbytes
    if size < 1:
        raise KirError(f"extern __shared__ array {alloc.name!r} but the launch gives "
                       f"{nbytes} dynamic shared bytes", alloc.loc,
                       hint="set launch.shared_bytes in the spec")

    def fix(node: ir.Node):
        if isinstance(node, ir.Alloc) and node.dynamic:
            return dataclasses.replace(node, size=size, dynamic=False)
        return None

    return ir.transform(body, fix)


def _vector_accessed(body: ir.Node) -> set[str]:
    """Buffers loaded or stored as vectors somewhere in ``body``."""
    return {n.buffer for n in body.walk()
            if isinstance(n, ir.Load) and isinstance(n.type, VectorType)
            or isinstance(n, ir.Store) and isinstance(n.value.type, VectorType)}


def _check_full_width_shuffles(body: ir.Block, target: Target) -> None:
    counters = None  # (run only for a narrow shuffle whose mask is a variable)
    for n in body.walk():
        if isinstance(n, ir.Shuffle) and n.width != target.warp_size:
            # an xor with a mask inside the width stays in its group of lanes, so a full-width
            # shuffle with the same mask is the same: a constant mask, or the counter of a
            # loop whose every value is one (for (m = 8; m > 0; m >>= 1), a tile of 16)
            if isinstance(n.lane, ir.Const):
                masks = [n.lane.value]
            elif isinstance(n.lane, ir.Var):
                counters = _counter_values(body) if counters is None else counters
                masks = counters.get(n.lane.name)
            else:
                masks = None
            fits = n.mode == "xor" and masks is not None and all(
                isinstance(m, int) and 0 <= m < n.width for m in masks)
            if not fits:
                raise UnsupportedError(f"{n.mode} shuffle of width {n.width} ({target.title} "
                                       f"shuffles span all {target.warp_size} lanes)",
                                       _statement_loc(body, n),
                                       hint="use width 32 or an xor shuffle within the width")


def _counter_values(body: ir.Block, most: int = 64) -> dict[str, list]:
    """The values each loop counter takes, for loops whose header reads only the counter and
    constants and whose body never writes it, found by running the header (at most ``most``
    iterations; longer loops are left out)."""
    from kir.ir.fold import fold_expr

    written = {n.name for n in body.walk() if isinstance(n, (ir.Assign, ir.Declare))}
    out: dict[str, list] = {}
    for loop in body.walk():
        if not isinstance(loop, ir.For) or loop.var in written or not isinstance(
                loop.init, ir.Const):
            continue
        if any(isinstance(v, ir.Var) and v.name != loop.var
               for e in (loop.cond, loop.update) for v in e.walk()):
            continue

        def at(e: ir.Expr, value) -> ir.Expr:
            return fold_expr(ir.transform(e, lambda n: ir.Const(value, n.type)
                                          if isinstance(n, ir.Var) else None))

        values, value = [], loop.init.value
        for _ in range(most):
            test = at(loop.cond, value)
            if not isinstance(test, ir.Const):
                break
            if not test.value:
                out[loop.var] = values
                break
            values.append(value)
            step = at(loop.update, value)
            if not isinstance(step, ir.Const):
                break
            value = step.value
    return out


def _statement_loc(body: ir.Block, expr: ir.Expr):
    """The location of the statement that evaluates ``expr`` (expressions carry none)."""
    from kir.ir.edit import own_exprs

    for stmt in body.walk():
        if isinstance(stmt, ir.Stmt) and any(n is expr for e in own_exprs(stmt)
                                             for n in e.walk()):
            return ir.stmt_loc(stmt)
    return None


def _plan_outputs(out_params, args, names: dict[str, str], atomic_targets: set[str],
                  added_only: set[str]):
    """MLX's init_value, the XOR encodings and the accumulated outputs: an output that is
    only atomically added to and would otherwise need an encoding (which atomics cannot go
    through) starts at 0 instead, its initial contents added after the kernel."""
    accumulated: set[str] = set()
    while True:
        rows = [(names.get(p.name, p.name), p.name, p.type.elem,
                 0.0 if p.name in accumulated else args[p.name].init) for p in out_params]
        init_value, encodings = plan_inits(
            rows, prefer={names.get(b, b) for b in atomic_targets})
        more = {e.arg for e in encodings if e.arg in added_only} - accumulated
        if not more:
            break
        accumulated |= more
    accumulations = [Accumulation(names.get(p.name, p.name), p.name, p.type.elem.name,
                                  args[p.name].init) for p in out_params
                     if p.name in accumulated]
    return init_value, encodings, accumulations, rows


def _only_atomically_added(body: ir.Block, outputs: set[str]) -> set[str]:
    """Outputs whose every access is an atomic add whose old value is unused: their result
    is their initial contents plus what the kernel adds, in any order."""
    touched: dict[str, bool] = {}
    for n in body.walk():
        buffer = getattr(n, "buffer", None)
        if buffer not in outputs or not isinstance(n, (ir.Load, ir.Store, ir.Atomic,
                                                       ir.MatrixLoad, ir.MatrixStore)):
            continue
        adds = isinstance(n, ir.Atomic) and n.op == "add" and n.result is None
        touched[buffer] = touched.get(buffer, True) and adds
    return {name for name, adds in touched.items() if adds}


def _reads_own_output(body: ir.Block, outputs: set[str]) -> bool:
    # CUDA's __syncthreads also orders global memory; Metal's barrier must say so
    # explicitly, which costs, so only when the kernel reads back an output it writes.
    loaded = {n.buffer for n in body.walk() if isinstance(n, ir.Load)}
    stored = {n.buffer for n in body.walk() if isinstance(n, ir.Store)}
    return bool(loaded & stored & outputs)


def _rename(kernel: ir.Kernel, reserved: set[str], inputs: list[str]) -> dict[str, str]:
    """New names for kernel names that would clash with target keywords, helpers or what
    MLX adds to the signature (attributes, ``<input>_shape``/``_strides``/``_ndim``)."""
    taken = {p.name for p in kernel.params}
    for n in kernel.body.walk():
        for attr in ("name", "var"):
            value = getattr(n, attr, None)
            if isinstance(n, ir.Stmt) and isinstance(value, str):
                taken.add(value)
    banned = set(reserved) | {f"{i}_{s}" for i in inputs for s in ("shape", "strides", "ndim")}
    banned |= {f"{p.name}_init_bits" for p in kernel.params}
    mapping = {}
    for name in sorted(taken):
        if name in banned or name.startswith("kir_") or name.startswith("__"):
            new = f"{name.lstrip('_')}_v"
            while new in taken or new in banned:
                new += "_"
            taken.add(new)
            mapping[name] = new
    return mapping


def unique_name(base: str, source: str, header: str) -> str:
    """The kernel's name with a hash of its text: MLX caches compiled custom kernels by NAME
    (``custom_kernel_<name>``) for the life of the process, so two different bodies under one
    name would silently run the first one compiled — every rewrite of a kernel must differ."""
    digest = hashlib.sha256(f"{source}\0{header}".encode()).hexdigest()[:10]
    return f"{base}_{digest}"
