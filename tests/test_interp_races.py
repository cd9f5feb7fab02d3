"""The interpreter reports shared-memory races (kir.interp.races) instead of passing them.

Its lanes run in lockstep, so a kernel whose threads exchange shared values with no barrier
between got its author's answer here and a wrong one on the device, with exit 0. Each racy
kernel below is one a CUDA author writes by mistake (or by pre-Volta habit); each one beside
it that must pass is the same kernel with the barrier that makes it right, or an exchange
that is not a race."""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.commands.main import main
from kir.errors import RaceError
from kir.interp import run_kernel
from kir.ir import Launch

BLOCK = 64
BLOCKS = 3


def _run(body: str, block: int = BLOCK, shared: str = "float s[64];") -> np.ndarray:
    """Run a kernel ``k(const float* x, float* out)`` whose body follows a shared declaration
    and ``int t = threadIdx.x;``; returns ``out`` (one float per thread)."""
    source = ("__global__ void k(const float* x, float* out) {\n"
              f"    __shared__ {shared}\n"
              "    int t = threadIdx.x;\n" + body + "\n}\n")
    kernel = load_cuda(source, "race.cu", launch=Launch((str(BLOCKS), "1", "1"),
                                                        (block, 1, 1), 0))
    x = np.arange(BLOCKS * block, dtype=np.float32) % 7
    out = np.zeros(BLOCKS * block, np.float32)
    return run_kernel(kernel, {"x": x, "out": out})["out"]


FILL = "    s[t] = x[blockIdx.x * 64 + t];\n    __syncthreads();\n"


def _race(body: str, **kw) -> RaceError:
    with pytest.raises(RaceError) as info:
        _run(body, **kw)
    return info.value


def test_warp_synchronous_tail_without_barriers_is_a_race():
    """The pre-Volta reduction tail, not volatile: lane 0 reads s[16], which lane 16 wrote
    one statement before; the compiler, seeing no dependence of lane 0's own, may load it
    early."""
    err = _race(FILL + "    if (t < 32) {\n        s[t] += s[t + 32];\n"
                "        s[t] += s[t + 16];\n        s[t] += s[t + 8];\n    }\n"
                "    if (t == 0) out[blockIdx.x] = s[0];")
    assert err.loc.file == "race.cu" and err.loc.line == 8, err
    # The other thread's access is named too: lane 16's write one statement before.
    assert "'s'[16]" in str(err) and "thread (0, 0, 0) reads it after thread (16, 0, 0) " \
        "wrote it at race.cu:7:9," in str(err)
    assert "__syncwarp()" in err.hint and "__syncthreads()" in err.hint


def test_warp_synchronous_tail_with_syncwarp_passes_and_sums():
    out = _run(FILL + "    if (t < 32) {\n        float v = s[t];\n"
               "        for (int o = 32; o > 0; o >>= 1) {\n"
               "            v += s[t + o];\n            __syncwarp();\n"
               "            s[t] = v;\n            __syncwarp();\n        }\n    }\n"
               "    __syncthreads();\n"
               "    if (t == 0) out[blockIdx.x] = s[0];")
    x = np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7
    # The tail reads s[t + o] up to s[63]: each step adds what the upper half holds.
    assert out[0] == x[:64].sum() and out[1] == x[64:128].sum()


def test_read_of_another_warps_write_needs_a_block_barrier():
    body = ("    s[t] = x[blockIdx.x * 64 + t];\nSYNC"
            "    out[blockIdx.x * 64 + t] = s[63 - t];")
    err = _race(body.replace("SYNC", ""))
    assert "thread (0, 0, 0) reads it after thread (63, 0, 0) wrote it" in str(err)
    err = _race(body.replace("SYNC", "    __syncwarp();\n"))
    assert "thread (0, 0, 0) reads it after a thread of another warp" in str(err)
    out = _run(body.replace("SYNC", "    __syncthreads();\n"))
    x = np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7
    assert out[0] == x[63]


def test_a_warp_barrier_orders_for_its_own_warp():
    out = _run("    if (t < 32) s[t] = x[blockIdx.x * 64 + t];\n    __syncwarp();\n"
               "    if (t < 32) out[blockIdx.x * 64 + t] = s[31 - t];")
    x = np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7
    assert out[0] == x[31]


