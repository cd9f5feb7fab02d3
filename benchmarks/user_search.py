"""Issue 14's aims, measured the way a user gets them: `kir compile X.cu --search --target
cuda --size ... --time T` in a subprocess (exactly the CLI, nothing set that a user would not
set), then MLX's built-in for the same job timed in this process at the same sizes (median
of 20 runs after 5 warm-ups, ``mx.eval`` per call — the way kir's GPU evaluator times).

Each case writes ``<out>/<case>.json``; ``--merge`` prints the markdown table of all of them.

    python3 benchmarks/user_search.py --out $OUT [--only attention,softmax] [--time-scale 1]
    python3 benchmarks/user_search.py --merge $OUT/*.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

TF32_ATTENTION_SPEC = "benchmarks/specs/flash_attn_tf32.kir.toml"
# name: (kernel file, spec or None, sizes, --time seconds, built-in job, aim)
CASES = {
    "attention-1024": ("examples/flash_attn.cu", None,
                       {"B": 1, "H": 16, "N": 1024, "D": 64}, 120, "flash_attn", 0.5),
    "attention-4096": ("examples/flash_attn.cu", None,
                       {"B": 1, "H": 16, "N": 4096, "D": 64}, 120, "flash_attn", 0.5),
    # The example with the tolerance of MLX's own f32 attention on CUDA (TF32-grade), so the
    # search may use TF32 tensor cores as the built-in does.
    "attention-1024-tf32": ("examples/flash_attn.cu", TF32_ATTENTION_SPEC,
                            {"B": 1, "H": 16, "N": 1024, "D": 64}, 120, "flash_attn", 0.5),
    "attention-4096-tf32": ("examples/flash_attn.cu", TF32_ATTENTION_SPEC,
                            {"B": 1, "H": 16, "N": 4096, "D": 64}, 120, "flash_attn", 0.5),
    # A FlashAttention-1 kernel written unlike the example (tests/rules/data: a K/V tile
    # loop per thread row, no cooperative staging loop, the grid over query tiles).
    "attention-rows-1024": ("tests/rules/data/flash_attn_rows.cu", None,
                            {"B": 1, "H": 16, "N": 1024, "D": 64}, 120, "flash_attn", 0.5),
    # Attention written as one thread a query row walking the keys twice from global memory
    # (tests/rules/data: exp2, a #define'd head size, pointers offset per head).
    "attention-two-pass-1024": ("tests/rules/data/attention_two_pass.cu", None,
                                {"BH": 16, "N": 1024}, 120, "attention_heads", 0.5),
    # Single-token decode attention, 32 heads over 4096 keys: a grid of 32 blocks leaves most
    # of the GPU idle unless the keys are split (split-keys). A warp a head (tests/rules/data)
    # and 16 threads a head with float4 helpers (tests/corpus).
    "decode-warp-32x4096": ("tests/rules/data/decode_warp_head.cu", None,
                            {"H": 32, "S": 4096}, 60, "decode", 0.5),
    "corpus-decode-32x4096": ("tests/corpus/attention_decode.cu",
                              "tests/corpus/attention_decode.online.kir.toml",
                              {"H": 32, "S": 4096}, 60, "attention_decode", 0.5),
    "matmul-2048": ("examples/sgemm.cu", None, {"M": 2048, "N": 2048, "K": 2048}, 90,
                    "sgemm", 0.5),
    "reduce-16M": ("examples/reduce.cu", None, {"n": 1 << 24}, 60, "reduce", 0.5),
    "softmax-8192": ("examples/softmax.cu", None, {"rows": 8192, "cols": 8192}, 60,
                     "softmax", 1.0),
    "layernorm-8192": ("examples/layernorm.cu", None, {"rows": 8192, "cols": 8192}, 60,
                       "layernorm", 1.5),
    "thread-rows-softmax": ("tests/rules/data/softmax_thread_rows.cu", None,
                            {"rows": 8192, "cols": 8192}, 60, "softmax", 1.0),
    # Kernels written in other styles than the examples (tests/corpus: vLLM-style RMS norm,
    # llm.c's warp-per-row softmax with cooperative groups, a GEMM tutorial's naive kernel).
    "corpus-rms-norm": ("tests/corpus/infer_norm.cu", "tests/corpus/infer_norm.rms_norm.kir.toml",
                        {"T": 8192, "H": 4096}, 60, "rms_norm", 1.0),
    "corpus-softmax": ("tests/corpus/llm_train.cu",
                       "tests/corpus/llm_train.softmax_forward.kir.toml",
                       {"N": 8192, "C": 8192}, 60, "softmax_forward", 1.0),
    # llm.c's warp-per-row layer norm (cooperative groups; it also writes each row's mean
    # and rstd) and an in-place RMS norm a warp a row over a grid-stride loop of rows
    # (tests/rules/data): the block-rows hints on kernels written unlike the example.
    "corpus-layernorm": ("tests/corpus/llm_train.cu",
                         "tests/corpus/llm_train.layernorm_forward.kir.toml",
                         {"N": 8192, "C": 8192}, 60, "layernorm_forward", 1.0),
    "warp-rows-rms-norm": ("tests/rules/data/rmsnorm_warp_rows.cu", None,
                           {"tokens": 8192, "hidden": 8192}, 60, "rms_norm_inplace", 1.0),
    # Reductions written in other styles (tests/rules/data): a CUDA-by-example dot product
    # (grid-stride while loop, while-loop tree) and a row sum of squares with shuffle macros
    # and a 2-D grid.
    "dot-16M": ("tests/rules/data/dot_while_tree.cu", None, {"N": 1 << 24}, 60, "dot", 0.5),
    "row-sumsq-8x2M": ("tests/rules/data/sum_shfl_warps.cu", None,
                       {"rows": 8, "cols": 1 << 21}, 60, "row_sumsq", 0.5),
    # A shared-memory GEMM written unlike examples/sgemm.cu (tests/rules/data): a #define'd
    # tile, if/else tile loads, the k loop stepping by the tile, an alpha/beta epilogue.
    "gemm-ab-2048": ("tests/rules/data/gemm_ab_ifelse.cu", None,
                     {"M": 2048, "N": 2048, "K": 2048}, 90, "sgemm_alpha_beta", 0.5),
    # The GEMM tutorial's shared-memory kernel: no bounds checks, a 1-D block indexed as
    # tid / 16 and tid % 16, offsets advanced in the k loop (warp-tile-matmul reads it).
    "corpus-sgemm-shared": ("tests/corpus/gemm_tutorial.cu",
                            "tests/corpus/gemm_tutorial.shared_mem_block.kir.toml",
                            {"M": 2048, "N": 2048, "K": 2048}, 90, "sgemm_alpha_beta", 0.5),
    "corpus-sgemm": ("tests/corpus/gemm_tutorial.cu", "tests/corpus/gemm_tutorial.naive.kir.toml",
                     {"M": 2048, "N": 2048, "K": 2048}, 90, "sgemm_alpha_beta", 0.5),
    # The tutorial's 1-D and 2-D blocktiling kernels: results in a register array, the dot
    # loop outside the result loop, no `acc += a * b` loop (recognised by what they compute).
    "corpus-sgemm-1d": ("tests/corpus/gemm_tutorial.cu",
                        "tests/corpus/gemm_tutorial.blocktiling_1d.kir.toml",
                        {"M": 2048, "N": 2048, "K": 2048}, 90, "sgemm_alpha_beta", 0.5),
    "corpus-sgemm-2d": ("tests/corpus/gemm_tutorial.cu",
                        "tests/corpus/gemm_tutorial.blocktiling_2d.kir.toml",
                        {"M": 2048, "N": 2048, "K": 2048}, 90, "sgemm_alpha_beta", 0.5),
    # GEMMs in other layouts (tests/rules/data): a linear layer with one output per thread
    # (out = inp · weightᵀ + bias), the same with weight tiles staged by rows, a batched
    # product along blockIdx.z, and a column-major (BLAS-layout) SGEMM.
    "linear-naive-2048": ("tests/rules/data/linear_naive.cu", None,
                          {"BT": 2048, "C": 2048, "OC": 2048}, 90, "linear", 0.5),
    "linear-tiled-2048": ("tests/rules/data/linear_nt.cu", None,
                          {"BT": 2048, "C": 2048, "OC": 2048}, 90, "linear", 0.5),
    "bmm-8x1024": ("tests/rules/data/bmm_naive.cu", None,
                   {"Z": 8, "M": 1024, "N": 1024, "K": 1024}, 90, "bmm", 0.5),
    "colmajor-2048": ("tests/rules/data/sgemm_colmajor.cu", None,
                      {"M": 2048, "N": 2048, "K": 2048}, 90, "colmajor", 0.5),
    # The CUDA programming guide's style (tests/frontend/data): matrices passed as structs
    # with an elements pointer, sub-matrices made by a helper returning a struct.
    "struct-matmul-2048": ("tests/frontend/data/matrix_struct.cu", None,
                           {"M": 2048, "N": 2048, "K": 2048}, 90, "struct_matmul", 0.5),
    # C++ the frontend took this round (tests/frontend/data): a softmax written with member
    # functions and a packed type read over the buffers; a warp softmax whose reductions are
    # template template parameters.
    "methods-softmax-8192": ("tests/frontend/data/method_rows.cu", None,
                             {"R": 8192, "C": 8192}, 60, "softmax", 1.0),
    "tt-softmax-8192": ("tests/frontend/data/warp_softmax_tt.cu", None,
                        {"R": 8192, "C": 8192}, 60, "softmax_src", 1.0),
    # LLM training code's bf16 layer norm: 16-byte packs moved as an int4's bits with memcpy,
    # a warp a row through cooperative groups (tests/rules/data), against the bf16 built-in.
    "packed-bf16-layernorm": ("tests/rules/data/layernorm_packed_bf16.cu", None,
                              {"N": 8192, "C": 8192}, 60, "layernorm_forward_bf16", 1.0),
}
_BEST = re.compile(r"best: ([0-9.e+-]+) ms.*?(?:x([0-9.e+-]+) over the unrewritten kernel "
                   r"\(([0-9.e+-]+) ms\))?, (\d+) steps, (\d+) evaluations \((\d+) from the "
                   r"tuning database\) in ([0-9.]+) s")


def run_case(name: str, out: Path, time_scale: float, extra: list[str] = (),
             checkpoints: bool = False) -> dict:
    file, spec, sizes, seconds, job, aim = CASES[name]
    work = Path(tempfile.mkdtemp(prefix=f"kir-{name}-"))
    command = ["kir", "compile", str(ROOT / file), "--search", "--target", "cuda",
               *[a for k, v in sizes.items() for a in ("--size", f"{k}={v}")],
               "--time", f"{max(5, int(seconds * time_scale))}s", "-q",
               "--db", str(work / "tuning.db"), "--out-dir", str(work / "out")]
    if spec:
        command += ["--spec", str(ROOT / spec)]
    command += list(extra)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - started
    found = _BEST.search(done.stdout)
    trace, trace_path = {}, None
    for trace_path in (work / "out").rglob("best.trace.json"):
        trace = json.loads(trace_path.read_text())
    shown = [a for a in command if not a.startswith(str(work))]
    row = {"case": name, "command": " ".join(a for a in shown if a not in ("--db", "--out-dir")),
           "rc": done.returncode,
           "wall_s": round(wall, 1), "stderr_tail": done.stderr[-1500:],
           "steps": trace.get("steps", []), "aim": aim}
    if found:
        row.update(best_ms=float(found.group(1)),
                   baseline_ms=float(found.group(3)) if found.group(3) else None,
                   evaluations=int(found.group(5)), search_s=float(found.group(7)))
    # The search's own account of where its time went (stderr, after the search).
    phases = [line for line in done.stderr.splitlines() if line.startswith("time: ")]
    if phases:
        row["time_line"] = phases[-1]
    verdicts = [line for line in done.stderr.splitlines() if line.startswith("verdicts: ")]
    if verdicts:
        row["verdicts"] = verdicts[-1]
    row.update(builtin(job, ROOT / file, ROOT / spec if spec else None, sizes))
    if row.get("best_ms") and row.get("builtin_ms"):
        row["ratio"] = row["builtin_ms"] / row["best_ms"]
    if checkpoints and (work / "tuning.db").is_file():
        row.update(alone_checkpoints(file, spec, sizes, work / "tuning.db", trace_path, job))
    label = name + "".join(extra).replace("--", "_")
    row["case"] = label
    (out / f"{label}.json").write_text(json.dumps(row, indent=1))
    if (work / "tuning.db").is_file():  # each candidate's phases and time of verdict
        shutil.copy(work / "tuning.db", out / f"{label}.db")
    print(json.dumps({k: v for k, v in row.items() if k != "stderr_tail"}), flush=True)
    return row


def builtin(job: str, file: Path, spec: Path | None, sizes: dict) -> dict:
    """The MLX built-in's median time at ``sizes`` on the spec's random inputs."""
    import mlx.core as mx
    from mlx_builtins import builtin as make

    from kir.spec import find_spec, load_spec

    bound = load_spec(spec or find_spec(file)).bind(sizes)
    made = make(job, bound.make_inputs(0))
    if made is None:
        return {}
    label, thunk = made
    for _ in range(5):
        mx.eval(thunk())
    times = []
    for _ in range(20):
        started = time.perf_counter()
        mx.eval(thunk())
        times.append((time.perf_counter() - started) * 1e3)
    return {"builtin": label, "builtin_ms": float(np.median(times))}


def alone_checkpoints(file: str, spec: str | None, sizes: dict, db: Path,
                      result: Path | None, job: str) -> dict:
    """The search's best-so-far after 5, 10, 25... evaluations timed again alone beside its
    result and the built-in, in turns (benchmarks/search_checkpoints.py): when it was first
    within 5% of what it returned, by timings the host's load did not move, and the ratio to
    the built-in by times taken seconds apart."""
    import search_checkpoints

    summary_path = db.with_suffix(".checkpoints.json")
    argv = [str(ROOT / file), *[a for k, v in sizes.items() for a in ("--size", f"{k}={v}")],
            "--db", str(db), "--out", str(summary_path), "--builtin", job, "--rounds", "5"]
    argv += ["--spec", str(ROOT / spec)] if spec else []
    argv += ["--result", str(result)] if result else []
    search_checkpoints.main(argv)
    found = json.loads(summary_path.read_text())
    return {"alone_final_ms": found["final_ms"], "within_5pct_alone_at": found["within_5pct_at"],
            "in_turns_builtin_ms": found.get("builtin_ms"), "in_turns_ratio": found.get("ratio"),
            "checkpoints": [{k: r.get(k) for k in ("at", "found_at", "search_ms",
                                                   "alone_median_ms", "error")}
                            for r in found["rows"]]}


def merge(paths: list[str]) -> None:
    rows = [json.loads(Path(p).read_text()) for p in paths]
    print("| case | kir best | MLX built-in | ratio (built-in / kir) | aim | over the input | "
          "evaluations, search s | winning steps |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = f"{r['ratio']:.3g}x" if r.get("ratio") else "—"
        over = f"{r['baseline_ms'] / r['best_ms']:.3g}x" if r.get("baseline_ms") else "—"
        print(f"| {r['case']} | {r.get('best_ms', '—')} ms | {r.get('builtin', '—')} "
              f"{r.get('builtin_ms', 0):.4g} ms | {ratio} | {r['aim']}x | {over} | "
              f"{r.get('evaluations', '—')}, {r.get('search_s', '—')} | "
              f"{', '.join(r.get('steps', [])) or '(none)'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", help="comma-separated case names (default: all)")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--merge", nargs="*")
    parser.add_argument("--extra", default="",
                        help="more `kir compile` options, e.g. '--strategy steady'; the "
                             "results are named CASE+OPTIONS")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also time the search's best-so-far after 5, 10, 25... "
                             "evaluations alone (benchmarks/search_checkpoints.py)")
    args = parser.parse_args(argv)
    if args.merge:
        merge(args.merge)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(CASES)
    extra = args.extra.split()
    for name in names:
        run_case(name, out, args.time_scale, extra, args.checkpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main())
