"""kir IR: immutable, typed, structured nodes close to what a CUDA author wrote.

Every node is a frozen, slotted dataclass with structural equality and hash. Source
locations (``loc``) ride along for dumps and errors but take no part in equality, so two
kernels that differ only in where their statements came from are the same kernel.

Conventions the rest of kir relies on:

* Every expression carries its ``type``; the frontend inserts explicit :class:`Cast` nodes
  so both operands of a :class:`Binary` have one type (C's usual arithmetic conversions
  already applied). Comparisons and ``&&``/``||`` have type ``bool``.
* Memory is named, not pointed at: :class:`Load` / :class:`Store` / :class:`Atomic` name a
  buffer (a kernel parameter or an :class:`Alloc`) and an element index. CUDA pointer
  variables are lowered to integer offsets into their root buffer. A load or store whose
  ``type`` is a :class:`VectorType` moves ``count`` consecutive elements starting at
  ``index`` (index counted in the buffer's scalar elements).
* Local variable names are unique within a kernel (the frontend renames shadowed names).
* Launch grid dimensions are size expressions (strings over the spec's named sizes);
  block dimensions and dynamic shared bytes are concrete.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Iterator, Union

from kir.errors import Loc
from kir.ir.types import (
    BOOL,
    F32,
    I32,
    U32,
    MatrixType,
    PointerType,
    ScalarType,
    Type,
    VectorType,
)

ValueType = Union[ScalarType, VectorType]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}

# Field annotations that never hold a node (names, numbers, types, source locations): the
# traversals skip those fields. Any other annotation is looked into, so a new node class is
# traversed correctly whatever it declares.
_LEAF_ANNOTATIONS = frozenset({
    "str", "str | None", "int", "int | None", "bool", "int | float | bool", "Loc | None",
    "Type", "ValueType", "ScalarType", "VectorType", "ScalarType | VectorType", "MatrixType",
    "tuple[str, str, str]", "tuple[int, int, int]"})


def _field_names(cls: type) -> tuple[str, ...]:
    """A node class's fields that may hold nodes, in order (``dataclasses.fields`` is slow to
    ask each time, and every traversal asks it of every node)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if str(f.type) not in _LEAF_ANNOTATIONS)
    return names


