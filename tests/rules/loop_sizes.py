"""Small size sets for sweeping the loop rules over the examples (each run well under 0.2 s)."""

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SIZE_SETS = {
    "flash_attn.cu": [{"B": 1, "H": 1, "N": 64, "D": 16, "T": 32},
                      {"B": 1, "H": 1, "N": 40, "D": 16, "T": 32}],
    "layernorm.cu": [{"rows": 4, "cols": 64}, {"rows": 3, "cols": 37}],
    "reduce.cu": [{"n": 5000}, {"n": 4321}],  # 10 and 9 blocks: grid-stride-reduce applies
    "selective_scan.cu": [{"B": 1, "L": 16, "D": 8, "S": 4}, {"B": 1, "L": 13, "D": 8, "S": 4}],
    "sgemm.cu": [{"M": 32, "N": 32, "K": 32, "TILE": 16}, {"M": 20, "N": 20, "K": 20, "TILE": 16}],
    "softmax.cu": [{"rows": 4, "cols": 64}, {"rows": 4, "cols": 33}],
}


def sweep_summary(rules) -> tuple[dict[str, int], list]:
    """Sweep ``rules`` over every example at the small sizes; counts by status and the bad
    applications (changed or error)."""
    from kir.driver.rulecheck import example_files, sweep

    results = sweep(rules, example_files(EXAMPLES), SIZE_SETS)
    counts: dict[str, int] = {}
    for app in results:
        counts[app.status] = counts.get(app.status, 0) + 1
    bad = [(str(a.step), Path(a.kernel_file).name, a.sizes, a.detail) for a in results
           if a.status in ("changed", "error")]
    return counts, bad


def same_outputs(before, after, args: dict, sizes: dict | None = None) -> bool:
    """Run both kernels on the interpreter with copies of ``args``; equal outputs?"""
    import numpy as np

    from kir.interp import run_kernel

    a = run_kernel(before, {k: np.copy(v) for k, v in args.items()}, sizes or {})
    b = run_kernel(after, {k: np.copy(v) for k, v in args.items()}, sizes or {})
    return all(np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6, equal_nan=True) for k in a)
