"""The lockstep machine: lanes of a chunk of blocks, their memories, and warp exchange.

A chunk is ``n_blocks`` whole blocks of ``threads`` lanes each, lane ``i`` being thread
``i % threads`` (x fastest) of the chunk's block ``i // threads``. Values are numpy arrays
over all lanes (``[n]``, or ``[n, count]`` for vectors) or numpy scalars when uniform.
Masks are bool arrays over lanes; ``State.full`` is the all-true mask, passed by identity
so hot paths can skip masking when no lane is off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from kir.errors import BarrierError, KirError, Loc, StepLimitError
from kir.limits import limit_hint
from kir.ir.cops import Value
from kir.interp.races import NO_RACES, RaceTracker
from kir.ir.nodes import WARP

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
#: Vectors of 2 and 4 elements (float2, float4, int4, uchar4...) are aligned to their whole
#: size on CUDA and Metal (3-element ones only to their element): the interpreter refuses
#: such an access elsewhere, as the GPU would fault or read the wrong elements.
VECTOR_ALIGNED = (2, 4)


@dataclass
class Memory:
    """One named array: a global buffer, or a shared/local array of all lanes of a chunk.

    ``data`` is flat; ``size`` is the element count one lane may address (the whole buffer,
    one block's shared array, one lane's local array); ``base`` maps lanes to the first
    element of their slice (None for global buffers)."""

    name: str
    data: np.ndarray
    size: int
    space: str
    base: np.ndarray | None = None


@dataclass
class LoopFrame:
    """Lanes that left the innermost loop (``brk``) or its current iteration (``cont``)."""

    brk: np.ndarray
    cont: np.ndarray


CLOCK_EVERY = 1024
"""Loop iterations between two looks at the clock (a look costs a system call)."""


@dataclass
class Steps:
    """Loop iterations executed so far, across chunks, against the ``limit`` and, when a
    ``deadline`` (a ``time.process_time()`` value: CPU time, which a busy machine does not
    eat into) is set, against the clock. A loop calls :meth:`check` when ``count`` passes
    ``next_check``: the hot path is one comparison."""

    limit: int
    count: int = 0
    deadline: float | None = None
    seconds: float | None = None  # the time limit the deadline came from, for messages
    next_check: int = 0

    def __post_init__(self) -> None:
        self.next_check = self.limit if self.deadline is None else min(self.limit, CLOCK_EVERY)

    def check(self, label: str, loc: Loc | None) -> None:
        """Raise StepLimitError when the step limit or the deadline is passed, naming the
        loop ``label`` at ``loc``; else set when to look again."""
        if self.count > self.limit:
            raise StepLimitError(
                f"kernel did not terminate within {self.limit} loop iterations "
                f"(loop {label})", loc,
                hint="kir run --max-steps N raises the limit, if the kernel really loops "
                     "this long")
        if self.deadline is not None and time.process_time() > self.deadline:
            raise StepLimitError(
                f"kernel did not finish within {self.seconds:g} s of CPU time on the interpreter "
                f"({self.count} loop iterations so far; in loop {label})", loc,
                hint=limit_hint("interp_s", self.seconds or 0.0)
                + ", if the kernel is only slow; or use smaller sizes (--size)")
        self.next_check = min(self.limit, self.count + CLOCK_EVERY) \
            if self.deadline is not None else self.limit


@dataclass
class State:
    """Everything one chunk of blocks needs while it runs."""

    n_blocks: int
    threads: int
    block_dims: tuple[int, int, int]
    grid_dims: tuple[int, int, int]
    first_block: int
    steps: Steps
    buffers: dict[str, Memory]
    env: dict[str, Value] = field(default_factory=dict)
    memories: dict[str, Memory] = field(default_factory=dict)
    loops: list[LoopFrame] = field(default_factory=list)
    # Asynchronous copies (ir.Store.asynchronous) not landed yet: those issued since the last
    # commit, and the committed groups, oldest first; each copy lands when called.
    open_copies: list[Callable[[], None]] = field(default_factory=list)
    copy_groups: list[list[Callable[[], None]]] = field(default_factory=list)
    check_races: bool = True  # look for races (kir.interp.races)
    race_globals: Mapping[str, Any] | None = None  # the run's global buffers' race marks

    def __post_init__(self) -> None:
        n = self.n_blocks * self.threads
        self.n = n
        self.lane_ids = np.arange(n, dtype=np.int64)
        self.full = np.ones(n, dtype=bool)
        self.none = np.zeros(n, dtype=bool)
        self.ret = self.none
        self.tid = self.lane_ids % self.threads
        self.block_in_chunk = self.lane_ids // self.threads
        self.lane_in_warp = self.tid % WARP
        self.warp_base = self.lane_ids - self.lane_in_warp
        self.block_end = (self.block_in_chunk + 1) * self.threads
        warps_per_block = -(-self.threads // WARP)
        self.warp_slot = (self.block_in_chunk * warps_per_block + self.tid // WARP) * WARP \
            + self.lane_in_warp
        self.dense_warps = self.threads % WARP == 0
        self.memories.update(self.buffers)
        self.specials = self._specials()
        self.cache: dict[int, Value] = {}  # chunk-invariant values (see exprs.Hoist)
        self.races = RaceTracker(self, self.race_globals) if self.check_races else NO_RACES

    def _specials(self) -> dict[tuple[str, str], Value]:
        bx, by, _ = self.block_dims
        gx, gy, _ = self.grid_dims
        block_ids = self.first_block + np.arange(self.n_blocks, dtype=np.int64)
        out: dict[tuple[str, str], Value] = {}
        thread = {"x": self.tid % bx, "y": (self.tid // bx) % by, "z": self.tid // (bx * by)}
        block = {"x": block_ids % gx, "y": (block_ids // gx) % gy, "z": block_ids // (gx * gy)}
        for axis, i in (("x", 0), ("y", 1), ("z", 2)):
            out[("thread", axis)] = thread[axis].astype(np.uint32)
            out[("block", axis)] = np.repeat(block[axis], self.threads).astype(np.uint32)
            out[("block_dim", axis)] = np.uint32(self.block_dims[i])
            out[("grid_dim", axis)] = np.uint32(self.grid_dims[i])
        out[("lane", "")] = self.lane_in_warp.astype(np.uint32)
        out[("warp", "")] = (self.tid // WARP).astype(np.uint32)
        out[("warp_size", "")] = np.uint32(WARP)
        return out

    # ------------------------------------------------------------------ lanes and masks

    def lanes(self, value: Value) -> np.ndarray:
        """``value`` as a per-lane array (uniform scalars broadcast, read-only)."""
        if np.ndim(value) == 0:
            return np.broadcast_to(value, (self.n,))
        return value  # type: ignore[return-value]

    def where_of(self, block_lane: int) -> str:
        """'block (x, y, z) thread (x, y, z)' of a lane, for error messages."""
        def triple(kind: str) -> str:
            vals = [self.lanes(self.specials[(kind, a)])[block_lane] for a in "xyz"]
            return "(" + ", ".join(str(int(v)) for v in vals) + ")"
        return f"block {triple('block')} thread {triple('thread')}"

    def block_name(self, block_in_chunk: int) -> str:
        lane = block_in_chunk * self.threads
        return "block (" + ", ".join(
            str(int(self.lanes(self.specials[("block", a)])[lane])) for a in "xyz") + ")"

    # ------------------------------------------------------------------------ memory

    def alloc(self, name: str, dtype: np.dtype, size: int, space: str) -> None:
        """Create a shared (per block) or local (per lane) array once per chunk."""
        if name in self.memories:
            return  # a declaration re-executed in a loop keeps its storage, as in CUDA
        owners = self.n_blocks if space == "shared" else self.n
        base = (self.block_in_chunk if space == "shared" else self.lane_ids) * size
        if owners * size < 2**31:
            base = base.astype(np.int32)  # i32 + i32 index arithmetic takes numpy's fast path
        # Poisoned as the emulator poisons them (0xFF bytes: NaN, -1): a kernel reading
        # shared or local memory it never wrote shows it here too, rather than reading 0
        # and passing as its own reference.
        data = np.full(owners * size * dtype.itemsize, 0xFF, np.uint8).view(dtype)
        self.memories[name] = Memory(name, data, size, space, base)
        if space == "shared":
            self.races.add(self.memories[name])

    def memory(self, name: str, loc: Loc | None) -> Memory:
        mem = self.memories.get(name)
        if mem is None:
            raise KirError(f"unknown buffer or array {name!r}", loc)
        return mem

    def address(self, mem: Memory, index: Value, count: int, mask: np.ndarray,
                action: str, loc: Loc | None) -> Value:
        """Flat element addresses of ``mem[index]`` (per lane, or one uniform scalar);
        live lanes out of bounds raise a KirError. Dead lanes' addresses are returned as
        they are: readers clip them, writers drop them."""
        hi = mem.size - count
        if type(index) is not np.ndarray:  # uniform over lanes: plain Python checks
            i = int(index)
            if not 0 <= i <= hi:
                if mask is self.full or np.count_nonzero(mask):
                    self._out_of_bounds(mem, np.broadcast_to(i, (self.n,)), mask, count,
                                        action, loc)
                i = 0
            address = i if mem.base is None else mem.base + i
            # Alignment is the index's: each block's (lane's) array starts aligned on a GPU
            # (buffers by MLX, arrays read as vectors declared so by the emitters).
            if count in VECTOR_ALIGNED and i % count and (
                    mask is self.full or np.count_nonzero(mask)):
                self._misaligned(mem, np.broadcast_to(i, (self.n,)), mask, count, action, loc)
            return address
        # Viewing signed indices as unsigned turns negatives into huge values: one compare.
        unsigned = index.view(_UNSIGNED[index.dtype.itemsize]) \
            if index.dtype.kind == "i" else index
        bad = unsigned > hi if hi >= 0 else np.ones(index.shape, dtype=bool)
        if mask is not self.full:
            bad = bad & mask
        if np.count_nonzero(bad):
            self._out_of_bounds(mem, index, bad, count, action, loc)
        address = index if mem.base is None else mem.base + index
        if count in VECTOR_ALIGNED:
            off = (index % count) != 0
            if mask is not self.full:
                off = off & mask
            if np.count_nonzero(off):
                self._misaligned(mem, index, off, count, action, loc)
        return address

    def _misaligned(self, mem: Memory, index: np.ndarray, bad: np.ndarray, count: int,
                    action: str, loc: Loc | None) -> None:
        shape = np.broadcast_shapes(np.shape(bad), np.shape(index), (self.n,))
        first = int(np.flatnonzero(np.broadcast_to(bad, shape))[0])
        bad_index = int(np.broadcast_to(index, shape).flat[first])
        raise KirError(
            f"misaligned vector {action} {mem.name!r}: {count} elements at index {bad_index}, "
            f"not a multiple of {count}, in {self.where_of(first % self.n)}", loc,
            hint="a GPU loads and stores a vector of 2 or 4 elements only at a multiple of "
                 "its size (float2/float4 alignment); these sizes put it elsewhere")

    def _out_of_bounds(self, mem: Memory, index: np.ndarray, bad: np.ndarray, count: int,
                       action: str, loc: Loc | None) -> None:
        # Whole-loop evaluation (kir.interp.reduce) checks [iterations, lanes] at once.
        shape = np.broadcast_shapes(np.shape(bad), np.shape(index), (self.n,))
        first = int(np.flatnonzero(np.broadcast_to(bad, shape))[0])
        lane = first % self.n
        bad_index = int(np.broadcast_to(index, shape).flat[first])
        what = f"{count} elements at index" if count > 1 else "index"
        raise KirError(
            f"out-of-bounds {action} {mem.name!r}: {what} {bad_index} outside "
            f"[0, {mem.size}) in {self.where_of(lane)}", loc,
            hint="the kernel reads or writes past the end of the array for these sizes")

    # -------------------------------------------------------------------- warp exchange

    def shuffle(self, mode: str, value: Value, lane: Value, width: int,
                mask: np.ndarray) -> np.ndarray:
        """CUDA ``__shfl*_sync`` over each warp of 32 consecutive lanes of a block."""
        value = self.lanes(value) if np.ndim(value) == 0 else value
        me = self.lane_in_warp
        arg = np.asarray(lane).astype(np.int64)
        segment = me - me % width
        if mode == "idx":
            src = segment + np.mod(arg, width)
            own = np.zeros(self.n, dtype=bool)
        elif mode == "xor":
            src = me ^ arg
            own = (src // width) > (me // width)  # later groups are not readable
        elif mode == "down":
            src = me + arg
            own = src >= segment + width
        else:  # up
            src = me - arg
            own = src < segment
        source = self.warp_base + src
        own = own | (src < 0) | (src >= WARP) | (source >= self.block_end)
        source = np.where(own, self.lane_ids, source)
        value = np.asarray(value)
        got = value[source]
        if mask is not self.full:
            idle = ~mask[source] if got.ndim == 1 else ~mask[source][:, None]
            if got.dtype.kind == "f":
                # a lane not running the shuffle holds no value to read (PTX shfl: the value
                # is unpredictable): NaN, so a result that uses it fails its check, and one a
                # lane computes but never uses costs nothing
                got = np.where(idle, np.nan, got)
            elif mode in ("down", "up"):  # (integers: the reader's own value)
                got = np.where(idle, value, got)
        return got

    def warp_reduce(self, op: str, value: Value, mask: np.ndarray) -> np.ndarray:
        """Reduce over the active lanes of each warp; every lane gets its warp's result."""
        value = np.asarray(self.lanes(value))
        dtype = value.dtype
        if op == "sum":
            identity = np.array(0, dtype=dtype)
        elif dtype.kind == "f":
            identity = np.array(-np.inf if op == "max" else np.inf, dtype=dtype)
        else:
            info = np.iinfo(dtype)
            identity = np.array(info.min if op == "max" else info.max, dtype=dtype)
        if mask is not self.full:
            value = np.where(mask, value, identity)
        if self.dense_warps:
            table = value.reshape(-1, WARP)
        else:
            n_slots = int(self.warp_slot[-1]) // WARP + 1 if self.n else 0
            table = np.full(n_slots * WARP, identity, dtype=dtype)
            table[self.warp_slot] = value
            table = table.reshape(-1, WARP)
        if op == "sum":
            reduced = table.sum(axis=1, dtype=dtype)
        elif op == "max":
            reduced = table.max(axis=1)
        elif op == "min":
            reduced = table.min(axis=1)
        else:
            raise KirError(f"unknown warp reduction {op!r}")
        return reduced[self.warp_slot // WARP]

    def check_barrier(self, mask: np.ndarray, loc: Loc | None) -> None:
        """A block barrier must be reached by all of a block's live lanes or by none."""
        if mask is self.full:
            return
        active = mask.reshape(self.n_blocks, self.threads)
        live = ~self.ret.reshape(self.n_blocks, self.threads)
        ok = (active == live).all(axis=1) | ~active.any(axis=1)
        if ok.all():
            return
        block = int(np.flatnonzero(~ok)[0])
        reached = int(active[block].sum())
        raise BarrierError(
            f"divergent barrier: in {self.block_name(block)} only {reached} of "
            f"{int(live[block].sum())} live threads reach it", loc,
            hint="every thread of a block that has not returned must reach each "
                 "__syncthreads(); move the barrier out of the divergent branch or loop")