class Node:
    """Base of all IR nodes: generic traversal over child nodes.

    ``_kids`` caches :meth:`children`, and ``_memo`` one value derived from the node, by
    class: a :class:`Block`'s :meth:`walk`, a :class:`Kernel`'s fingerprint. Nodes are
    immutable and shared between the kernels a search derives from one another, and walking
    and printing them was most of a search's own loop (the attention example with an
    evaluator that answers at once, BENCHMARKS.md "Round 17"). Neither is a dataclass field,
    so equality, hashing, ``replace`` and pickling never see them."""

    __slots__ = ("_kids", "_memo")

    def children(self) -> tuple["Node", ...]:
        """Direct child nodes, in field order (tuples of nodes are flattened)."""
        try:
            return self._kids  # type: ignore[attr-defined]
        except AttributeError:
            pass
        out: list[Node] = []
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if isinstance(value, Node):
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if isinstance(v, Node))
        kids = tuple(out)
        object.__setattr__(self, "_kids", kids)
        return kids

    def with_children(self, new: tuple["Node", ...] | list["Node"]) -> "Node":
        """A copy with child nodes replaced, in the order :meth:`children` gives them."""
        it = iter(new)
        changes = {}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if isinstance(value, Node):
                changes[name] = next(it)
            elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
                changes[name] = tuple(next(it) if isinstance(v, Node) else v for v in value)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def walk(self) -> Iterator["Node"]:
        """Pre-order traversal of this node and all descendants (iterative, no recursion).
        A :class:`Block` keeps its traversal once made (``_memo``), and a walk passing
        through a block that has one takes it whole: rules walk the same statements over and
        over, and most of a rewritten kernel's blocks are its parent's."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            if node.__class__ is Block and node is not self:
                flat = getattr(node, "_memo", None)
                if flat is not None:
                    yield from flat
                    continue
            yield node
            stack.extend(reversed(node.children()))


def node(cls):
    """Decorator: make ``cls`` a frozen, slotted, structurally compared IR node."""
    return dataclass(frozen=True, slots=True)(cls)


def _loc() -> Loc | None:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- expressions


class Expr(Node):
    __slots__ = ()
    type: Type


@node
class Const(Expr):
    """A literal. ``value`` is a Python int, float or bool; floats may be inf/-inf/nan."""

    value: int | float | bool
    type: ScalarType


@node
class Var(Expr):
    """A local variable or a scalar kernel parameter."""

    name: str
    type: Type


SPECIAL_KINDS = ("thread", "block", "block_dim", "grid_dim", "lane", "warp", "warp_size")
# The IR's warp: the lanes that shuffles, warp reductions and matrix fragments span, and
# ``warp_size``'s value. CUDA's warp; on Apple GPUs a SIMD-group has as many threads.
WARP = 32


@node
class Special(Expr):
    """A hardware index: ``thread.x`` (threadIdx.x), ``block.y`` (blockIdx.y),
    ``block_dim.x``, ``grid_dim.z``, ``lane`` (lane in warp/SIMD-group), ``warp`` (warp index
    in block) and ``warp_size``. ``axis`` is "x"/"y"/"z", or "" for lane/warp/warp_size."""

    kind: str
    axis: str = ""
    type: ScalarType = U32


@node
class Load(Expr):
    """Read ``buffer[index]``; a vector ``type`` reads that many consecutive elements."""

    buffer: str
    index: Expr
    type: ValueType


UNARY_OPS = ("-", "!", "~")


@node
class Unary(Expr):
    op: str
    operand: Expr
    type: ScalarType


BINARY_OPS = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^",
              "&&", "||", "==", "!=", "<", "<=", ">", ">=")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


@node
class Binary(Expr):
    """C arithmetic on same-typed operands; C semantics (integer division truncates, i32
    wraps, shifts mask nothing). Vector operands apply element-wise."""

    op: str
    left: Expr
    right: Expr
    type: ValueType


@node
class Select(Expr):
    """``cond ? if_true : if_false`` (both arms evaluated; no side effects in kir exprs)."""

    cond: Expr
    if_true: Expr
    if_false: Expr
    type: ValueType


@node
class Cast(Expr):
    """C conversion of ``value`` to ``type`` (float to int truncates toward zero)."""

    value: Expr
    type: ValueType


INTRINSICS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "max", "min", "abs", "tanh",
              "pow", "erf", "fma", "sin", "cos", "floor", "ceil", "round", "rint", "trunc",
              "tan", "asin", "acos", "atan", "atan2", "log10", "fmod", "copysign",
              "isnan", "isinf", "popcount", "clz", "ctz", "bitcast", "exp10", "sinpi", "cospi",
              "asinh", "acosh", "atanh", "hypot", "cbrt", "erfc")
#: the intrinsics taking more than one argument, and how many
INTRINSIC_ARITY = {"pow": 2, "max": 2, "min": 2, "fma": 3, "atan2": 2, "fmod": 2, "copysign": 2,
                   "hypot": 2}
#: intrinsics answering a question about a float (their type is bool)
PREDICATES = ("isnan", "isinf")
#: ``bitcast(x)``: the bits of ``x`` read as the call's type, a scalar of the same width
#: (CUDA's ``__int_as_float``, Metal's ``as_type<float>``)
#: intrinsics on an integer's bits (their type is the argument's)
BIT_INTRINSICS = ("popcount", "clz", "ctz")


@node
class Call(Expr):
    """A math intrinsic from :data:`INTRINSICS`. ``fast`` asks for the fast, less precise
    form (CUDA ``__expf``, Metal ``metal::fast::exp``)."""

    fn: str
    args: tuple[Expr, ...]
    type: ValueType
    fast: bool = False


SHUFFLE_MODES = ("idx", "xor", "down", "up")


@node
class Shuffle(Expr):
    """Warp shuffle: ``__shfl_{sync,xor_sync,down_sync,up_sync}(mask, value, lane, width)``.
    ``mode`` is idx/xor/down/up; ``lane`` is the source lane, xor mask or delta."""

    mode: str
    value: Expr
    lane: Expr
    type: ValueType
    width: int = 32


@node
class WarpReduce(Expr):
    """Reduce ``value`` over the active lanes of a warp (sum/max/min); every lane gets the
    result (Metal ``simd_sum``/``simd_max``; CUDA a shuffle butterfly)."""

    op: str
    value: Expr
    type: ScalarType


@node
class MakeVector(Expr):
    elems: tuple[Expr, ...]
    type: VectorType


@node
class Component(Expr):
    """Element ``index`` (0..3 for .x .y .z .w) of a vector."""

    vector: Expr
    index: int
    type: ScalarType


# ------------------------------------------------------------------------------ statements


class Stmt(Node):
    __slots__ = ()
    loc: Loc | None


@node
class Block(Stmt):
    stmts: tuple[Stmt, ...] = ()
    loc: Loc | None = _loc()

    def walk(self) -> Iterator[Node]:
        """:meth:`Node.walk`, made once and kept (see there)."""
        flat = getattr(self, "_memo", None)
        if flat is None:
            flat = tuple(Node.walk(self))
            object.__setattr__(self, "_memo", flat)
        return iter(flat)


@node
class Declare(Stmt):
    """Declare a local scalar or vector variable, optionally initialized."""

    name: str
    type: ValueType
    init: Expr | None = None
    loc: Loc | None = _loc()


@node
class Assign(Stmt):
    name: str
    value: Expr
    loc: Loc | None = _loc()


@node
class Store(Stmt):
    """Write ``buffer[index] = value``; a vector value writes consecutive elements.

    ``asynchronous`` (printed ``async As[i] = A[j]``): a copy from global memory into a
    shared array that completes later (CUDA's ``cp.async``, sm_80+). Its value must be a
    plain load of 4, 8 or 16 bytes from a global buffer; the copy is guaranteed to have landed
    only after an :class:`AsyncWait` that leaves fewer groups in flight than were committed
    after it (:class:`AsyncCommit`), and for other threads only after a barrier too. Targets
    without such copies (Metal) perform it as an ordinary load and store, which is one of
    the orders the asynchronous copy allows. The interpreter lands it as late as allowed, so
    a kernel that reads the tile before waiting reads stale data and fails validation."""

    buffer: str
    index: Expr
    value: Expr
    loc: Loc | None = _loc()
    asynchronous: bool = False


LOOP_KINDS = ("serial", "unroll")


@node
class For(Stmt):
    """``for (type var = init; cond; var = update) body`` with a stable ``label`` (L0, L1, ...
    in source order). ``kind`` is serial or unroll (a rule's decision); ``unroll`` keeps a
    ``#pragma unroll [N]`` hint from the source (0 = full, None = none)."""

    label: str
    var: str
    type: ScalarType
    init: Expr
    cond: Expr
    update: Expr
    body: Block
    kind: str = "serial"
    unroll: int | None = None
    loc: Loc | None = _loc()


@node
class While(Stmt):
    """``while (cond) body``, or ``do body while (cond)`` when ``test_first`` is False."""

    cond: Expr
    body: Block
    test_first: bool = True
    loc: Loc | None = _loc()


@node
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Block | None = None
    loc: Loc | None = _loc()


@node
class Barrier(Stmt):
    """``__syncthreads()`` (scope block) or ``__syncwarp()`` (scope warp)."""

    scope: str = "block"
    loc: Loc | None = _loc()


@node
class Fence(Stmt):
    """``__threadfence()`` (scope device) or ``__threadfence_block()`` (scope block): this
    thread's memory writes before it are seen by the scope's threads before its writes after
    it. Unlike a barrier nobody waits: a block that publishes results and then takes a ticket
    from an atomic counter (the last block done combines them) needs it between the two."""

    scope: str = "device"
    loc: Loc | None = _loc()


FENCE_SCOPES = ("device", "block")


@node
class AsyncCommit(Stmt):
    """Close this thread's asynchronous copies issued since the last commit into one group
    (CUDA ``cp.async.commit_group``; nothing on targets that copy synchronously). Like a
    barrier, every thread of the block reaches it together (the interpreter's model)."""

    loc: Loc | None = _loc()


@node
class AsyncWait(Stmt):
    """Wait until at most ``pending`` of this thread's committed copy groups are still in
    flight, the older ones landed (CUDA ``cp.async.wait_group pending``). Other threads'
    copies are visible only after a block barrier that follows."""

    pending: int
    loc: Loc | None = _loc()


ASYNC_STMTS = (AsyncCommit, AsyncWait)


@node
class Assert(Stmt):
    """``assert(cond)`` from the source: the interpreter stops with an error at ``loc``
    when ``cond`` is false in any thread; GPU code drops it (as release builds do).
    ``message``: what the error says instead of quoting ``cond``, for a check the frontend
    made (a CUDA rule kir can only check as the kernel runs, not an assert of the user's)."""

    cond: Expr
    message: str | None = None
    loc: Loc | None = _loc()


# "inc" is CUDA's atomicInc on a u32: the old value ``o`` becomes ``o >= value ? 0 : o + 1``
# (a counter wrapping at ``value``, as tickets of the blocks done are taken).
ATOMIC_OPS = ("add", "max", "min", "exch", "and", "or", "xor", "inc")
BITWISE_ATOMICS = ("and", "or", "xor")  # (on integers only)


@node
class Atomic(Stmt):
    """Atomic read-modify-write of ``buffer[index]``; the old value goes to the already
    declared local ``result`` when one is named."""

    op: str
    buffer: str
    index: Expr
    value: Expr
    result: str | None = None
    loc: Loc | None = _loc()


@node
class Alloc(Stmt):
    """A shared (per block) or local (per thread) array of ``size`` elements. A ``dynamic``
    shared array is CUDA's ``extern __shared__``; its size comes from the launch."""

    name: str
    elem: ScalarType | VectorType
    size: int
    space: str = "shared"
    dynamic: bool = False
    loc: Loc | None = _loc()


@node
class Return(Stmt):
    loc: Loc | None = _loc()


@node
class Break(Stmt):
    loc: Loc | None = _loc()


@node
class Continue(Stmt):
    loc: Loc | None = _loc()


# ------------------------------------------------------------------------ matrix fragments
# A fragment (type MatrixType) is held cooperatively by the 32 lanes of a warp / SIMD-group:
# every matrix statement must be reached by all lanes of the warp together (the verifier
# rejects one under lane-divergent control flow). Fragments live in their own namespace of
# local names (unique within the kernel like every local) and appear only in these
# statements, never in expressions.


@node
class MatrixFill(Stmt):
    """Declare fragment ``name`` of ``type`` with every element ``value`` (Metal
    ``make_filled_simdgroup_matrix``, CUDA ``wmma::fill_fragment``)."""

    name: str
    type: MatrixType
    value: Expr
    loc: Loc | None = _loc()


@node
class MatrixLoad(Stmt):
    """Declare fragment ``name`` of ``type`` loaded from ``buffer`` (global or shared):
    element (i, j) is ``buffer[index + i * stride + j]``, or with ``transpose``
    ``buffer[index + j * stride + i]`` (Metal ``simdgroup_load``, CUDA
    ``wmma::load_matrix_sync``)."""

    name: str
    type: MatrixType
    buffer: str
    index: Expr
    stride: Expr
    transpose: bool = False
    loc: Loc | None = _loc()


# The precisions of matrix products that run on TF32 tensor cores (MatrixMultiplyAccumulate).
TF32_PRECISIONS = frozenset({"tf32", "tf32x3"})


@node
class MatrixMultiplyAccumulate(Stmt):
    """``acc = a · b + acc`` on fragments (Metal ``simdgroup_multiply_accumulate``, CUDA
    ``wmma::mma_sync``); ``acc`` must be a fragment declared earlier.

    ``precision`` is what the product may lose: ``"f32"`` (exact f32 products) or
    ``"tf32"`` (every element of ``a`` and ``b`` first rounded to TF32 — 10 explicit mantissa
    bits, to nearest, ties away from zero, as CUDA's ``cvt.rna.tf32.f32`` — then multiplied
    exactly and accumulated in f32: NVIDIA tensor cores' f32 path). Only targets with
    ``Target.tf32_matrix`` print a TF32 product; the interpreter rounds the same way, so
    validation decides whether a spec's tolerance admits it. ``"tf32x3"`` keeps f32's
    accuracy on the same tensor cores (CUTLASS's "3xTF32"): each operand is split into a TF32
    part and a TF32 remainder, ``x = big + small``, and the product is
    ``small_a·big_b + big_a·small_b + big_a·big_b`` accumulated in f32 in that order (the
    ``small·small`` term, ~2^-22 relative, dropped)."""

    acc: str
    a: str
    b: str
    precision: str = "f32"
    loc: Loc | None = _loc()


@node
class MatrixStore(Stmt):
    """Write fragment ``name`` to ``buffer``: element (i, j) goes to
    ``buffer[index + i * stride + j]`` (Metal ``simdgroup_store``, CUDA
    ``wmma::store_matrix_sync``)."""

    buffer: str
    index: Expr
    stride: Expr
    name: str
    loc: Loc | None = _loc()


MATRIX_STMTS = (MatrixFill, MatrixLoad, MatrixMultiplyAccumulate, MatrixStore)


# ---------------------------------------------------------------------------------- kernel


@node
class Param(Node):
    """A kernel parameter: a buffer (``PointerType``) or a scalar passed by value."""

    name: str
    type: Type
    loc: Loc | None = _loc()

    @property
    def is_buffer(self) -> bool:
        return isinstance(self.type, PointerType)


@node
class Launch(Node):
    """How the kernel is launched: ``grid`` in blocks, as size expressions in the spec's
    expression language (``"B"``, ``"ceil(N / 32)"``; see :mod:`kir.spec.sizeexpr`), ``block``
    threads per block, ``shared_bytes`` of dynamic shared memory. ``specialized`` says a rule
    baked a count computed at the spec's sizes into the kernel (a guard, a grid size): it is
    right at those sizes only, and validation does not try it at others. ``ignores`` names
    scalar arguments the kernel no longer reads though the original did, and whose values it
    does not depend on (a rule rebuilt it to compute the same whatever they are, e.g. a
    FlashAttention kernel's tile counts): not reading them is then no sign of a baked value
    (kir.measure.cases.judged_cases). ``scratch`` names the buffer parameters that are the
    kernel's own workspace (a rule's partial results, or a ``__device__`` variable the CUDA
    code writes), each with its element count as a size expression (``("part", "H * 8")``):
    whoever launches the kernel gives each a zero-filled buffer of that many elements of
    the parameter's type, as for a spec argument of role ``scratch``
    (:meth:`kir.spec.BoundSpec.for_kernel`)."""

    grid: tuple[str, str, str]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    specialized: bool = False
    ignores: tuple[str, ...] = ()
    scratch: tuple[tuple[str, str], ...] = ()

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@node
class Kernel(Node):
    name: str
    params: tuple[Param, ...]
    body: Block
    launch: Launch
    source: str | None = field(default=None, compare=False)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def fingerprint(self) -> str:
        """A stable content hash (sha256 of the location-free IR text), for databases and
        deduplication across processes (Python's ``hash`` is salted per process)."""
        from kir.ir.printer import print_kernel

        known = getattr(self, "_memo", None)
        if known is None:
            text = print_kernel(self, locations=False)
            known = hashlib.sha256(text.encode()).hexdigest()[:16]
            object.__setattr__(self, "_memo", known)
        return known


# ------------------------------------------------------------------------------- utilities


def const(value: int | float | bool, type: ScalarType | None = None) -> Const:
    """A literal with the obvious type (bool, i32 or f32) unless one is given."""
    if type is None:
        type = BOOL if isinstance(value, bool) else I32 if isinstance(value, int) else F32
    return Const(value, type)


def transform(node: Node, fn, shared: bool = False) -> Node:
    """Rebuild ``node`` bottom-up, calling ``fn(n)`` on each rebuilt node; ``fn`` returns a
    replacement or None to keep it. Iterative, so deep trees do not exhaust the stack.

    ``shared``: rebuild a subtree met more than once (the same object) only the first time
    and reuse the result. Expressions built by substituting lets into one another share
    their subtrees, and as trees they grow with every substitution (a decode kernel's loop
    body, read as one expression, visits millions of nodes); only for an ``fn`` that answers
    alike wherever the node stands (no counters, no fresh names)."""
    # Post-order with an explicit stack: (node, children_done).
    stack: list[tuple[Node, bool]] = [(node, False)]
    results: list[Node] = []
    rebuilt: dict[int, Node] = {}
    while stack:
        current, done = stack.pop()
        if not done:
            if shared and id(current) in rebuilt:
                results.append(rebuilt[id(current)])
                continue
            stack.append((current, True))
            for child in reversed(current.children()):
                stack.append((child, False))
            continue
        original = current
        count = len(current.children())
        if count:
            new_children = results[-count:]
            del results[-count:]
            old = current.children()
            if any(a is not b for a, b in zip(new_children, old)):
                current = current.with_children(new_children)
        replaced = fn(current)
        results.append(current if replaced is None else replaced)
        if shared:
            rebuilt[id(original)] = results[-1]
    return results[0]


def stmt_loc(stmt: Stmt) -> Loc | None:
    return getattr(stmt, "loc", None)
