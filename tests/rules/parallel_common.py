"""Helpers shared by the parallel-mapping rule tests (imported by basename from this folder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from kir.frontends.cuda import load_cuda

from kir.driver.rulecheck import sweep
from kir.interp import run_kernel
from kir.ir import Kernel, Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Small sizes: every example runs in well under a second on the interpreter.
SMALL = {
    "flash_attn.cu": [{"B": 1, "H": 1, "N": 64, "D": 16}, {"B": 1, "H": 1, "N": 40, "D": 16}],
    "softmax.cu": [{"rows": 4}, {"rows": 3, "cols": 333}],
    "layernorm.cu": [{"rows": 9, "cols": 64}, {"rows": 5, "cols": 40}],
    "reduce.cu": [{"n": 3000}, {"n": 1234}],
    "sgemm.cu": [{"M": 32, "N": 32, "K": 32}, {"M": 20, "N": 20, "K": 20}],
    "selective_scan.cu": [{"B": 1, "L": 8, "D": 4, "S": 16}],
}


def kernel(src: str, grid=("1", "1", "1"), block=(32, 1, 1), name: str | None = None) -> Kernel:
    """Lower a CUDA snippet with the given launch."""
    return load_cuda(src, "t.cu", kernel=name, launch=Launch(tuple(grid), tuple(block), 0))


def text(k: Kernel) -> str:
    verify(k)
    return print_kernel(k, locations=False).strip()


def same_outputs(a: Kernel, b: Kernel, args: dict, sizes: dict | None = None,
                 rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Run both kernels on the interpreter and assert every buffer agrees."""
    ra = run_kernel(a, args, sizes)
    rb = run_kernel(b, args, sizes)
    for name in ra:
        np.testing.assert_allclose(rb[name], ra[name], rtol=rtol, atol=atol, err_msg=name)


def sweep_examples(rules) -> dict[str, int]:
    """Sweep ``rules`` over the examples at small sizes; assert nothing changed or failed."""
    files = [EXAMPLES / f for f in SMALL]
    results = sweep(rules, files, SMALL)
    bad = [(str(a.step), a.kernel_file, a.status, a.detail) for a in results
           if a.status in ("changed", "error")]
    assert not bad, bad
    counts: dict[str, int] = {}
    for a in results:
        counts[a.status] = counts.get(a.status, 0) + 1
    print(f"{rules[0].name}: {counts.get('same', 0)} applications checked, {counts}")
    return counts
