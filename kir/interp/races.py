"""Races: a thread reading what another of its block wrote, or overwriting what another
read, with no barrier between the two, in shared memory or in a global buffer.

The interpreter runs a chunk's lanes in lockstep, statement by statement, so such a kernel
gets the answer its author meant here, while on a GPU the other thread may not have written
yet (or may already have overwritten): warps run independently of each other, and within a
warp the compiler, which does not see another lane's access, may move or cache the access
(shared memory is not ``volatile``; GPUs since Volta do not even promise a warp runs
together). A kernel that passes here and fails on the device is a wrong answer with exit 0,
so the interpreter reports the race instead (``RaceError``), naming both threads and the
fix: a ``__syncthreads()``, or a ``__syncwarp()`` when both threads are in one warp.

What is tracked, per element of every shared array of a chunk, since the last block barrier:
the lowest and highest lane that wrote it and that read it. The model is a warp that runs
converged (as the interpreter's lockstep does, and as kir's own warp rules assume) over a
compiler that keeps each thread's own accesses to one address in order but may reorder its
accesses to different addresses (shared memory is not ``volatile``). So it is a race when:

* a thread reads an element another thread wrote, unless it wrote it too (threads that each
  wrote one value — every lane of a warp storing its row — read back their own value,
  whichever write landed) or a ``__syncwarp`` of the writers' warp ordered the writes for
  the reader's warp;
* a thread writes an element another thread read, unless the readers are all of the
  writer's warp and include the writer itself (the warp ran the read together, and the
  writer's own read comes before its write), or a ``__syncwarp`` of their warp came between;
* two threads write different values to one element (but for the writer's own warp, as
  for reads): which one stays is left to chance.

Global buffers the kernel stores to are marked the same way (:func:`global_marks`, within
:data:`MAX_GLOBAL_ELEMENTS`), with one difference: a race is reported only when both threads
are of one block. Blocks exchange through global memory by fences and atomic counters (a
last-block-done reduction), which these marks do not follow, and a chunk's blocks run
together here, other chunks' before or after; so an access of another block is never
reported (possibly a missed race, never a made-up one), and a barrier clears a global
buffer's marks for every block of the chunk.

Across warps, only a ``__syncthreads()`` orders. Atomics and warp-matrix fragments are not
tracked (never a false report, possibly a missed race). Nor are the accesses the dependence
test proves touch only the thread's own elements (``race_free_accesses``: a per-thread
scratch row, where most of a thread-per-row kernel's shared traffic goes): no race can
involve them, and marking them cost more than the run itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

from kir.errors import Loc, RaceError
from kir.ir.nodes import WARP

if TYPE_CHECKING:
    from kir.interp.state import Memory, State

NOBODY = -1
MAX_PENDING = 1 << 22  # deferred read marks (elements) held at most before marking them
NO_LANE = np.iinfo(np.int32).max  # the low mark of an element nobody touched (high: NOBODY)

RACE_HINT = ("put __syncthreads() between the two accesses, or __syncwarp() when both "
             "threads are in one warp: warps run independently, and within a warp the "
             "compiler may move or cache a memory access that another lane's code depends "
             "on, so the second access can see the wrong value")


@dataclass
class _Marks:
    """The unsynchronized accesses to one shared array of a chunk (flat, as its data): the
    lowest and highest lane that wrote each element and that read it (``write_lo`` and
    ``write_hi`` both ``-2 - w`` once warp ``w``'s ``__syncwarp`` ordered its writes)."""

    write_lo: np.ndarray
    write_hi: np.ndarray
    read_lo: np.ndarray
    read_hi: np.ndarray
    size: int  # elements per block
    scratch: np.ndarray  # one store's values as bits, to find lanes writing one element
    # Where each element was last written and read (RaceTracker.sites; -1: unknown), for
    # the report: the access of the other thread, not only the one that meets it.
    write_site: np.ndarray
    read_site: np.ndarray
    # Reads not marked yet, as (elements, lanes, site): marked in one go when a write or a
    # warp barrier needs them; most reads meet a block barrier first and are never marked.
    pending: list[tuple[np.ndarray, np.ndarray, int]] = field(default_factory=list)
    pending_count: int = 0
    written: bool = False  # any write since the last barrier of every block
    read: bool = False  # any read since then
    # A global buffer's marks: one set for the whole buffer, shared by the blocks of a
    # chunk (reports need the other thread in the reader's block) and kept from chunk to
    # chunk (cleared where touched: see touch), with the lane whose value landed per
    # element beside ``scratch``.
    per_block: bool = True
    touched: list[np.ndarray] = field(default_factory=list)
    touched_count: int = 0  # past the buffer's size, clear it all (a loop with no barrier)
    scratch_lane: np.ndarray | None = None

    def touch(self, elements: np.ndarray) -> None:
        """Note marked elements of a global buffer, to clear them alone at a barrier."""
        if self.per_block or self.touched_count > self.write_lo.size:
            return
        self.touched.append(elements)
        self.touched_count += elements.size

    def clear_touched(self) -> None:
        """Unmark every element of a global buffer marked since the last clear."""
        self.pending.clear()
        self.pending_count = 0
        self.written = self.read = False
        everything = self.touched_count > self.write_lo.size
        if not self.touched and not everything:
            return
        elements = slice(None) if everything else np.concatenate(self.touched)
        self.touched.clear()
        self.touched_count = 0
        for array, empty in self.arrays():
            array[elements] = empty

    def arrays(self) -> tuple[tuple[np.ndarray, int], ...]:
        """Each mark array with its value when nothing is marked."""
        return ((self.write_lo, NO_LANE), (self.write_hi, NOBODY),
                (self.read_lo, NO_LANE), (self.read_hi, NOBODY))

    def defer_read(self, elements: np.ndarray, lanes: np.ndarray, site: int) -> None:
        self.read = True
        self.pending.append((elements, lanes, site))
        self.pending_count += elements.size
        if self.pending_count > MAX_PENDING:
            self.mark_reads()

    def mark_reads(self) -> None:
        if not self.pending:
            return
        for batch, _, site in self.pending:  # in order: the last read's site stays
            self.read_site[batch] = site
        elements = np.concatenate([e for e, _, _ in self.pending])
        lanes = np.concatenate([lane for _, lane, _ in self.pending])
        self.pending.clear()
        self.pending_count = 0
        np.minimum.at(self.read_lo, elements, lanes)
        np.maximum.at(self.read_hi, elements, lanes)
        self.touch(elements)


def _new_marks(mem: "Memory", per_block: bool) -> _Marks:
    n = mem.data.size

    def unmarked(value: int) -> np.ndarray:
        return np.full(n, value, np.int32)
    return _Marks(unmarked(NO_LANE), unmarked(NOBODY), unmarked(NO_LANE), unmarked(NOBODY),
                  mem.size, np.zeros(n, f"u{mem.data.dtype.itemsize}"), unmarked(-1),
                  unmarked(-1), per_block=per_block,
                  scratch_lane=None if per_block else unmarked(NOBODY))


# Elements of global buffers a run marks at most, all buffers together (each costs seven
# numbers): a larger buffer is not looked at (validation runs at small check sizes).
MAX_GLOBAL_ELEMENTS = 1 << 20


def global_marks(kernel, buffers: Mapping[str, "Memory"]) -> dict[str, _Marks]:
    """Race marks for the global buffers ``kernel`` stores to, smallest first while their
    elements together stay within :data:`MAX_GLOBAL_ELEMENTS`; made once a run and handed
    to each chunk's tracker. A buffer the kernel only reads cannot race; atomics and
    warp-matrix stores are not tracked, as in shared memory."""
    from kir.analysis.memory import matrix_buffers
    from kir.ir import Store

    stored = {n.buffer for n in kernel.body.walk() if isinstance(n, Store)}
    stored -= matrix_buffers(kernel.body)
    out: dict[str, _Marks] = {}
    total = 0
    for name in sorted(stored & buffers.keys(), key=lambda name: buffers[name].data.size):
        mem = buffers[name]
        if mem.space != "global" or total + mem.data.size > MAX_GLOBAL_ELEMENTS:
            continue
        total += mem.data.size
        out[name] = _new_marks(mem, per_block=False)
    return out


def _bits(values: np.ndarray) -> np.ndarray:
    """Values as unsigned integers of their width, to compare bits (a NaN equals itself)."""
    values = np.ascontiguousarray(values)
    return values.view(f"u{values.dtype.itemsize}")


class RaceTracker:
    """The race marks of one chunk's shared arrays and the run's tracked global buffers
    (see the module docstring)."""

    def __init__(self, st: "State", global_marks: Mapping[str, _Marks] | None = None) -> None:
        self.st = st
        self.marks: dict[str, _Marks] = {}
        self.lanes = st.lane_ids.astype(np.int32)
        self.warp_of = (st.warp_slot // WARP).astype(np.int32)
        self.warps_per_block = -(-st.threads // WARP)
        for name, marks in (global_marks or {}).items():
            marks.clear_touched()  # another chunk's blocks: never the same block as these
            self.marks[name] = marks
        self.sites: list[Loc | None] = []  # the source locations accesses were made at
        self.site_of: dict[Loc | None, int] = {}

    def _site(self, loc: Loc | None) -> int:
        site = self.site_of.get(loc)
        if site is None:
            site = self.site_of[loc] = len(self.sites)
            self.sites.append(loc)
        return site

    def add(self, mem: "Memory") -> None:
        """Track a shared array just allocated."""
        self.marks[mem.name] = _new_marks(mem, per_block=True)

    def _in_block(self, lanes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per access, whether the marked lanes ``lo``..``hi`` (or the warp ``-2 - hi`` a
        ``__syncwarp`` ordered) are all of the accessing lane's block. Always so for a
        shared array; for a global buffer an access of another block is another matter
        (blocks exchange through global memory with fences and atomics, which these marks
        do not follow), so only a race within one block is reported."""
        threads = self.st.threads
        synced = hi <= -2
        mine = lanes // threads
        first = np.where(synced, (-2 - lo) // self.warps_per_block, np.maximum(lo, 0) // threads)
        last = np.where(synced, (-2 - hi) // self.warps_per_block, np.maximum(hi, 0) // threads)
        return (first == mine) & (last == mine)

    # ------------------------------------------------------------------------ accesses

    def _live(self, addr, mask: np.ndarray, count: int, values=None) -> tuple[np.ndarray, ...]:
        """(elements, lanes[, values]) of every live lane's access, flat: ``addr`` is per
        lane or uniform, ``[iterations, lanes]`` in a whole-loop sum, and a vector access
        covers ``count`` elements from it."""
        st = self.st
        addr = np.asarray(addr)
        full = mask is st.full
        if addr.ndim <= 1 and (values is None or np.ndim(values) <= (1 if count == 1 else 2)):
            # One access a lane (the common case): index the lanes, no broadcasting.
            lanes = self.lanes if full else self.lanes[mask]
            if addr.ndim == 0:
                elements = np.full(lanes.size, int(addr), np.int64)
            else:
                elements = addr if full else addr[mask]
            if values is not None:
                values = np.asarray(values)
                if values.ndim == (1 if count == 1 else 2):
                    values = values if full else values[mask]
                values = np.broadcast_to(values, elements.shape + (() if count == 1 else
                                                                  (count,)))
            if count > 1:
                elements = elements.astype(np.int64)[:, None] + np.arange(count)
                lanes = np.repeat(lanes, count)
                elements = elements.ravel()
                values = None if values is None else values.reshape(-1)
            return (elements, lanes) if values is None else (elements, lanes, values)
        # A whole-loop sum's [iterations, lanes] addresses: broadcast, then flatten.
        lanes, live = self.lanes, mask
        if count > 1:
            addr = addr.astype(np.int64)[..., None] + np.arange(count)
            lanes, live = lanes[:, None], mask[:, None]
        parts = [addr, lanes, live] + ([] if values is None else [np.asarray(values)])
        parts = list(np.broadcast_arrays(*parts))
        del parts[2]
        if full:
            return tuple(p.ravel() for p in parts)
        live = np.broadcast_to(live, parts[0].shape)
        return tuple(p[live] for p in parts)

    def load(self, mem: "Memory", addr, mask: np.ndarray, count: int, loc: Loc | None) -> None:
        """Check a read of ``mem`` against unsynchronized writes by others; mark it read.

        Threads that each wrote the same value to an element (every lane of a warp storing
        its row, say) may read it back: whichever write landed, it holds their value."""
        marks = self.marks.get(mem.name)
        if marks is None:
            return
        elements, lanes = self._live(addr, mask, count)
        if not elements.size:
            return
        if marks.written:
            lo, hi = marks.write_lo[elements], marks.write_hi[elements]
            bad = (hi != NOBODY) & ((lanes < lo) | (hi < lanes))
            if np.count_nonzero(bad):
                bad &= ~((hi <= -2) & (self.warp_of[lanes] == -2 - hi))
                if not marks.per_block:
                    bad &= self._in_block(lanes, lo, hi)
            if np.count_nonzero(bad):
                first = int(np.flatnonzero(bad)[0])
                other = int(lo[first])
                element = int(elements[first])
                self._report("reads", "wrote", mem, element, int(lanes[first]),
                             None if other < 0 else other, loc, marks.write_site[element])
        marks.defer_read(elements, lanes, self._site(loc))

    def store(self, mem: "Memory", addr, mask: np.ndarray, count: int, values,
              loc: Loc | None) -> None:
        """Check a write of ``values`` to ``mem``, before it lands, against unsynchronized
        reads by others and against others' writes of a different value (which would leave
        the element to chance); mark it written."""
        marks = self.marks.get(mem.name)
        if marks is None:
            return
        elements, lanes, values = self._live(addr, mask, count, values)
        if not elements.size:
            return
        marks.mark_reads()
        if marks.read:
            self._check_overwrite(mem, marks, elements, lanes, loc)
        bits = _bits(values.astype(mem.data.dtype, copy=False))
        marks.scratch[elements] = bits  # one lane's value per element wins
        bad = marks.scratch[elements] != bits
        if marks.scratch_lane is not None:  # a global buffer: lanes of one block only
            marks.scratch_lane[elements] = lanes  # the same lane wins as above
            threads = self.st.threads
            bad &= marks.scratch_lane[elements] // threads == lanes // threads
        if marks.written:
            lo, hi = marks.write_lo[elements], marks.write_hi[elements]
            others = (hi != NOBODY) & ((lo != lanes) | (hi != lanes))
            if np.count_nonzero(others):
                # Earlier writers of the writer's own warp, itself among them, are ordered
                # before it as readers are (see _check_overwrite).
                warp = self.warp_of[lanes]
                written = hi >= 0
                others &= ~((hi <= -2) & (warp == -2 - hi))
                others &= ~(written & (lo <= lanes) & (lanes <= hi)
                            & (self.warp_of[np.where(written, lo, 0)] == warp)
                            & (self.warp_of[np.where(written, hi, 0)] == warp))
                if not marks.per_block:
                    others &= self._in_block(lanes, lo, hi)
                bad |= others & (_bits(mem.data[elements]) != bits)
                synced = hi <= -2  # a new writer replaces what a warp barrier ordered
                marks.write_lo[elements[synced]] = NO_LANE
                marks.write_hi[elements[synced]] = NOBODY
            if np.count_nonzero(bad):
                self._different_values(mem, marks, elements, lanes, bits, bad, others, lo, loc)
        elif np.count_nonzero(bad):
            self._different_values(mem, marks, elements, lanes, bits, bad, None, None, loc)
        marks.written = True
        marks.write_site[elements] = self._site(loc)
        np.minimum.at(marks.write_lo, elements, lanes)
        np.maximum.at(marks.write_hi, elements, lanes)
        marks.touch(elements)

    def _different_values(self, mem: "Memory", marks: _Marks, elements: np.ndarray,
                          lanes: np.ndarray, bits: np.ndarray, bad: np.ndarray,
                          others: np.ndarray | None, lo: np.ndarray | None,
                          loc: Loc | None) -> None:
        """Report the first write in ``bad``: of another value than an earlier thread's
        unsynchronized write (``others``), or than another lane of this very store."""
        first = int(np.flatnonzero(bad)[0])
        element = int(elements[first])
        if others is not None and lo is not None and others[first]:
            other = int(lo[first])
            self._report("writes a different value to", "wrote", mem, element,
                         int(lanes[first]), other if other >= 0 else None, loc,
                         marks.write_site[element])
        landed = np.flatnonzero((elements == element) & (bits == marks.scratch[element]))
        self._report("writes a different value to", "wrote", mem, element, int(lanes[first]),
                     int(lanes[landed[0]]), loc, self._site(loc))

    def _check_overwrite(self, mem: "Memory", marks: _Marks, elements: np.ndarray,
                         lanes: np.ndarray, loc: Loc | None) -> None:
        """A write must not land on what another thread read, unsynchronized."""
        lo, hi = marks.read_lo[elements], marks.read_hi[elements]
        read = hi != NOBODY
        bad = read & ((lo != lanes) | (hi != lanes))
        if not np.count_nonzero(bad):
            return
        # Readers of the writer's own warp that include the writer are ordered before it:
        # the warp runs the read together, and the writer's own program order keeps its
        # write after its read (a compiler never moves a store above a load of the same
        # address), as in code widened to redundant lanes.
        warp = self.warp_of[lanes]
        first_reader, last_reader = np.where(read, lo, 0), np.where(read, hi, 0)
        bad &= ~((lo <= lanes) & (lanes <= hi) & (self.warp_of[first_reader] == warp)
                 & (self.warp_of[last_reader] == warp))
        if not marks.per_block and np.count_nonzero(bad):
            bad &= self._in_block(lanes, lo, hi)
        if np.count_nonzero(bad):
            first = int(np.flatnonzero(bad)[0])
            other = int(lo[first]) if int(lo[first]) != lanes[first] else int(hi[first])
            element = int(elements[first])
            alone = lo[first] == hi[first]  # one reader: the last read's site is its
            self._report("overwrites", "read", mem, element, int(lanes[first]), other, loc,
                         marks.read_site[element] if alone else -1)

    # ------------------------------------------------------------------------ barriers

    def block_barrier(self, mask: np.ndarray) -> None:
        """``__syncthreads()`` by the blocks with a lane in ``mask``: their marks clear."""
        st = self.st
        blocks = slice(None) if mask is st.full else \
            mask.reshape(st.n_blocks, st.threads).any(axis=1)
        for marks in self.marks.values():
            if not marks.per_block:
                # A global buffer's marks clear at any block's barrier: the blocks not at
                # it lose theirs too (a race there may be missed, none is made up).
                marks.clear_touched()
                continue
            if mask is st.full:
                marks.pending.clear()
                marks.pending_count = 0
                marks.written = marks.read = False
            else:
                marks.mark_reads()  # the blocks not at this barrier keep theirs
            for array, empty in marks.arrays():
                array.reshape(st.n_blocks, marks.size)[blocks] = empty

    def warp_barrier(self, mask: np.ndarray) -> None:
        """``__syncwarp()`` by the warps with a lane in ``mask``: writes made by their lanes
        alone become visible to their own lanes, and reads made by their lanes alone clear."""
        synced = np.zeros(int(self.warp_of[-1]) + 1 if self.warp_of.size else 0, dtype=bool)
        synced[self.warp_of[mask]] = True
        for marks in self.marks.values():
            marks.mark_reads()
            for lo, hi, ordered in ((marks.write_lo, marks.write_hi, True),
                                    (marks.read_lo, marks.read_hi, False)):
                touched = np.flatnonzero(hi >= 0)
                warp = self.warp_of[lo[touched]]
                own = touched[(warp == self.warp_of[hi[touched]]) & synced[warp]]
                if ordered:
                    lo[own] = hi[own] = -2 - self.warp_of[lo[own]]
                else:
                    lo[own], hi[own] = NO_LANE, NOBODY

    # ------------------------------------------------------------------------ reports

    def _report(self, verb: str, past: str, mem: "Memory", element: int, lane: int,
                other: int | None, loc: Loc | None, site: int = -1) -> None:
        """Raise the RaceError: this thread's access at ``loc``, the other thread's (lane
        ``other``; None: a thread of another warp, or of this statement) at ``site``."""
        st = self.st
        index = element % mem.size
        me = st.where_of(lane)
        if other is None:  # the writer's warp synchronized, the reader is in another warp
            by = "a thread of another warp (whose __syncwarp() orders it for that warp only)"
        else:
            by = "thread " + st.where_of(other).split(" thread ", 1)[1]
        where = self.sites[site] if 0 <= site < len(self.sites) else None
        at = f" at {where}" if where is not None else ""
        raise RaceError(
            f"{mem.space}-memory race on {mem.name!r}[{index}]: {me} {verb} it after {by} "
            f"{past} it{at}, with no barrier between", loc, hint=RACE_HINT)


_RACE_FREE: dict[tuple, tuple[object, frozenset[int]]] = {}
_RACE_FREE_KEPT = 32


def race_free_accesses(kernel, scalars: Mapping[str, object]) -> frozenset[int]:
    """The shared-memory loads and stores of ``kernel`` no race can involve, at these scalar
    arguments (:func:`kir.analysis.deps.thread_private_accesses`: a thread's own scratch
    row), which a run need not mark. ``scalars`` are the parameters the kernel never
    assigns; the integer ones are the analysis's known values. Kept for the last few
    kernels: validation runs one kernel at several cases."""
    from kir.analysis.deps import thread_private_accesses

    assume = {name: int(value) for name, value in scalars.items()
              if np.asarray(value).dtype.kind in "iu"}
    key = (id(kernel), tuple(sorted(assume.items())))
    kept = _RACE_FREE.get(key)
    if kept is not None and kept[0] is kernel:
        return kept[1]
    try:
        result = thread_private_accesses(kernel, assume)
    except Exception:  # noqa: BLE001 - a shortcut only: with no claim every access is marked
        result = frozenset()
    if len(_RACE_FREE) >= _RACE_FREE_KEPT:
        _RACE_FREE.pop(next(iter(_RACE_FREE)))
    _RACE_FREE[key] = (kernel, result)
    return result


class _NoRaces:
    """The tracker of a run that does not look for races: every hook does nothing."""

    def add(self, mem: "Memory") -> None:
        pass

    def load(self, *args: object) -> None:
        pass

    def store(self, *args: object) -> None:
        pass

    def block_barrier(self, mask: np.ndarray) -> None:
        pass

    def warp_barrier(self, mask: np.ndarray) -> None:
        pass


NO_RACES = _NoRaces()
