"""kir.ir.transform over expressions that share subtrees (what substituting lets builds)."""

from kir.ir import Binary, Var, transform
from kir.ir.types import F32


def _chain(depth: int):
    """x + x, then that + itself, ``depth`` times: a tree of 2**depth leaves, `depth` nodes."""
    e = Var("x", F32)
    for _ in range(depth):
        e = Binary("+", e, e, F32)
    return e


def _renamed(n):
    return Var("y", F32) if isinstance(n, Var) else None


def test_shared_rebuilds_each_subtree_once_and_gives_the_same_tree():
    calls = []

    def counting(n):
        calls.append(n)
        return _renamed(n)

    e = _chain(12)
    once = transform(e, counting, shared=True)
    assert len(calls) == 13  # one call per distinct node, not per occurrence
    assert once == transform(e, _renamed)
    assert "x" not in {n.name for n in once.walk() if isinstance(n, Var)}


def test_without_shared_every_occurrence_is_visited():
    calls = []
    transform(_chain(6), lambda n: calls.append(n))
    assert len(calls) == 2 ** 7 - 1
