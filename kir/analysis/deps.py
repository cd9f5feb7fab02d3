"""Dependences of a loop nest: which statement instances must stay in order.

``dependence_graph(kernel, label)`` looks at the loop ``label`` (the *region*) and returns a
networkx ``DiGraph`` whose nodes are the region's statements (simple statements, and loop/if
headers for the expressions they evaluate), in program order, with an edge for each pair that
may touch the same memory element or scalar with at least one write. Each edge carries a list
of :class:`Dependence` (kind flow/anti/output, what, and a direction vector: one of
``<``, ``=``, ``>`` per loop common to both statements, outermost first, from source
instance to sink instance).

What it proves (soundly, under the assumptions below):

* Memory, within one thread: indices are turned into polynomials (:mod:`kir.analysis.affine`) over
  the region's loop variables, hardware indices and loop-invariant symbols (parameters,
  locals not written in the region). Locals with a single definition are substituted, so
  pointer-offset locals (``Kj = sram + tile``) and derived indices (``row = i * B + tx``)
  resolve. ``assume`` binds symbols to values (the spec's scalar arguments), and block
  dimensions come from the launch; with them coefficients become integers and the
  Banerjee bounds and GCD tests (per direction vector, refined hierarchically) disprove
  dependences. An index that is not such a polynomial (or has symbolic coefficients on a
  loop variable) depends on everything: all directions, ``exact=False``.
* Scalars: a local written in the region and declared outside it depends on itself in every
  direction (so a reduction ``sum += x`` is a carried flow dependence, and any value live
  after the loop is an output dependence); a local declared inside loop ``k``'s body is
  fresh in each iteration of ``k`` and of the loops outside it.
* Between threads: for shared and global buffers, two different threads of a block may
  conflict; these are edges with ``cross_thread=True`` (direction unknown: threads are
  unordered except at barriers). Barriers order iterations among threads, so any such
  conflict in a loop is treated as carried by it.

What it does not prove: conditions are ignored (a guarded access counts as always executed,
which is conservative); index arithmetic is assumed not to overflow; different blocks are
assumed not to conflict (a kernel's blocks must not communicate except through atomics,
which are treated as read+write of their element); integer facts hold only for the ``assume``
values given (rules pass the spec's values, and every candidate is validated anyway).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import networkx as nx

from kir.analysis.accesses import Access, Region, collect
from kir.analysis.affine import Range, difference, may_equal_zero, rename_atoms
from kir.errors import AnalysisLimitError
from kir.ir import Barrier, Binary, For, Kernel

__all__ = ["Dependence", "dependence_graph", "loop_carries_dependence",
           "independent_iterations", "can_interchange", "private_buffers", "Region",
           "collect", "Access", "MAX_DEPENDENCE_TESTS", "thread_private_accesses"]

MAX_DEPENDENCE_TESTS = 100_000
"""Direction-vector tests one dependence graph may run. Refining ``*`` directions tries up to
3^depth vectors per pair of accesses (a scalar live across 20 nested loops: 3.5 billion);
past this many tests the graph is refused (:class:`~kir.errors.AnalysisLimitError`), and
the rule asking for it refuses its site with that reason. The example kernels' largest
graph needs a few thousand."""


class _Budget:
    """Counts the tests of one dependence graph against MAX_DEPENDENCE_TESTS."""

    def __init__(self, label: str, limit: int) -> None:
        self.label = label
        self.limit = limit
        self.used = 0

    def spend(self, count: int = 1) -> None:
        self.used += count
        if self.used > self.limit:
            raise self.refusal()

    def require(self, count: int) -> None:
        """Refuse now when ``count`` more tests are certain to be needed and do not fit."""
        if self.used + count > self.limit:
            raise self.refusal()

    def refusal(self) -> AnalysisLimitError:
        return AnalysisLimitError(
            f"the dependence test of loop {self.label} needs more than {self.limit} "
            "direction tests (a deep loop nest, or very many accesses): not analysed")


@dataclass(frozen=True)
class Dependence:
    """One dependence from ``source`` to ``sink`` (graph node ids)."""

    source: int
    sink: int
    kind: str  # "flow", "anti", "output"
    what: str  # buffer name, or "$name" for a scalar
    loops: tuple[str, ...]  # labels of the loops the direction entries refer to
    direction: tuple[str, ...]  # "<", "=", ">" per loop; empty for cross-thread
    exact: bool = True
    cross_thread: bool = False
    source_pos: int = -1  # the accesses' positions in Region.accesses order
    sink_pos: int = -1

    @property
    def carried_by(self) -> str | None:
        """The label of the loop carrying it (first non-``=`` entry), or None."""
        for label, d in zip(self.loops, self.direction):
            if d != "=":
                return label
        return None


def dependence_graph(kernel: Kernel, label: str, *, assume: Mapping[str, int] | None = None,
                     within: str | None = None, ignore: frozenset[str] = frozenset(),
                     cross_thread: bool = True, kill_covered: bool = False) -> nx.DiGraph:
    """The dependence graph of loop ``label`` (see module doc). ``within`` restricts the
    statements to those inside the nested loop ``within`` (the loops between still count as
    region loops); buffers in ``ignore`` are skipped (e.g. iteration-private ones).

    ``kill_covered`` makes the memory dependences value-based for reads that are *covered*
    (an earlier write of the same thread, in the same iteration, stores that very element;
    see :func:`kir.analysis.accesses.covered`): no value reaches such a read from elsewhere, so flow
    dependences into it and anti dependences out of it are dropped, and output dependences
    between writes whose values reach only covered reads are dropped too when the buffer is
    read nowhere outside the analysed statements."""
    region = collect(kernel, label, assume or {}, within)
    budget = _Budget(label, MAX_DEPENDENCE_TESTS)
    graph = nx.DiGraph()
    for node_id, stmt in enumerate(region.nodes):
        graph.add_node(node_id, stmt=stmt, barrier=isinstance(stmt, Barrier))
    deps: list[Dependence] = []
    mem = [a for a in region.accesses if a.buffer not in ignore]
    for i, a in enumerate(mem):
        for b in mem[i:]:
            if a.buffer != b.buffer or not (a.write or b.write):
                continue
            deps += _memory_deps(region, a, b, budget)
            if cross_thread and region.space(a.buffer) != "local" \
                    and _cross_conflict(region, a, b, budget):
                deps.append(Dependence(a.node, b.node, _kind(a.write, b.write), a.buffer,
                                       (), (), True, True))
    if kill_covered:
        deps = _kill_covered(kernel, region, mem, deps)
    deps += _scalar_deps(region, budget)
    for dep in deps:
        if graph.has_edge(dep.source, dep.sink):
            graph.edges[dep.source, dep.sink]["deps"].append(dep)
        else:
            graph.add_edge(dep.source, dep.sink, deps=[dep])
    graph.graph["region"] = region
    return graph


def _kill_covered(kernel: Kernel, region: Region, mem: list[Access],
                  deps: list[Dependence]) -> list[Dependence]:
    from kir.analysis.accesses import covered

    by_pos = {a.pos: a for a in mem}
    covered_reads = {r.pos for r in mem if r.read and not r.write and any(
        w.write and w.buffer == r.buffer and w.pos < r.pos and covered(region, w, r)
        for w in mem)}
    kept = [d for d in deps if not d.cross_thread and not (
        d.kind == "flow" and d.sink_pos in covered_reads
        or d.kind == "anti" and d.source_pos in covered_reads)]
    feeds_uncovered = {d.source_pos for d in kept if d.kind == "flow"}

    def private_write(pos: int) -> bool:
        a = by_pos[pos]
        return pos not in feeds_uncovered and region.reads_outside.get(a.buffer, 1) == 0
    out = [d for d in kept if not (d.kind == "output" and private_write(d.source_pos)
                                   and private_write(d.sink_pos))]
    return out + [d for d in deps if d.cross_thread]


def _kind(source_writes: bool, sink_writes: bool) -> str:
    if source_writes and sink_writes:
        return "output"
    return "flow" if source_writes else "anti"


def all_deps(graph: nx.DiGraph) -> list[Dependence]:
    return [d for _, _, data in graph.edges(data=True) for d in data["deps"]]


# ----------------------------------------------------------------------------- memory


def _pair_setup(region: Region, a: Access, b: Access, cross: bool):
    """The renamed difference polynomial of the two indices, and the common loops."""
    common: list[For] = []
    for la, lb in zip(a.loops, b.loops):
        if la is not lb:
            break
        common.append(la)
    names1 = {region.var_of(f): region.var_of(f) + "#1" for f in a.loops}
    names2 = {region.var_of(f): region.var_of(f) + "#2" for f in b.loops}
    if cross:
        for atom in region.thread_ranges:
            names1[atom], names2[atom] = atom + "#1", atom + "#2"
    pa, pb = rename_atoms(a.index, names1), rename_atoms(b.index, names2)
    if a.width > 1:
        pa = difference(pa, {("%e#1",): -1})
    if b.width > 1:
        pb = difference(pb, {("%e#2",): -1})
    return difference(pa, pb), common


def _vectors(test, n: int, budget: _Budget) -> list[tuple[str, ...]]:
    """Concrete direction vectors (over n loops) the test cannot rule out, refining ``*``
    (each test spent from ``budget``)."""
    out: list[tuple[str, ...]] = []
    stack = [("*",) * n]
    while stack:
        vector = stack.pop()
        budget.spend()
        if not test(vector):
            continue
        if "*" not in vector:
            out.append(vector)
            continue
        k = vector.index("*")
        for d in (">", "=", "<"):
            stack.append(vector[:k] + (d,) + vector[k + 1:])
    return out


def _memory_deps(region: Region, a: Access, b: Access, budget: _Budget) -> list[Dependence]:
    exact = a.index is not None and b.index is not None
    if exact:
        h, common = _pair_setup(region, a, b, cross=False)
        singles = _singles(region, a, b, common)
        singles.update(region.thread_ranges)  # one thread: its index is shared by both

        def test(vector: tuple[str, ...]) -> bool:
            pairs = [(region.var_of(f) + "#1", region.var_of(f) + "#2", d,
                      region.ranges.get(f.label)) for f, d in zip(common, vector)]
            return may_equal_zero(h, pairs, singles)
        _require_if_blind(region, h, common, test, budget)
    else:
        common = []
        for la, lb in zip(a.loops, b.loops):
            if la is not lb:
                break
            common.append(la)

        def test(vector: tuple[str, ...]) -> bool:
            return True
        budget.require(_directions(region, common))  # every vector survives
    labels = tuple(f.label for f in common)
    return _orient(a, b, _vectors(test, len(common), budget), labels, a.buffer, exact)


def _directions(region: Region, loops: list[For]) -> int:
    """How many direction vectors over ``loops`` are possible: ``=`` on a loop of one trip,
    any of three on the others."""
    count = 1
    for f in loops:
        bounds = region.ranges.get(f.label)
        count *= 1 if bounds is not None and bounds[1] <= bounds[0] else 3
    return count


def _require_if_blind(region: Region, h, common: list[For], test, budget: _Budget) -> None:
    """When the index difference ``h`` involves none of the common loops' variables, the
    test answers alike for every direction: all possible vectors survive when one does, and
    their count is known before enumerating them."""
    names = {region.var_of(f) + suffix for f in common for suffix in ("#1", "#2")}
    if any(atom in names for mono in h for atom in mono):
        return
    count = _directions(region, common)
    if count > 1 and test(("*",) * len(common)):
        budget.require(count)


def _singles(region: Region, a: Access, b: Access, common: list[For]) -> dict[str, Range]:
    singles: dict[str, Range] = {}
    if a.width > 1:
        singles["%e#1"] = (0, a.width - 1)
    if b.width > 1:
        singles["%e#2"] = (0, b.width - 1)
    for f in a.loops[len(common):]:
        singles[region.var_of(f) + "#1"] = region.ranges.get(f.label)
    for f in b.loops[len(common):]:
        singles[region.var_of(f) + "#2"] = region.ranges.get(f.label)
    return singles


def _orient(a: Access, b: Access, vectors, labels, what: str, exact: bool) -> list[Dependence]:
    flip = {"<": ">", ">": "<", "=": "="}
    out: list[Dependence] = []
    for vector in vectors:
        first = next((d for d in vector if d != "="), "=")
        if a is b and first == ">":
            continue  # the mirror image of a "<" vector of the same pair
        if first == ">" or (first == "=" and a.pos > b.pos):
            src, dst, vector = b, a, tuple(flip[d] for d in vector)
        else:
            src, dst = a, b
        if first == "=" and src is dst:
            continue  # the same instance
        out.append(Dependence(src.node, dst.node, _kind(src.write, dst.write), what, labels,
                              vector, exact, False, src.pos, dst.pos))
    return out


def _cross_conflict(region: Region, a: Access, b: Access, budget: _Budget) -> bool:
    """Whether two different threads of a block may touch one element (one writing)."""
    if a.index is None or b.index is None:
        return True
    budget.spend(2 * len(region.thread_ranges))
    h, common = _pair_setup(region, a, b, cross=True)
    singles = _singles(region, a, b, common)
    pairs = [(region.var_of(f) + "#1", region.var_of(f) + "#2", "*",
              region.ranges.get(f.label)) for f in common]
    axes = list(region.thread_ranges.items())
    if not axes:
        return False  # one thread per block
    for k, (atom, rng) in enumerate(axes):
        # Threads differ on axis k (either order); earlier axes equal, later ones free.
        for d in ("<", ">"):
            thread_pairs = [(t + "#1", t + "#2", "=" if j < k else d if j == k else "*", r)
                            for j, (t, r) in enumerate(axes)]
            if may_equal_zero(h, pairs + thread_pairs, singles):
                return True
    return False


# ----------------------------------------------------------------------------- scalars


def _scalar_deps(region: Region, budget: _Budget) -> list[Dependence]:
    out: list[Dependence] = []
    for name, (writers, readers) in region.scalars.items():
        scope = region.decl_loops.get(name, ())
        for i, a in enumerate(writers):
            for b in writers[i:] + readers:
                common: list[For] = []
                for la, lb in zip(a.loops, b.loops):
                    if la is not lb:
                        break
                    common.append(la)

                def test(vector, common=common) -> bool:
                    return all(d in ("=", "*") for f, d in zip(common, vector) if
                               any(f is s for s in scope))
                # Every direction on the loops outside the scalar's scope survives: 3^free
                # vectors at least, known before enumerating them.
                free = sum(1 for f in common if not any(f is s for s in scope))
                budget.require(3 ** free)
                vectors = _vectors(test, len(common), budget)
                out += _orient(a, b, vectors, tuple(f.label for f in common), "$" + name,
                               True)
    return out


# ----------------------------------------------------------------------------- queries


def loop_carries_dependence(kernel: Kernel, label: str,
                            assume: Mapping[str, int] | None = None) -> bool | None:
    """True when some dependence is carried by loop ``label`` (including scalar reductions
    and, conservatively, any conflict between threads on a buffer the loop writes); False
    when proved absent; None when only unanalysable indices stand in the way."""
    graph = dependence_graph(kernel, label, assume=assume)
    unknown = False
    for dep in all_deps(graph):
        if dep.cross_thread:
            return True
        if dep.direction and dep.direction[0] != "=":
            if dep.exact:
                return True
            unknown = True
    return None if unknown else False


def independent_iterations(kernel: Kernel, label: str,
                           assume: Mapping[str, int] | None = None) -> bool:
    """Whether the iterations of loop ``label`` are proved independent (may run in any
    order, or in parallel within each thread)."""
    return loop_carries_dependence(kernel, label, assume) is False


def can_interchange(kernel: Kernel, outer: str, inner: str,
                    assume: Mapping[str, int] | None = None, *, within: str | None = None,
                    ignore: frozenset[str] = frozenset(), kill_covered: bool = False) -> bool:
    """Whether swapping loop ``outer`` with loop ``inner`` (nested in it) keeps every
    dependence: none may have direction ``<`` on ``outer`` and ``>`` on ``inner``. Conflicts
    between threads make it False (reordering changes which barrier interval, or which
    lock-step, an access lands in)."""
    graph = dependence_graph(kernel, outer, assume=assume, within=within, ignore=ignore,
                             kill_covered=kill_covered)
    for dep in all_deps(graph):
        if dep.cross_thread:
            return False
        if inner in dep.loops:
            pos = dep.loops.index(inner)
            if dep.direction[0] == "<" and dep.direction[pos] == ">":
                return False
            if dep.direction[0] == "<" and not dep.exact:
                return False
    return True


def private_buffers(kernel: Kernel, label: str,
                    assume: Mapping[str, int] | None = None) -> frozenset[str]:
    """Shared/local arrays that are private to each iteration of loop ``label``: accessed
    nowhere else in the kernel, and every read is preceded, in the same iteration and the
    same thread, by a write of that very element (same index form, the writing loop's range
    covering the reading loop's). No value flows between iterations through them."""
    from kir.analysis.accesses import covered

    region = collect(kernel, label, assume or {}, None)
    result = set()
    for name in region.allocs:
        inside = [a for a in region.accesses if a.buffer == name]
        if not inside or region.outside_uses.get(name, 0) > 0:
            continue
        if any(a.index is None for a in inside):
            continue
        writes = [a for a in inside if a.write]
        if all(any(w.pos < r.pos and covered(region, w, r) for w in writes)
               for r in inside if r.read):
            result.add(name)
    return frozenset(result)


WHOLE_KERNEL = "L_whole_kernel"


def thread_private_accesses(kernel: Kernel,
                            assume: Mapping[str, int] | None = None) -> frozenset[int]:
    """The loads and stores of shared arrays (``id`` of the IR node) that touch only
    elements no other thread of the block touches, by any access, anywhere in the kernel (a
    thread's own row of scratch): the cross-thread test above, over the whole body, with
    ``assume``'s values for symbols, finds no conflict between it and any access of its
    array. None is found for an array a warp-matrix fragment reaches, for one with an index
    the test cannot read, or when the test would run past its budget. The interpreter skips
    its race marks at these accesses (:mod:`kir.interp.races`): no race can involve them."""
    from kir.analysis.memory import matrix_buffers
    from kir.ir import Alloc, Atomic, Block, Const, Load, Store, Var
    from kir.ir.edit import own_exprs
    from kir.ir.types import BOOL, I32

    shared = {n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared"}
    shared -= matrix_buffers(kernel.body)
    if not shared:
        return frozenset()
    counter = Var("whole_kernel_pass", I32)
    whole = For(WHOLE_KERNEL, counter.name, I32, Const(0, I32),
                Binary("<", counter, Const(1, I32), BOOL),
                Binary("+", counter, Const(1, I32), I32), kernel.body)
    wrapped = dataclasses.replace(kernel, body=Block((whole,), kernel.body.loc))
    try:
        region = collect(wrapped, WHOLE_KERNEL, assume or {})
    except AnalysisLimitError:
        return frozenset()
    # Each access's IR node, in the order collect records them: a statement's loads, then
    # the statement itself when it stores or is an atomic.
    nodes: list[object] = []
    for stmt in region.nodes:
        nodes += [n for expr in own_exprs(stmt) for n in expr.walk() if isinstance(n, Load)]
        if isinstance(stmt, (Store, Atomic)):
            nodes.append(stmt)
    memory = region.accesses  # memory only: scalars are kept in region.scalars
    if len(nodes) != len(memory):  # a shape this walk does not follow: no claim
        return frozenset()
    budget = _Budget(WHOLE_KERNEL, MAX_DEPENDENCE_TESTS)
    verdict: dict[int, bool] = {}
    try:
        for a, node in zip(memory, nodes):
            if a.buffer not in shared or region.reads_outside.get(a.buffer, 0):
                continue
            alone = a.index is not None and not any(
                _cross_conflict(region, a, b, budget) for b in memory
                if b.buffer == a.buffer and (a.write or b.write))
            verdict[id(node)] = verdict.get(id(node), True) and alone
    except AnalysisLimitError:
        return frozenset()
    return frozenset(key for key, alone in verdict.items() if alone)