def test_reused_tile_without_the_trailing_barrier_is_a_race():
    """The classic tiling bug: the next tile is loaded while another warp still reads this
    one (write after read, across warps)."""
    body = ("    float acc = 0.0f;\n"
            "    for (int tile = 0; tile < 3; tile++) {\n"
            "        s[t] = x[blockIdx.x * 64 + (t + tile) % 64];\n"
            "        __syncthreads();\n"
            "        acc += s[63 - t];\nSYNC"
            "    }\n"
            "    out[blockIdx.x * 64 + t] = acc;")
    err = _race(body.replace("SYNC", ""))
    assert err.loc.line == 6 and "overwrites it after thread" in str(err), err
    assert "read it at race.cu:8:" in str(err), err  # the other warp's read of the tile
    out = _run(body.replace("SYNC", "        __syncthreads();\n"))
    x = np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7
    assert out[0] == x[63] + x[0] + x[1]  # s[63] of tiles 0, 1, 2


def test_threads_writing_one_value_may_read_it_back():
    """Every thread stores the same flag and reads it: whichever write landed, it holds the
    value each of them wrote."""
    out = _run("    s[0] = 2.0f;\n    out[blockIdx.x * 64 + t] = s[0] + 1.0f;")
    assert (out == 3.0).all()


def test_threads_writing_different_values_to_one_element_is_a_race():
    err = _race("    s[0] = (float)t;\n    __syncthreads();\n"
                "    out[blockIdx.x * 64 + t] = s[0];")
    assert "writes a different value to it" in str(err) and err.loc.line == 4
    assert "after thread (63, 0, 0) wrote it at race.cu:4:5" in str(err), err


def test_redundant_lanes_of_one_warp_updating_in_place_pass():
    """Every lane of a warp doing the same in-place update (code widened to redundant
    lanes): each lane's own read comes before its own write, and the warp runs them
    together."""
    out = _run("    int row = t / 32;\n"
               "    s[row] = x[blockIdx.x * 64 + row];\n"
               "    s[row] = s[row] * 2.0f + 1.0f;\n"
               "    out[blockIdx.x * 64 + t] = s[row];")
    x = np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7
    assert out[0] == x[0] * 2 + 1 and out[40] == x[1] * 2 + 1


def test_a_race_in_a_whole_loop_sum_is_found():
    """Dot-product loops run as one vectorized sum (kir.interp.reduce): their loads are
    checked too."""
    err = _race("    s[t] = x[blockIdx.x * 64 + t];\n"
                "    float acc = 0.0f;\n"
                "    for (int k = 0; k < 64; k++) acc += s[k];\n"
                "    out[blockIdx.x * 64 + t] = acc;")
    assert err.loc.line == 6 and "reads it after" in str(err)


def test_vector_accesses_are_checked_element_by_element():
    err = _race("    if (t < 16) reinterpret_cast<float4*>(s)[t] = make_float4(1.0f, 2.0f, 3.0f,"
                " 4.0f);\n"
                "    out[blockIdx.x * 64 + t] = s[(t + 5) % 64];")
    assert "reads it after" in str(err)


def test_a_race_is_a_clear_error_from_the_command_line(tmp_path, capsys):
    source = tmp_path / "tail.cu"
    source.write_text("__global__ void k(const float* x, float* out) {\n"
                      "    __shared__ float s[64];\n    int t = threadIdx.x;\n"
                      "    s[t] = x[blockIdx.x * 64 + t];\n    __syncthreads();\n"
                      "    if (t < 32) {\n        s[t] += s[t + 32];\n"
                      "        s[t] += s[t + 16];\n    }\n"
                      "    if (t == 0) out[blockIdx.x] = s[0];\n}\n")
    spec = tmp_path / "tail.kir.toml"
    spec.write_text('kernel = "k"\nsizes = { n = 256 }\n'
                    'launch = { grid = ["n / 64"], block = [64] }\n[args]\n'
                    'x = { dtype = "f32", shape = ["n"] }\n'
                    'out = { dtype = "f32", shape = ["n / 64"], role = "out" }\n')
    code = main(["run", str(source), "--spec", str(spec)])
    err = capsys.readouterr().err
    assert code != 0
    assert f"{source}:8:9: error: shared-memory race on 's'[16]" in err
    assert "Traceback" not in err


