"""Optional instrumentation of the interpreter: what a kernel run did, counted for a GPU.

Pass a :class:`Counters` to :func:`kir.interp.run_kernel` and every executed operation adds
itself, weighted by the lanes that were live, to the counts a cost model needs: global bytes
and memory *transactions* (distinct 32-byte sectors and 128-byte lines per warp-instruction:
coalescing), threadgroup-memory accesses and bank conflicts, flops, special-function ops,
integer ops, warp operations, atomics and their same-address contention, barriers, loop
iterations, and the idle lanes of partly active warp-instructions (divergence).

Without counters nothing here runs: the statement compiler swaps in a :class:`CountingHoist`
only when asked, which disables chunk-level hoisting and whole-loop evaluation (both would
hide operations the GPU executes) and wraps each compiled closure with a counting one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np

from kir import ir
from kir.errors import KirError
from kir.interp.exprs import ExprFn, Hoist, compile_expr
from kir.interp.state import WARP, Memory, State
from kir.ir.types import VectorType

SECTOR = 32  # bytes: the unit of a coalesced memory transaction
LINE = 128  # bytes: a cache line
BANKS = 32  # threadgroup memory banks of 4 bytes
EXACT_SAMPLES = 64
"""Executions of one access site analysed lane by lane; later ones reuse the site's average
transactions (or bank-conflict degree) per warp: loops repeat one pattern, and the exact
analysis costs a sort per warp-instruction."""

# Special-function ops by intrinsic, in units of one basic SFU op (exp2/log2/rsqrt class).
# Composite functions cost several (pow = log2 + mul + exp2; tanh and erf are exp-based
# polynomials): an estimate, matching how Metal's standard library expands them.
SFU_WEIGHT = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "sin": 1,
              "cos": 1, "pow": 2, "tanh": 2, "erf": 3}
CHEAP_CALLS = {"max": 1, "min": 1, "abs": 1, "floor": 1, "ceil": 1, "fma": 2, "round": 1,
               "rint": 1, "trunc": 1}


@dataclass
class Counters:
    """Counts of one kernel run (all chunks). Lane counts are per executed operation times
    live lanes; ``*_requests`` and ``*_warp_instr`` count warp-instructions."""

    # launch shape
    threads_per_group: int = 0
    groups: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    threadgroup_bytes: int = 0
    local_bytes_per_thread: int = 0
    # global memory
    global_load_bytes: int = 0
    global_store_bytes: int = 0
    global_load_requests: int = 0
    global_store_requests: int = 0
    global_load_sectors: int = 0
    global_store_sectors: int = 0
    global_lines: int = 0
    global_unique_read_bytes: int = 0
    global_unique_write_bytes: int = 0
    # threadgroup (shared) and per-thread local memory
    shared_accesses: int = 0  # warp-instructions
    shared_wavefronts: int = 0  # warp-instructions including bank-conflict replays
    bank_conflicts: int = 0  # extra wavefronts
    shared_bytes: int = 0
    local_accesses: int = 0  # lanes
    # arithmetic (lanes x ops)
    flops: int = 0
    fdiv: int = 0
    sfu: int = 0
    sfu_fast: int = 0
    int_ops: int = 0
    alu_lane_ops: int = 0
    alu_warp_instr: int = 0
    idle_lanes: int = 0  # lanes idle in executed warp-instructions (divergence)
    # warp-level, atomics, synchronization, control
    warp_ops: int = 0  # warp-instructions (shuffles, warp reductions)
    atomics: int = 0  # lanes
    atomic_requests: int = 0
    atomic_serial: int = 0  # sum over atomic instructions of the worst same-address count
    barriers: int = 0  # groups reaching a block barrier, summed over executions
    loop_iterations: int = 0  # lanes x iterations
    loop_warp_iterations: int = 0
    _touched: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict,
                                                               repr=False, compare=False)

    # ------------------------------------------------------------------------- results

    def as_dict(self) -> dict[str, Any]:
        """The counts as a JSON-serializable dict."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        out["grid"] = list(self.grid)
        return out

    @property
    def warps_per_group(self) -> int:
        return -(-self.threads_per_group // WARP)

    @property
    def global_transaction_bytes(self) -> int:
        """Bytes moved at sector granularity (what uncoalesced access wastes)."""
        return SECTOR * (self.global_load_sectors + self.global_store_sectors)

    @property
    def global_unique_bytes(self) -> int:
        return self.global_unique_read_bytes + self.global_unique_write_bytes

    # ---------------------------------------------------------------------- run hooks

    def start(self, kernel: ir.Kernel, grid: tuple[int, ...], block: tuple[int, ...]) -> None:
        """Record the launch shape and static memory sizes (called once per run)."""
        self.grid = tuple(int(g) for g in grid)  # type: ignore[assignment]
        self.groups = math.prod(self.grid)
        self.threads_per_group = math.prod(int(b) for b in block)
        shared = local = 0
        for n in kernel.body.walk():
            if isinstance(n, ir.Alloc):
                width = n.elem.count if isinstance(n.elem, VectorType) else 1
                elem = n.elem.elem if isinstance(n.elem, VectorType) else n.elem
                size = n.size * width * elem.nbytes
                if n.space == "shared":
                    shared += kernel.launch.shared_bytes if n.dynamic else size
                else:
                    local += size
        self.threadgroup_bytes = shared
        self.local_bytes_per_thread = local

    def finish(self) -> None:
        """Turn the footprint bitmaps into unique byte counts and drop them."""
        for itemsize, read, written in self._touched.values():
            self.global_unique_read_bytes += int(np.count_nonzero(read)) * itemsize
            self.global_unique_write_bytes += int(np.count_nonzero(written)) * itemsize
        self._touched = {}
        self._st = self._mask = None

    # ---------------------------------------------------------------- lanes and warps

    def lanes_warps(self, st: State, mask: np.ndarray) -> tuple[int, int]:
        """Live lanes and warps with a live lane, cached for the mask object last seen
        (one statement's nodes mostly share one mask)."""
        if st is self._st and mask is self._mask:
            return self._stats
        if mask is st.full:
            stats = (st.n, st.n_blocks * -(-st.threads // WARP))
        else:
            lanes = int(np.count_nonzero(mask))
            if not lanes:
                stats = (0, 0)
            elif st.dense_warps:
                stats = (lanes, int(np.count_nonzero(mask.reshape(-1, WARP).any(axis=1))))
            else:
                stats = (lanes, int(np.unique(st.warp_slot[mask] // WARP).size))
        self._st, self._mask, self._stats = st, mask, stats
        return stats

    def alu(self, st: State, mask: np.ndarray, kind: str, weight: int) -> None:
        """``weight`` arithmetic ops of ``kind`` (flops, fdiv, sfu, sfu_fast, int_ops)."""
        lanes, warps = self.lanes_warps(st, mask)
        lane_ops = lanes * weight
        setattr(self, kind, getattr(self, kind) + lane_ops)
        self.alu_lane_ops += lane_ops
        self.alu_warp_instr += warps * weight
        self.idle_lanes += (warps * WARP - lanes) * weight

    def warp_op(self, st: State, mask: np.ndarray) -> None:
        lanes, warps = self.lanes_warps(st, mask)
        self.warp_ops += warps
        self.idle_lanes += warps * WARP - lanes

    def iteration(self, st: State, mask: np.ndarray) -> None:
        lanes, warps = self.lanes_warps(st, mask)
        self.loop_iterations += lanes
        self.loop_warp_iterations += warps

    def barrier(self, st: State, mask: np.ndarray) -> None:
        if mask is st.full:
            self.barriers += st.n_blocks
        else:
            self.barriers += int(np.count_nonzero(
                mask.reshape(st.n_blocks, st.threads).any(axis=1)))

    # ---------------------------------------------------------------------- memory

    def _table(self, st: State, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Per-lane ``values`` ([n] or [n, k]) as rows of one warp each; dead lanes -1."""
        values = values.reshape(st.n, -1)
        width = values.shape[1]
        values = np.where(mask[:, None], values, -1)
        if st.dense_warps:
            return values.reshape(-1, WARP * width)
        n_slots = int(st.warp_slot[-1]) // WARP + 1
        table = np.full((n_slots * WARP, width), -1, dtype=np.int64)
        table[st.warp_slot] = values
        return table.reshape(-1, WARP * width)

    @staticmethod
    def _distinct(table: np.ndarray) -> np.ndarray:
        """Distinct non-negative values per row (rows of all -1 give 0)."""
        s = np.sort(table, axis=1)
        changes = np.count_nonzero(s[:, 1:] != s[:, :-1], axis=1)
        return changes + 1 - (s[:, 0] < 0)

    def access(self, st: State, mask: np.ndarray, mem: Memory, index: Any, count: int,
               kind: str, site: int = -1) -> None:
        """One warp-wide memory instruction: ``kind`` is load, store or atomic; ``index``
        the element index per lane (or uniform) as the kernel computed it; ``site`` names
        the instruction in the kernel (see :data:`EXACT_SAMPLES`)."""
        lanes, warps = self.lanes_warps(st, mask)
        if not lanes:
            return
        if mem.space == "local":
            self.local_accesses += lanes
            return
        esize = mem.data.itemsize
        nbytes = esize * count
        uniform = np.ndim(index) == 0
        idx = np.asarray(index, dtype=np.int64)
        sample = self._samples.get(site) if site >= 0 else None
        estimated = sample is not None and sample[0] >= EXACT_SAMPLES
        if mem.space == "shared":
            self.shared_accesses += warps
            self.shared_bytes += lanes * nbytes
            if estimated:
                degree = round(warps * sample[2] / sample[1])
                self.shared_wavefronts += degree
                self.bank_conflicts += round(warps * sample[3] / sample[1])
                return
            before = (self.shared_wavefronts, self.bank_conflicts)
            self._banks(st, mask, idx, esize, count, uniform, warps)
            self._sample(site, warps, self.shared_wavefronts - before[0],
                         self.bank_conflicts - before[1])
            return
        store = kind != "load"
        if kind == "load":
            self.global_load_bytes += lanes * nbytes
            self.global_load_requests += warps
        elif kind == "store":
            self.global_store_bytes += lanes * nbytes
            self.global_store_requests += warps
        else:
            self._atomic(st, mask, idx, uniform, lanes, warps)
        byte = idx * esize
        if estimated:
            sectors = round(warps * sample[2] / sample[1])
            lines = round(warps * sample[3] / sample[1])
        elif uniform:
            sectors = warps * ((int(byte) + nbytes - 1) // SECTOR - int(byte) // SECTOR + 1)
            lines = warps
        else:
            ends = (byte + nbytes - 1) // SECTOR
            starts = byte // SECTOR
            both = np.stack([starts, ends], axis=1) if count > 1 else starts
            sectors = int(self._distinct(self._table(st, both, mask)).sum())
            lines = int(self._distinct(self._table(st, byte // LINE, mask)).sum())
        if not estimated:
            self._sample(site, warps, sectors, lines)
        if kind == "load":
            self.global_load_sectors += sectors
        else:
            self.global_store_sectors += sectors
        self.global_lines += lines
        self._mark(st, mask, mem, idx, count, uniform, store, kind == "atomic")

    def _sample(self, site: int, warps: int, first: int, second: int) -> None:
        if site < 0:
            return
        n, w, a, b = self._samples.get(site, (0, 0, 0, 0))
        self._samples[site] = (n + 1, w + warps, a + first, b + second)

    def _banks(self, st: State, mask: np.ndarray, idx: np.ndarray, esize: int, count: int,
               uniform: bool, warps: int) -> None:
        words_per = max(1, -(-esize * count // 4))
        if uniform:  # one address broadcast to the warp: no conflict
            self.shared_wavefronts += warps * words_per
            return
        first = (idx * esize) // 4
        words = first[:, None] + np.arange(words_per) if words_per > 1 else first
        table = np.sort(self._table(st, words, mask), axis=1)
        repeat = np.zeros(table.shape, dtype=bool)
        repeat[:, 1:] = table[:, 1:] == table[:, :-1]
        valid = (table >= 0) & ~repeat  # distinct words; the same word is a broadcast
        rows = np.broadcast_to(np.arange(table.shape[0])[:, None], table.shape)
        keys = rows[valid] * BANKS + table[valid] % BANKS
        per_bank = np.bincount(keys, minlength=table.shape[0] * BANKS).reshape(-1, BANKS)
        degree = per_bank.max(axis=1)
        self.shared_wavefronts += int(degree.sum())
        self.bank_conflicts += int(np.maximum(degree - words_per, 0)[degree > 0].sum())

    def _atomic(self, st: State, mask: np.ndarray, idx: np.ndarray, uniform: bool,
                lanes: int, warps: int) -> None:
        self.atomics += lanes
        self.atomic_requests += warps
        if uniform:
            self.atomic_serial += lanes  # every live lane updates the same address
            return
        live = idx if mask is st.full else idx[mask]
        _, counts = np.unique(live, return_counts=True)
        self.atomic_serial += int(counts.max())

    def _mark(self, st: State, mask: np.ndarray, mem: Memory, idx: np.ndarray, count: int,
              uniform: bool, store: bool, both: bool) -> None:
        entry = self._touched.get(mem.name)
        if entry is None or entry[1].size != mem.data.size:
            size = mem.data.size
            entry = (mem.data.itemsize, np.zeros(size, bool), np.zeros(size, bool))
            self._touched[mem.name] = entry  # type: ignore[assignment]
        _, read, written = entry  # type: ignore[misc]
        live = idx if uniform or mask is st.full else idx[mask]
        if count > 1:
            live = (np.asarray(live)[..., None] + np.arange(count)).reshape(-1)
        live = np.clip(live, 0, mem.data.size - 1)
        if both or not store:
            read[live] = True
        if both or store:
            written[live] = True

    def __post_init__(self) -> None:
        self._st: State | None = None
        self._mask: np.ndarray | None = None
        self._stats: tuple[int, int] = (0, 0)
        self._samples: dict[int, tuple[int, int, int, int]] = {}  # site: n, warps, a, b
        self._sites = 0

    def new_site(self) -> int:
        """A fresh id for one memory instruction of the kernel."""
        self._sites += 1
        return self._sites

    def __getstate__(self) -> dict[str, Any]:
        # Pickled between processes: counts only, no run state or bitmaps.
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not f.name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


class CountingHoist(Hoist):
    """A :class:`Hoist` that hoists nothing (every operation runs, and counts, where the
    kernel executes it) and carries the :class:`Counters` compiled closures report to."""

    def __init__(self, counters: Counters) -> None:
        super().__init__(set())
        self.counters = counters

    def invariant(self, expr: ir.Expr) -> bool:
        return False


def _arith_kind(expr: ir.Expr) -> tuple[str, int] | None:
    """(counter, weight) of one execution of ``expr``'s own operation, or None if free."""
    t = expr.type
    width = t.count if isinstance(t, VectorType) else 1
    elem = t.elem if isinstance(t, VectorType) else t
    if isinstance(expr, ir.Binary):
        operand = expr.left.type
        operand = operand.elem if isinstance(operand, VectorType) else operand
        if getattr(operand, "is_float", False):
            return ("fdiv" if expr.op == "/" else "flops", width)
        return ("int_ops", width)
    if isinstance(expr, ir.Unary):
        return ("flops" if getattr(elem, "is_float", False) else "int_ops", width)
    if isinstance(expr, ir.Select):
        return ("int_ops", width)
    if isinstance(expr, ir.Cast):
        source = expr.value.type
        source = source.elem if isinstance(source, VectorType) else source
        if getattr(source, "is_float", False) != getattr(elem, "is_float", False) \
                or getattr(source, "bits", 0) != getattr(elem, "bits", 0):
            return ("int_ops", width)
        return None
    if isinstance(expr, ir.Call):
        if expr.fn in SFU_WEIGHT:
            return ("sfu_fast" if expr.fast else "sfu", SFU_WEIGHT[expr.fn] * width)
        is_float = getattr(elem, "is_float", False)
        return ("flops" if is_float else "int_ops", CHEAP_CALLS.get(expr.fn, 1) * width)
    return None


def wrap_expr(counters: Counters, expr: ir.Expr, fn: ExprFn, loc: Any) -> ExprFn:
    """``fn`` (the compiled closure of ``expr``) reporting its operation to ``counters``."""
    if isinstance(expr, ir.Load):
        index = compile_expr(expr.index, loc, None)  # uncounted: the real load counts it
        count = expr.type.count if isinstance(expr.type, VectorType) else 1
        name = expr.buffer
        site = counters.new_site()

        def load(st: State, mask: np.ndarray) -> Any:
            value = fn(st, mask)  # raises first for out-of-bounds lanes
            counters.access(st, mask, st.memories[name], index(st, mask), count, "load",
                            site)
            return value
        return load
    if isinstance(expr, (ir.Shuffle, ir.WarpReduce)):
        def warp(st: State, mask: np.ndarray) -> Any:
            counters.warp_op(st, mask)
            return fn(st, mask)
        return warp
    kind = _arith_kind(expr)
    if kind is None:
        return fn
    counter, weight = kind

    def arith(st: State, mask: np.ndarray) -> Any:
        counters.alu(st, mask, counter, weight)
        return fn(st, mask)
    return arith


def wrap_memory_stmt(counters: Counters, stmt: ir.Store | ir.Atomic,
                     fn: Callable[[State, np.ndarray], None]
                     ) -> Callable[[State, np.ndarray], None]:
    """A store or atomic statement's closure reporting its memory access."""
    index = compile_expr(stmt.index, stmt.loc, None)
    value_type = stmt.value.type
    count = value_type.count if isinstance(value_type, VectorType) else 1
    kind = "store" if isinstance(stmt, ir.Store) else "atomic"
    name = stmt.buffer
    site = counters.new_site()

    def run(st: State, mask: np.ndarray) -> None:
        try:  # before the statement: it may change what the index reads
            where = index(st, mask)
        except KirError:
            where = None
        fn(st, mask)
        if where is not None:
            counters.access(st, mask, st.memories[name], where, count, kind, site)
    return run
