"""Forwarding whole copies of local arrays.

The CUDA frontend gives each struct value its own locals, so a packed type passed through a
loader, a constructor and a return (``Pack<T> v = load(p)``; llm.c's ``x128``) becomes a
chain of local arrays, each filled element by element from the one before:
``ret[0] = obj[0]; ...; v[0] = ret[0]; ...``. The GPU compilers keep such arrays in
registers, but a reader of the IR and the rules that look at a loop's body see three copies
where the code has one value. :func:`forward_array_copies` reads the source wherever the
copy is read and drops the copy, when that is the same value: the copy ``B`` is written only
by the statements copying all of ``A`` into it (``B[k] = A[k]`` for every ``k``, constant
indices), both are thread-private (``local``), and no statement of the block holding the copy
writes ``A`` after those statements. ``B`` lives only while that block runs, so ``A`` then
holds the copied values wherever ``B`` is read (in each iteration of a loop whose body this
is, too).
"""

from __future__ import annotations

import dataclasses

from kir.ir.nodes import Alloc, Block, Const, Kernel, Load, Node, Store, transform


def forward_array_copies(kernel: Kernel) -> Kernel:
    """``kernel`` with every whole copy of a local array read from its source instead."""
    while True:
        found = _find_copy(kernel.body, ())
        if found is None:
            return kernel
        kernel = _forward(kernel, *found)


def _find_copy(block: Block, outer: tuple[Block, ...]):
    """(block, copy, source, copy statements) for the first forwardable copy under
    ``block`` (``outer``: the blocks enclosing it), or None."""
    allocs = {s.name: (i, s) for i, s in enumerate(block.stmts) if isinstance(s, Alloc)}
    for name, (at, alloc) in allocs.items():
        if alloc.space != "local":
            continue
        found = _whole_copy(block, alloc, at, outer)
        if found is not None:
            return (block, name, *found)
    for stmt in block.stmts:
        for child in _blocks_of(stmt):
            found = _find_copy(child, outer + (block,))
            if found is not None:
                return found
    return None


def _blocks_of(node: Node) -> list[Block]:
    """The blocks directly under ``node`` (a loop's body, an if's branches, a block)."""
    if isinstance(node, Block):
        return [node]
    return [c for c in node.children() if isinstance(c, Block)]


def _whole_copy(block: Block, alloc: Alloc, at: int, outer: tuple[Block, ...]):
    """(source name, indices of the copying statements) when ``alloc`` is written only by
    ``alloc[k] = A[k]`` for every ``k`` in ``block`` after its declaration, ``A`` a local
    array written only before those statements in ``block`` and declared in it or around
    it; else None."""
    copies: dict[int, int] = {}  # element -> statement index
    source = None
    for i, stmt in enumerate(block.stmts):
        if i <= at or not isinstance(stmt, Store) or stmt.buffer != alloc.name:
            continue
        value = stmt.value
        if not (isinstance(stmt.index, Const) and isinstance(value, Load)
                and isinstance(value.index, Const) and value.index.value == stmt.index.value
                and value.type == alloc.elem and (source in (None, value.buffer))):
            return None
        source = value.buffer
        if stmt.index.value in copies:
            return None
        copies[stmt.index.value] = i
    if source is None or sorted(copies) != list(range(alloc.size)):
        return None
    first = min(copies.values())
    declared = next((s for b in (block, *outer) for s in b.stmts
                     if isinstance(s, Alloc) and s.name == source), None)
    if declared is None or declared.space != "local" or declared.elem != alloc.elem \
            or declared.size < alloc.size:
        return None
    copying = set(copies.values())
    for i, stmt in enumerate(block.stmts):
        for node in stmt.walk():
            name = getattr(node, "buffer", None)
            if name == alloc.name and not isinstance(node, Load) and i not in copying:
                return None  # the copy is written or used another way elsewhere
            if name == source and not isinstance(node, Load) and i >= first:
                return None  # the source changes after the copy
    # (writes of the source outside this block cannot reach the copy: the copy lives only
    # while this block runs, and only this block's statements run then)
    return source, copying


def _forward(kernel: Kernel, block: Block, copy: str, source: str,
             copying: set[int]) -> Kernel:
    kept = tuple(s for i, s in enumerate(block.stmts)
                 if i not in copying and not (isinstance(s, Alloc) and s.name == copy))

    # first the statements go (nothing under ``block`` changes, so it is found as it is),
    # then the copy's reads read the source
    body = transform(kernel.body, lambda n: dataclasses.replace(block, stmts=kept)
                     if n is block else None)
    body = transform(body, lambda n: dataclasses.replace(n, buffer=source)
                     if isinstance(n, Load) and n.buffer == copy else None)
    return dataclasses.replace(kernel, body=body)


__all__ = ["forward_array_copies"]