def test_races_off_runs_the_racy_kernel_in_lockstep():
    """``run_kernel(races=False)``, which validation uses for a size set's later seeds."""
    source = ("__global__ void k(const float* x, float* out) {\n"
              "    __shared__ float s[64];\n    int t = threadIdx.x;\n"
              "    s[t] = x[t];\n    out[t] = s[63 - t];\n}\n")
    kernel = load_cuda(source, "race.cu", launch=Launch(("1", "1", "1"), (64, 1, 1), 0))
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(RaceError):
        run_kernel(kernel, {"x": x, "out": np.zeros(64, np.float32)})
    out = run_kernel(kernel, {"x": x, "out": np.zeros(64, np.float32)}, races=False)["out"]
    assert (out == x[::-1]).all()


def test_validation_looks_for_races_on_its_first_case():
    from pathlib import Path

    from kir.driver.load import load_kernel
    from kir.measure.cases import build_cases

    loaded = load_kernel(Path(__file__).parents[1] / "examples" / "softmax.cu")
    cases, _ = build_cases(loaded, seeds=(0, 1))
    assert len({str(sorted(case.sizes.items())) for case in cases}) == 2  # ragged too
    assert [case.races for case in cases] == [True] + [False] * (len(cases) - 1)


def test_the_unrewritten_kernel_is_checked_for_races_at_every_size(tmp_path):
    """The cases come from the user's kernel's own runs, marks on: a race that only the
    ragged sizes reach (a tail branch) stops the search, as at the spec's sizes (other
    failures there only drop those sizes, with a note)."""
    from kir.driver.load import load_kernel
    from kir.measure.cases import build_cases

    source = tmp_path / "tail.cu"
    source.write_text("__global__ void k(const float* x, float* out, int n) {\n"
                      "    __shared__ float s[64];\n    int t = threadIdx.x;\n"
                      "    int i = blockIdx.x * 64 + t;\n"
                      "    s[t] = i < n ? x[i] : 0.0f;\n    __syncthreads();\n"
                      "    if (n % 64 != 0 && t == 0) s[1] = 0.0f;\n"
                      "    if (i < n) out[i] = s[t];\n}\n")
    (tmp_path / "tail.kir.toml").write_text(
        'kernel = "k"\nsizes = { n = 256 }\nragged = { n = 200 }\n'
        'launch = { grid = ["ceil(n / 64)"], block = [64] }\n[args]\n'
        'x = { dtype = "f32", shape = ["n"] }\n'
        'out = { dtype = "f32", shape = ["n"], role = "out" }\n'
        'n = { value = "n", dtype = "i32" }\n')
    with pytest.raises(RaceError) as info:
        build_cases(load_kernel(source), seeds=(0,))
    assert info.value.loc.line == 8 and "thread (0, 0, 0) wrote it" in str(info.value)


def test_a_failing_privacy_analysis_leaves_every_access_marked(monkeypatch):
    """Skipping proven-private accesses is a shortcut: if the analysis breaks, runs still
    work and races are still found."""
    import kir.analysis.deps as deps
    import kir.interp.races as races

    def broken(*args, **kwargs):
        raise RuntimeError("analysis bug")
    monkeypatch.setattr(deps, "thread_private_accesses", broken)
    monkeypatch.setattr(races, "_RACE_FREE", {})
    err = _race("    s[t] = x[blockIdx.x * 64 + t];\n"
                "    out[blockIdx.x * 64 + t] = s[63 - t];")
    assert "reads it after thread (63, 0, 0) wrote it" in str(err)
    out = _run("    s[t] = x[blockIdx.x * 64 + t];\n    __syncthreads();\n"
               "    out[blockIdx.x * 64 + t] = s[63 - t];")
    assert out[0] == (np.arange(BLOCKS * BLOCK, dtype=np.float32) % 7)[63]
