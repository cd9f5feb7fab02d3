"""Optional instrumentation of the interpreter: what a kernel run did, counted for a GPU.

Pass a :class:`Counters` to :func:`kir.interp.run_kernel` and every executed operation adds
itself, weighted by the lanes that were live, to the counts a cost model needs: global bytes
and memory *transactions* (distinct 32-byte sectors and 128-byte lines per warp-instruction:
coalescing), threadgroup-memory accesses and bank conflicts, flops, special-function ops,
integer ops, warp operations, atomics and their same-address contention, barriers, loop
iterations, and the idle lanes of partly active warp-instructions (divergence); SIMD-group
matrix operations (8x8 products, and fragment loads and stores as memory traffic), SIMD
reductions apart from shuffles, the hottest atomic address, and a static estimate of the
registers a thread needs (for occupancy).

Without counters nothing here runs: the statement compiler swaps in a
:class:`~kir.interp.count_hooks.CountingHoist` only when asked, which disables chunk-level
hoisting and whole-loop evaluation (both would hide operations the GPU executes) and wraps
each compiled closure with a counting one (:mod:`kir.interp.count_hooks`,
:mod:`kir.interp.matrix_counts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from kir import ir
from kir.interp.state import WARP, Memory, State
from kir.ir.types import VectorType

SECTOR = 32  # bytes: the unit of a coalesced memory transaction
LINE = 128  # bytes: a cache line
BANKS = 32  # threadgroup memory banks of 4 bytes
EXACT_SAMPLES = 64
"""Executions of one access site analysed lane by lane; later ones reuse the site's average
transactions (or bank-conflict degree) per warp: loops repeat one pattern, and the exact
analysis costs a sort per warp-instruction."""


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
    # of global_load_sectors: touched by the same warp's previous execution of the same load
    # instruction (a loop walking a row one element per iteration), which an L1 serves
    global_load_sector_hits: int = 0
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
    fma: int = 0  # lanes x fused multiply-adds (a float a * b + c, or fma()): 2 flops, 1 op
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
    # SIMD-group matrices (warp-instructions), SIMD reductions, contention, registers
    matrix_mma: int = 0  # 8x8x8 multiply-accumulates (a bigger product counts its 8x8x8s)
    matrix_flops: int = 0  # 2 m n k per warp-level product, apart from ``flops``
    matrix_loads: int = 0  # fragment loads (their bytes are in the global/shared counts)
    matrix_stores: int = 0
    warp_reductions: int = 0  # the part of ``warp_ops`` that are simd_sum/max/min
    atomic_hot_address: int = 0  # the most atomic updates any one address received
    registers_per_thread: int = 0  # static estimate, 32-bit registers (see ``start``)
    # what DRAM moves at least: the distinct 32-byte sectors read / written, in bytes
    global_unique_read_sector_bytes: int = 0
    global_unique_write_sector_bytes: int = 0
    # per buffer: name -> [bytes read, bytes written, sector bytes read, sector bytes
    # written] (each column sums to the field above)
    footprint: dict[str, list[int]] = field(default_factory=dict)
    _touched: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict,
                                                               repr=False, compare=False)

    # ------------------------------------------------------------------------- results

    def as_dict(self) -> dict[str, Any]:
        """The counts as a JSON-serializable dict."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        out["grid"] = list(self.grid)
        out["footprint"] = {k: list(v) for k, v in self.footprint.items()}
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
        from kir.interp.count_hooks import estimate_registers

        self.registers_per_thread = estimate_registers(kernel)

    def finish(self) -> None:
        """Turn the footprint bitmaps into unique byte counts and drop them."""
        for name, (itemsize, read, written) in self._touched.items():
            counts = [int(np.count_nonzero(read)) * itemsize,
                      int(np.count_nonzero(written)) * itemsize,
                      _sectors(read, itemsize) * SECTOR, _sectors(written, itemsize) * SECTOR]
            self.global_unique_read_bytes += counts[0]
            self.global_unique_write_bytes += counts[1]
            self.global_unique_read_sector_bytes += counts[2]
            self.global_unique_write_sector_bytes += counts[3]
            old = self.footprint.get(name, [0, 0, 0, 0])
            self.footprint[name] = [a + b for a, b in zip(old, counts)]
        self._touched = {}
        for hits in self._atomic_hits.values():
            self.atomic_hot_address = max(self.atomic_hot_address, int(hits.max()))
        self._atomic_hits = {}
        self._previous = {}
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

    def alu(self, st: State, mask: np.ndarray, kind: str, weight: int, fused: int = 0) -> None:
        """``weight`` arithmetic ops of ``kind`` (flops, fdiv, sfu, sfu_fast, int_ops), of
        which ``fused`` complete a multiply-add the compiler contracts into one FMA."""
        lanes, warps = self.lanes_warps(st, mask)
        self.fma += lanes * fused
        lane_ops = lanes * weight
        setattr(self, kind, getattr(self, kind) + lane_ops)
        self.alu_lane_ops += lane_ops
        self.alu_warp_instr += warps * weight
        self.idle_lanes += (warps * WARP - lanes) * weight

    def warp_op(self, st: State, mask: np.ndarray, reduction: bool = False) -> None:
        """One shuffle, or with ``reduction`` one SIMD reduction, per warp with a live lane."""
        lanes, warps = self.lanes_warps(st, mask)
        self.warp_ops += warps
        if reduction:
            self.warp_reductions += warps
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
            self._atomic(st, mask, mem, idx, uniform, lanes, warps)
        byte = idx * esize
        hits = 0
        if estimated:
            sectors = round(warps * sample[2] / sample[1])
            lines = round(warps * sample[3] / sample[1])
            seen, hit = self._hit_samples.get(site, (1, 0))
            hits = round(warps * hit / seen) if kind == "load" else 0
        elif uniform:  # (reuse of one broadcast sector is not tracked)
            sectors = warps * ((int(byte) + nbytes - 1) // SECTOR - int(byte) // SECTOR + 1)
            lines = warps
        else:
            ends = (byte + nbytes - 1) // SECTOR
            starts = byte // SECTOR
            both = np.stack([starts, ends], axis=1) if count > 1 else starts
            table = self._table(st, both, mask)
            sectors = int(self._distinct(table).sum())
            lines = int(self._distinct(self._table(st, byte // LINE, mask)).sum())
            if kind == "load" and site >= 0:
                hits = self._reused(st, site, table)
                seen, hit = self._hit_samples.get(site, (0, 0))
                self._hit_samples[site] = (seen + warps, hit + hits)
        if not estimated:
            self._sample(site, warps, sectors, lines)
        if kind == "load":
            self.global_load_sectors += sectors
            self.global_load_sector_hits += hits
        else:
            self.global_store_sectors += sectors
        self.global_lines += lines
        self._mark(st, mask, mem, idx, count, uniform, store, kind == "atomic")

    def _reused(self, st: State, site: int, table: np.ndarray) -> int:
        """Distinct (warp, sector) pairs of this execution of load ``site`` (``table``: sector
        ids per warp row, -1 for dead lanes) that its previous execution in the same chunk
        also touched."""
        rows = np.broadcast_to(np.arange(table.shape[0])[:, None], table.shape)
        valid = table >= 0
        keys = np.unique(rows[valid] * (1 << 32) + table[valid])
        previous = self._previous.get(site)
        self._previous[site] = (st, keys)
        if previous is None or previous[0] is not st:
            return 0
        return int(np.isin(keys, previous[1], assume_unique=True).sum())

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

    def _atomic(self, st: State, mask: np.ndarray, mem: Memory, idx: np.ndarray,
                uniform: bool, lanes: int, warps: int) -> None:
        self.atomics += lanes
        self.atomic_requests += warps
        hits = self._atomic_hits.get(mem.name)
        if hits is None or hits.size != mem.data.size:
            hits = self._atomic_hits[mem.name] = np.zeros(mem.data.size, np.int64)
        if uniform:
            self.atomic_serial += lanes  # every live lane updates the same address
            hits[int(np.clip(idx, 0, hits.size - 1))] += lanes
            return
        live = idx if mask is st.full else idx[mask]
        _, counts = np.unique(live, return_counts=True)
        self.atomic_serial += int(counts.max())
        np.add.at(hits, np.clip(live, 0, hits.size - 1), 1)

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
        self._atomic_hits: dict[str, np.ndarray] = {}  # buffer: atomic updates per element
        self._previous: dict[int, tuple[State, np.ndarray]] = {}  # load site: last sectors
        self._hit_samples: dict[int, tuple[int, int]] = {}  # load site: warps, sector hits

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


def _sectors(touched: np.ndarray, itemsize: int) -> int:
    """Distinct 32-byte sectors with a touched element (the buffer starts on a sector)."""
    per = max(1, SECTOR // itemsize)
    pad = (-touched.size) % per
    if pad:
        touched = np.concatenate([touched, np.zeros(pad, bool)])
    return int(np.count_nonzero(touched.reshape(-1, per).any(axis=1)))
