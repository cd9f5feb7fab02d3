"""The IR cleanups the CUDA frontend runs on kernels whose structs it took apart
(kir.analysis.copies, kir.analysis.dead): copies of unchanging values propagated, values recomputed in a
loop or used at once forwarded, unread locals dropped; each keeps what the kernel computes."""

from __future__ import annotations

import numpy as np
from kir.frontends.cuda import load_cuda

from kir.interp.run import run_kernel
from kir.ir import Atomic, Declare, Var
from kir.analysis.copies import forward_single_writes, propagate_copies
from kir.analysis.dead import drop_dead_locals


def _locals(kernel) -> set[str]:
    return {n.name for n in kernel.walk() if isinstance(n, Declare)}


def _reads(kernel) -> set[str]:
    return {n.name for n in kernel.walk() if isinstance(n, Var)}


def _same_results(a, b, args: dict) -> None:
    def fresh():
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    want, got = run_kernel(a, fresh(), {}), run_kernel(b, fresh(), {})
    for name, value in want.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], value)


def test_copies_of_unchanging_values_are_read_at_their_source():
    kernel = load_cuda("""
    __global__ void k(float* y, int n) {
        int a = n;          // a copy of a parameter nothing writes
        int b; b = a;       // a copy of that copy, written once
        int acc = 0;
        int c = acc;        // a copy of a local written again below: kept
        for (int i = 0; i < 3; ++i) acc += i;
        y[0] = (float)(b + c + acc);
    }""", "c.cu")
    done = drop_dead_locals(propagate_copies(kernel))
    assert {"a", "b"}.isdisjoint(_locals(done)) and "n" in _reads(done)
    assert {"c", "acc"} <= _locals(done)
    _same_results(kernel, done, {"y": np.zeros(1, np.float32), "n": 5})


def test_values_recomputed_in_a_loop_or_used_at_once_are_forwarded():
    kernel = load_cuda("""
    __global__ void k(float* y, const float* x, float* s, int ld) {
        int row = 2 * ld;                    // computed once, outside loops: kept
        float acc = 0.0f;
        for (int m = 0; m < 3; ++m) {
            int off = row + 4 * m;           // recomputed each iteration: forwarded
            float v = x[off];                // a load used by the next store: forwarded
            s[m] = v;
            float w = x[off + 1];            // a store comes between: kept
            s[m + 4] = 0.0f;
            acc += w;
        }
        float r = acc;                       // the accumulator, used at once: forwarded
        y[0] = r;
    }""", "f.cu")
    done = drop_dead_locals(forward_single_writes(propagate_copies(kernel)))
    assert {"off", "v", "r"}.isdisjoint(_locals(done)), _locals(done)
    assert {"row", "w", "acc"} <= _locals(done)
    _same_results(kernel, done, {"y": np.zeros(1, np.float32),
                                 "x": np.arange(16, dtype=np.float32),
                                 "s": np.zeros(8, np.float32), "ld": 3})


def test_unread_locals_go_but_atomics_stay():
    kernel = load_cuda("""
    __global__ void k(int* c, float* y) {
        float unused = y[0] * 2.0f;
        int old = atomicAdd(&c[0], 1);
        y[1] = 1.0f;
    }""", "d.cu")
    done = drop_dead_locals(kernel)
    assert "unused" not in _locals(done)
    assert any(isinstance(n, Atomic) for n in done.walk())
    _same_results(kernel, done, {"c": np.zeros(1, np.int32), "y": np.ones(2, np.float32)})
