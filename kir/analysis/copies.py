"""Propagating copies of values that never change.

The CUDA frontend copies a struct's fields at each by-value argument and return, so a
kernel reading ``A.stride`` inside an inlined helper reads a chain of locals, each assigned
once from the one before, ending at the parameter ``A_stride``. Rules that ask whether a
value is the same for the whole kernel (a loop bound, a tile's stride) see a local written
in their loop instead. :func:`propagate_copies` replaces every read of such a local by the
value it copies, when that value never changes: a local written once with a kernel
parameter no statement writes, or with a local written once, at the top level of the
kernel's body, by its declaration, where it then holds that value for the rest of the
kernel. A read before the one write would read an uninitialized local (undefined in C), so
giving it the value is allowed too. The copies left unread go with
:func:`kir.analysis.dead.drop_dead_locals`.
"""

from __future__ import annotations

from collections import Counter

from kir.analysis.walk import used_vars
from kir.ir.edit import substitute
from kir.ir.nodes import (
    Assign,
    Atomic,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    For,
    If,
    Kernel,
    Load,
    Select,
    Special,
    Store,
    Unary,
    Var,
    While,
)


def propagate_copies(kernel: Kernel) -> Kernel:
    """``kernel`` with reads of single-write copies of unchanging values replaced by those
    values (repeated along chains of copies)."""
    while True:
        writes, read = _writes(kernel), used_vars(kernel)
        copied: dict[str, Var] = {}  # a local written with a variable, by that variable
        declared: dict[str, object] = {}
        for node in kernel.walk():
            if isinstance(node, Declare):
                declared[node.name] = node.type
                if isinstance(node.init, Var):
                    copied[node.name] = node.init
            elif isinstance(node, Assign) and isinstance(node.value, Var):
                copied[node.name] = node.value
        params = {p.name for p in kernel.params}
        top = {s.name for s in kernel.body.stmts
               if isinstance(s, Declare) and s.init is not None}
        steady = {name for name in params if writes[name] == 0} | \
                 {name for name in top if writes[name] == 1}
        found = next(((name, source) for name, source in copied.items()
                      if writes[name] == 1 and name in read and source.name in steady
                      and source.name != name and declared.get(name) == source.type), None)
        if found is None:
            return kernel
        name, source = found
        kernel = substitute(kernel, name, source)  # type: ignore[assignment]


_PURE = (Var, Const, Binary, Unary, Cast, Select, Special)


def forward_single_writes(kernel: Kernel) -> Kernel:
    """``kernel`` with each local written once by a pure expression replaced by that
    expression where it is read (one that loads only where it is used at once, see
    :func:`_used_next`): ``let off = A_off + 16 * m`` in a loop over ``m``
    becomes the expression itself in the loads that use it, so a rule reads the loads'
    indices as the affine functions of ``m`` they are. Allowed when every variable the
    expression reads keeps its value while the local lives: a parameter never written, a
    local written once whose scope holds this one, or the counter of a loop around it that
    only the loop's own update writes."""
    while True:
        writes = _writes(kernel)
        read = Counter(n.name for n in kernel.walk() if isinstance(n, Var))
        steady = frozenset(p.name for p in kernel.params if writes[p.name] == 0)
        found = _forwardable(kernel.body, writes, read, steady)
        if found is None:
            return kernel
        name, value = found
        kernel = substitute(kernel, name, value)  # type: ignore[assignment]


def _writes(kernel: Kernel) -> Counter:
    """How many statements write each variable (a loop counter counts twice)."""
    writes: Counter = Counter()
    for node in kernel.walk():
        if isinstance(node, Declare) and node.init is not None or isinstance(node, Assign):
            writes[node.name] += 1
        elif isinstance(node, For):
            writes[node.var] += 2  # its init and its update
        elif isinstance(node, Atomic) and node.result:
            writes[node.result] += 1
    return writes


def _forwardable(block: Block, writes: Counter, read: set, steady: frozenset,
                 in_loop: bool = False):
    """The first (local, value) in ``block`` or below that may be forwarded, else None.
    Outside loops a local computed once stays (a rule reads ``base + i`` with ``base`` a
    name); in a loop it is recomputed each iteration, which rules read as a change."""
    usable = set(steady)
    for i, stmt in enumerate(block.stmts):
        if isinstance(stmt, Declare) and writes[stmt.name] == 1:
            value = stmt.init if stmt.init is not None else next(
                (s.value for s in block.stmts[i + 1:]
                 if isinstance(s, Assign) and s.name == stmt.name), None)
            if value is not None and stmt.name in read and stmt.name not in used_vars(value) \
                    and value.type == stmt.type and (
                        (in_loop or isinstance(value, (Var, Const)))
                        and _reads_only(value, usable)
                        or _used_next(block, i, stmt.name, value, read)):
                return stmt.name, value
            usable.add(stmt.name)
        for inner, counter in _blocks_of(stmt):
            inside = frozenset(usable | ({counter} if counter and writes[counter] == 2
                                         else set()))
            found = _forwardable(inner, writes, read, inside,
                                 in_loop or isinstance(stmt, (For, While)))
            if found is not None:
                return found
    return None


def _used_next(block: Block, at: int, name: str, value, read) -> bool:
    """A value read once, by a simple statement (a store or a local's write) after its
    write, with only writes of other locals by pure values between, none of a variable the
    value reads: nothing the value depends on changes before its use (``ret = A[i]; As[j] =
    ret``, what an inlined function returning a load leaves; ``v = acc; C[i] = v``)."""
    if read[name] != 1 or not all(isinstance(n, (*_PURE, Load)) for n in value.walk()):
        return False
    depends = used_vars(value)
    for stmt in block.stmts[at + 1:]:
        if name in used_vars(stmt):
            return isinstance(stmt, (Store, Assign, Declare))
        if isinstance(stmt, Assign) and stmt.name == name:
            continue  # the one write, when the declaration has no value
        if not (isinstance(stmt, (Declare, Assign)) and stmt.name not in depends
                and all(isinstance(n, _PURE) for n in stmt.walk() if n is not stmt)):
            return False
    return False


def _blocks_of(stmt) -> list:
    """The blocks nested in ``stmt``, each with the loop counter fixed inside it (or None)."""
    if isinstance(stmt, For):
        return [(stmt.body, stmt.var)]
    if isinstance(stmt, If):
        return [(b, None) for b in (stmt.then, stmt.orelse) if b is not None]
    if isinstance(stmt, While):
        return [(stmt.body, None)]
    if isinstance(stmt, Block):
        return [(stmt, None)]
    return []


def _reads_only(expr, usable: set) -> bool:
    return all(isinstance(n, _PURE) for n in expr.walk()) and used_vars(expr) <= usable
