"""``kir check`` finds each planted custom-kernel bug at its line and passes the correct
wrappers (tests/emulate/planted.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kir.commands.main import main
from kir.emulate import emulator_available
from kir.emulate.patch import emulate_metal_kernels
from kir.emulate.check import parse_shapes, with_ragged_variants

AVAILABLE, REASON = emulator_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")

# planted.py builds its kernels at import: on MLX's CUDA build mx.fast.metal_kernel raises
# ("No Metal back-end"), so it is imported as `kir check` imports it, on the emulator.
with emulate_metal_kernels():
    import planted
PLANTED = Path(planted.__file__)


def check(function: str, reference: str, *shapes: str, capsys) -> tuple[int, str]:
    code = main(["check", f"{PLANTED}:{function}", "--reference", reference,
                 "--shapes", *shapes])
    return code, capsys.readouterr().out


def bug_line(source: str) -> int:
    """The line of the kernel body marked BUG (line 1 is the text's first line, as MLX's)."""
    return next(n for n, line in enumerate(source.splitlines(), 1) if "BUG" in line)


def python_line(text: str) -> int:
    lines = PLANTED.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_correct_wrappers_pass(capsys) -> None:
    code, out = check("double", "double_ref", "1000", capsys=capsys)
    assert code == 0 and "PASS: 2 cases" in out, out
    code, out = check("row_sum", "row_sum_ref", "4x1000", "3x100", capsys=capsys)
    assert code == 0 and "PASS: 4 cases" in out, out


def test_grid_given_in_threadgroups(capsys) -> None:
    code, out = check("double_grid_in_groups", "double_ref", "1000", capsys=capsys)
    assert code == 1
    store = next(n for n, line in enumerate(planted.DOUBLE.splitlines(), 1) if "out[i]" in line)
    assert f"double.metal:{store}:5: error: kernel `double` left 996 of 1000 elements of " \
           "`out` unwritten" in out, out
    launched = re.search(r"launched at \S*planted\.py:(\d+)\)", out)
    assert launched and int(launched.group(1)) == python_line("grid=(groups, 1, 1)"), out
    assert "MLX's grid counts threads" in out


def test_missing_bounds_check_at_a_ragged_edge(capsys) -> None:
    code, out = check("double_no_bounds", "double_ref", "1000", capsys=capsys)
    assert code == 1
    line = bug_line(planted.DOUBLE_NO_BOUNDS)
    assert re.search(rf"double_unchecked\.metal:{line}:\d+: error: out-of-bounds read: thread "
                     r"\(232,0,0\) of threadgroup \(3,0,0\) accesses `x` element 1000, past the "
                     r"end of the buffer \(1000 elements\)", out), out


def test_output_read_before_written(capsys) -> None:
    code, out = check("row_sum_accumulates", "row_sum_ref", "4x100", capsys=capsys)
    assert code == 1
    line = bug_line(planted.ROW_SUM_ACCUMULATES)
    assert f"row_sum_accumulates.metal:{line}:5: error: thread (0,0,0) of threadgroup (0,0,0) " \
           "reads `out` element 0 before any thread wrote it" in out, out
    assert "differs from the reference" not in out  # the NaNs it leaves are explained


def test_threadgroup_memory_over_the_chip_limit(capsys) -> None:
    code, out = check("row_sum_big_tile", "row_sum_ref", "2x100", capsys=capsys)
    assert code == 1
    line = bug_line(planted.ROW_SUM_BIG_TILE)
    assert f"row_sum_big_tile.metal:{line}:5: error: kernel `row_sum_big_tile` declares 65536 " \
           "bytes of threadgroup memory, more than every M1-M4 chip" in out, out


def test_threadgroup_over_the_thread_limit_names_the_call(capsys) -> None:
    code, out = check("double_big_group", "double_ref", "1000", capsys=capsys)
    assert code == 1
    assert re.search(r"planted\.py:\d+:\d+: error: threadgroup \(2048, 1, 1\) has 2048 threads, "
                     r"more than every M1-M4 chip", out), out


def test_barrier_in_divergent_code(capsys) -> None:
    code, out = check("row_sum_divergent", "row_sum_ref", "2x100", capsys=capsys)
    assert code == 1
    line = bug_line(planted.ROW_SUM_DIVERGENT)
    assert re.search(rf"row_sum_divergent\.metal:{line}:\d+: error: .*divergent barrier", out), out


def test_threadgroup_race_and_partial_group_reads_are_located() -> None:
    from kir.emulate import metal_kernel

    kernel = metal_kernel("ck_tile", ["x"], ["out"], """
        threadgroup float tile[64];
        uint t = thread_position_in_threadgroup.x;
        tile[t] = x[thread_position_in_grid.x];
        float next = tile[(t + 1) % 64];  // no barrier between the write and this read
        out[thread_position_in_grid.x] = next;
    """, numpy=True, check=True)
    import numpy as np

    kernel(inputs=[np.ones(100, np.float32)], grid=(100, 1, 1), threadgroup=(64, 1, 1),
           output_shapes=[(100,)], output_dtypes=[np.float32])
    kinds = {(f.kind, f.loc.line) for f in kernel.findings}
    assert ("race-threadgroup", 4) in kinds  # thread t writes what thread t-1 read
    assert ("uninit-threadgroup", 5) in kinds  # the partial second group, and the early read


def test_shapes_option_and_ragged_variants() -> None:
    cases = with_ragged_variants(parse_shapes(["8x4096", "64x100,100", "1"]))
    assert [str(c) for c in cases] == ["8x4096", "8x4095 (ragged variant)", "64x100, 100",
                                       "64x99, 99 (ragged variant)", "1"]
    with pytest.raises(Exception, match="is not a shape"):
        parse_shapes(["8 by 4"])


def test_bad_input_is_exit_2(capsys) -> None:
    assert main(["check", f"{PLANTED}:no_such", "--reference", "double_ref"]) == 2
    assert "has no function 'no_such'" in capsys.readouterr().err
    assert main(["check", "missing.py:f", "--reference", "g"]) == 2


def test_the_documented_worked_example(capsys) -> None:
    """docs/MLX_KERNELS.md shows this very run: its finding, and a pass once fixed."""
    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "mlx_check"
    doc = (root / "docs" / "MLX_KERNELS.md").read_text()
    code = main(["check", f"{example / 'scale4.py'}:scale4", "--reference", "scale4_ref",
                 "--shapes", "4096", "1000"])
    out = capsys.readouterr().out
    assert code == 1
    block = out[out.index("scale4.metal:"):out.index("FAIL:")].strip()
    assert block in doc, block
    assert out[out.index("FAIL:"):].strip() in doc
    code = main(["check", f"{example / 'scale4_fixed.py'}:scale4", "--reference",
                 "scale4_ref", "--shapes", "4096", "1000"])
    assert code == 0 and "PASS: 4 cases, 4 launches, no findings" in capsys.readouterr().out


def test_atomics_are_not_races_and_atomic_outputs_count_as_written() -> None:
    import numpy as np

    from kir.emulate import metal_kernel

    kernel = metal_kernel("ck_atomic", ["x"], ["total", "per_group"], """
        threadgroup atomic_int count;
        uint t = thread_position_in_threadgroup.x;
        if (t == 0) atomic_store_explicit(&count, 0, memory_order_relaxed);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&total[0], int(x[thread_position_in_grid.x]),
                                  memory_order_relaxed);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (t == 0) {
            atomic_store_explicit(&per_group[threadgroup_position_in_grid.x],
                                  atomic_load_explicit(&count, memory_order_relaxed),
                                  memory_order_relaxed);
        }
    """, atomic_outputs=True, numpy=True, check=True)
    x = np.arange(100, dtype=np.float32)
    total, per_group = kernel(inputs=[x], grid=(100, 1, 1), threadgroup=(64, 1, 1),
                              output_shapes=[(1,), (2,)], output_dtypes=[np.int32, np.int32],
                              init_value=0)
    assert total[0] == 4950 and per_group.tolist() == [64, 36]
    assert kernel.findings == []
    # the same kernel without init_value: its atomic adds read `total` before any write
    kernel(inputs=[x], grid=(100, 1, 1), threadgroup=(64, 1, 1), output_shapes=[(1,), (2,)],
           output_dtypes=[np.int32, np.int32])
    assert [(f.kind, f.loc.line) for f in kernel.findings] == [("uninit-output", 7)]
