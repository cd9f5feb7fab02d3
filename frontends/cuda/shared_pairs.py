"""Shared arrays a pointer moves between: ping-pong buffers (a mixin of the Lowerer).

A block scan or stencil that double-buffers in shared memory swaps two pointers each step::

    __shared__ float bufA[N], bufB[N];
    float *src = bufA, *dst = bufB;
    for (...) { dst[t] = f(src); __syncthreads(); float* tmp = src; src = dst; dst = tmp; }

kir knows a pointer's buffer while lowering, and ``src = dst`` would move ``src`` from one
buffer to another. Two static shared arrays of one element type are one stretch of memory
with two names, though: the kernel is lowered again with them laid out in one allocation
(the first declared first, the next after it), each name a fixed offset into it, so every
such pointer has one buffer and an offset that changes as the kernel runs. Reading past
one array into the other is then no longer stopped by the interpreter's bounds check
(it still is past both).
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.errors import UnsupportedError

#: how many pairs one kernel may merge (each costs a lowering of the kernel)
MAX_PAIRS = 4


@dataclass(frozen=True)
class SharedDecl:
    """A static 1-D shared array as declared: its name, where, element type and length."""

    ident: str
    line: int
    col: int
    elem: object
    length: int


class SharedPair(UnsupportedError):
    """A pointer moved between the shared arrays ``a`` and ``b``: lower the kernel again
    with them merged (see the module). Uncaught, the located refusal it always was."""

    def __init__(self, error: UnsupportedError, a: SharedDecl, b: SharedDecl) -> None:
        super().__init__(error.message, error.loc, hint=error.hint,
                         source_line=error.source_line)
        self.pair = (a, b)


def shared_groups(pairs: list[tuple[SharedDecl, SharedDecl]]
                  ) -> dict[tuple, tuple[tuple, int, int]]:
    """For each merged array's (ident, line, col): (its group's first array's key, its
    offset in elements, the group's total length)."""
    groups: list[set[SharedDecl]] = []
    for a, b in pairs:
        joined = {a, b}
        for g in [g for g in groups if g & joined]:
            joined |= g
            groups.remove(g)
        groups.append(joined)
    placed = {}
    for g in groups:
        members = sorted(g, key=lambda d: (d.line, d.col))
        total = sum(d.length for d in members)
        offset = 0
        for d in members:
            placed[_key(d)] = (_key(members[0]), offset, total)
            offset += d.length
    return placed


def _key(d: SharedDecl) -> tuple:
    return (d.ident, d.line, d.col)


class SharedPairsMixin:
    shared_pairs: list = []  # pairs to merge (set before lowering: frontends.cuda._lower)

    def merged_shared(self, ident: str, elem, length: int, tree):
        """The declaration of the static 1-D shared array ``ident[length]``, and where it is
        laid out: None where it is not merged with another, else (its group's first
        array's key, its offset in elements in that array's allocation, the group's total
        length)."""
        loc = self.loc_of(tree)
        decl = SharedDecl(ident, loc.line, loc.col, elem, length)
        placed = self.__dict__.get("_shared_placed")
        if placed is None:
            placed = self.__dict__["_shared_placed"] = shared_groups(self.shared_pairs)
        return decl, placed.get(_key(decl))

    def note_shared(self, name: str, decl) -> None:
        """Remember that IR array ``name`` is the declaration ``decl``."""
        self.__dict__.setdefault("shared_decls", {})[name] = decl
        self.__dict__.setdefault("shared_names", {})[_key(decl)] = name

    def shared_root_name(self, key: tuple) -> str | None:
        return self.__dict__.get("shared_names", {}).get(key)

    def moved_between_shared(self, a: str, b: str, refused: UnsupportedError) -> None:
        """Raise SharedPair where the buffers ``a`` and ``b`` a pointer moves between are
        two static shared arrays of one element type (nothing happens otherwise)."""
        decls = self.__dict__.get("shared_decls", {})
        da, db = decls.get(a), decls.get(b)
        if da is not None and db is not None and da.elem == db.elem \
                and len(self.shared_pairs) < MAX_PAIRS:
            raise SharedPair(refused, da, db)
