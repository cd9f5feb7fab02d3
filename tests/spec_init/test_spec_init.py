"""``kir spec init`` (issue 13): specs drafted from launch sites in host code.

The corpus (``data/``) is kernels with their host programs in the styles people write them
(FlashAttention tutorials, GEMM tutorials, llm.c's dev kernels, CUDA samples, thrust,
templates, a launch on a pointer into a buffer, a launch in another file). Each drafted spec
is checked for what it MEANS: with a numpy reference added, the kernel run under it must
match (so sizes, shapes, roles, initial contents, ranges and scalar values are right); a few
are also run as the ORIGINAL CUDA on the emulator, which shares nothing with kir's frontend.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kir.backends.emulate import emulator_available

from kir.commands.main import main
from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.driver.spec_draft import draft_spec
from kir.spec import load_spec_text

DATA = Path(__file__).parent / "data"
RUNNABLE = ["flash_fwd", "sgemm_naive", "gelu_llmc", "layernorm_llmc", "encoder_llmc",
            "vector_add", "histogram", "reduce_sum", "scale_inplace", "axpy_thrust",
            "second_half", "transpose", "gated_act"]


def drafted(name: str, tmp_path: Path, host: tuple[Path, ...] = (), source: Path | None = None,
            reference: str | None = None) -> Path:
    """The kernel copied to ``tmp_path`` with its drafted spec (and a reference) beside it."""
    source = source or DATA / f"{name}.cu"
    draft = draft_spec(source, host=host)
    kernel = tmp_path / source.name
    shutil.copyfile(source, kernel)
    shutil.copyfile(DATA / "refs.py", tmp_path / "refs.py")
    text = f'reference = "refs:{reference or name}"\n' + draft.text
    kernel.with_name(source.stem + ".kir.toml").write_text(text)
    return kernel


@pytest.mark.parametrize("name", RUNNABLE)
def test_drafted_spec_runs_and_means_what_the_host_code_does(name, tmp_path):
    kernel = drafted(name, tmp_path)
    outcome = check_on_target(load_kernel(kernel), "interp")
    assert outcome.result.ok, outcome.result.describe()


def test_flash_attention_host_code_gives_sizes_launch_and_scalars():
    draft = draft_spec(DATA / "flash_fwd.cu")
    text = draft.text
    assert 'sizes = { B = 2, nh = 2, Bc = 16, d = 16, Br = 16, N = 80 }' in text
    assert 'launch = { grid = ["B", "nh"], block = ["Bc"], shared_bytes = ' \
           '"3 * Bc * d * 4 + Bc * Br * 4" }' in text
    assert 'Tc = { value = "ceil(N / Bc)", dtype = "i32" }' in text
    assert 'softmax_scale = { value = "1.0 / sqrt(d)", dtype = "f32" }' in text
    assert 'm = { dtype = "f32", shape = ["B", "nh", "N"], role = "inout", init = -inf }' \
        in text  # filled with -INFINITY by a host loop, then copied
    assert 'l = { dtype = "f32", shape = ["B", "nh", "N"], role = "inout", init = 0 }' in text
    assert draft.todos == [] and draft.launch.endswith("flash_fwd.cu:139")  # the line of the launch


def test_gemm_tutorial_output_holding_data_and_macro_grid():
    text = draft_spec(DATA / "sgemm_naive.cu").text
    assert 'C = { dtype = "f32", shape = ["m", "n"], role = "inout", init = "input" }' in text
    assert 'grid = ["(m + 32 - 1) // 32", "(n + 32 - 1) // 32"], block = [32, 32]' in text
    assert 'alpha = { value = "0.5", dtype = "f32" }' in text


def test_llm_training_style_helpers_and_index_ranges():
    gelu = draft_spec(DATA / "gelu_llmc.cu").text  # cudaCheck(...) and ceil_div(...) read
    assert 'grid = ["(B * T * C + block_size - 1) // block_size"]' in gelu
    assert 'inp = { dtype = "f32", shape = ["B", "T", "C"] }' in gelu
    encoder = draft_spec(DATA / "encoder_llmc.cu").text  # make_random_int(B * T, V)
    assert 'inp = { dtype = "i32", shape = ["B", "T"], range = [0, "V - 1"] }' in encoder
    histogram = draft_spec(DATA / "histogram.cu").text
    assert 'bins = { dtype = "u32", shape = ["NUM_BINS"], role = "out", init = 0 }' in histogram


def test_a_function_template_argument_is_drafted_from_the_launch():
    text = draft_spec(DATA / "gated_act.cu").text
    assert 'templates = { scalar_t = "f32", ACT = { function = "ops::silu" } }' in text
    assert "cannot lower" not in text  # the kernel lowered: roles from its IR
    assert 'out = { dtype = "f32", shape = ["tokens", "d"], role = "out"' in text


def test_templates_offsets_thrust_and_a_launch_in_another_file():
    assert 'templates = { BLOCK = "kBlock" }' in draft_spec(DATA / "scale_inplace.cu").text
    axpy = draft_spec(DATA / "axpy_thrust.cu").text
    assert 'templates = { T = "f32" }' in axpy and 'a = { value = "2.0", dtype = "f32" }' in axpy
    assert 'offset = "total // 2"' in draft_spec(DATA / "second_half.cu").text
    split = draft_spec(DATA / "split" / "relu_kernel.cu",
                       host=[DATA / "split" / "relu_main.cu"])
    assert "sizes = { n = 2048, threads = 512 }" in split.text  # through run_relu(d_x, d_y, n)
    assert 'x = { dtype = "f32", shape = ["n"] }' in split.text


def test_the_split_kernel_runs_with_its_drafted_spec(tmp_path):
    kernel = drafted("relu_kernel", tmp_path, host=(DATA / "split" / "relu_main.cu",),
                     source=DATA / "split" / "relu_kernel.cu")
    assert check_on_target(load_kernel(kernel), "interp").result.ok


@pytest.mark.skipif(not emulator_available()[0], reason="the CPU emulator needs a C++ compiler")
@pytest.mark.parametrize("name", ["histogram", "gelu_llmc"])
def test_drafted_spec_runs_the_original_cuda(name, tmp_path):
    outcome = check_on_target(load_kernel(drafted(name, tmp_path)), "emulate-original")
    assert outcome.result.ok, outcome.result.describe()


def test_a_partial_draft_marks_every_gap_and_still_loads(tmp_path):
    """Sizes read from tensors at run time: the shape of Q follows its .size(i) reads, the
    values are guesses, K's shape is unknown; every one of them is a TODO."""
    draft = draft_spec(DATA / "flash_torch.cu")
    todos = "\n".join(draft.todos)
    assert "N is Q.size(0), known at run time only" in todos
    assert "args.K: no allocation of K found" in todos
    assert 'Q = { dtype = "f32", shape = ["N", "d"] }' in draft.text
    spec = load_spec_text(draft.text, tmp_path / "flash_torch.kir.toml")
    assert spec.sizes == {"N": 64, "d": 64}


def test_without_a_launch_site_the_signature_alone_is_drafted(tmp_path):
    draft = draft_spec(Path(__file__).parents[2] / "examples" / "softmax.cu")
    assert draft.launch is None and "no launch site was found" in draft.text
    assert any("no launch site found" in t for t in draft.todos)
    spec = load_spec_text(draft.text, tmp_path / "softmax.kir.toml")
    assert spec.args["x"].role == "in" and spec.args["y"].role == "out"  # const / written


def test_cli_writes_beside_the_kernel_and_never_overwrites(tmp_path, capsys):
    kernel = tmp_path / "histogram.cu"
    shutil.copyfile(DATA / "histogram.cu", kernel)
    assert main(["spec", "init", str(kernel)]) == 0
    spec = tmp_path / "histogram.kir.toml"
    assert "wrote" in capsys.readouterr().out and spec.exists()
    assert main(["run", str(kernel)]) == 0
    capsys.readouterr()
    assert main(["spec", "init", str(kernel)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["spec", "init", str(kernel), "--force", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("# Drafted by `kir spec init`")


def test_several_kernels_need_a_choice(tmp_path, capsys):
    source = tmp_path / "two.cu"
    source.write_text((DATA / "vector_add.cu").read_text() +
                      "\n__global__ void other(float* y) { y[0] = 1.0f; }\n")
    draft = draft_spec(source)  # only vectorAdd is launched: that one
    assert draft.kernel == "vectorAdd"
    source.write_text(source.read_text() + "void f(float* y) { other<<<1, 1>>>(y); }\n")
    assert main(["spec", "init", str(source), "-o", "-"]) == 2
    assert "--kernel" in capsys.readouterr().err
    assert main(["spec", "init", str(source), "--kernel", "other", "-o", "-"]) == 0


def test_templates_from_an_explicit_instantiation(tmp_path):
    """No launch in the file: the explicit instantiation gives the template values (the
    frontend's own fallback), not guesses."""
    source = tmp_path / "inst.cu"
    source.write_text("template <typename T, int F>\n"
                      "__global__ void scale(const T* x, T* y, int n) {\n"
                      "    int i = threadIdx.x; if (i < n) y[i] = x[i] * (T)F; }\n"
                      "template __global__ void scale<double, 3>(const double*, double*, int);\n")
    text = draft_spec(source).text
    assert 'templates = { T = "f64", F = 3 }' in text


def test_a_function_object_parameter_takes_no_argument(tmp_path):
    """A data-free function object passed by value (its type a template parameter the file
    instantiates): the draft leaves it out of [args] and templates, the frontend binds it
    from the file, and the drafted spec runs."""
    source = tmp_path / "act.cu"
    source.write_text(
        "struct Twice { __device__ float operator()(float v) const { return 2.f * v; } };\n"
        "template <typename Act>\n"
        "__global__ void act(const float* x, float* y, int n, Act f) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = f(x[i]); }\n"
        "template __global__ void act<Twice>(const float*, float*, int, Twice);\n"
        "void run(const float* x, float* y, int n) {\n"
        "    act<<<(n + 255) / 256, 256>>>(x, y, n, Twice()); }\n")
    draft = draft_spec(source)
    assert "Act" not in draft.text and "\nf =" not in draft.text
    spec = tmp_path / "act.kir.toml"
    spec.write_text(draft.text)
    from kir.driver.runners import copy_inputs, run_interp

    loaded = load_kernel(source, spec_path=spec)
    inputs = loaded.bound.make_inputs(3)
    got = run_interp(loaded, copy_inputs(inputs))
    assert (got["y"] == 2 * inputs["x"]).all()


def test_a_template_type_is_deduced_from_the_launch_arguments(tmp_path):
    """``scale<<<...>>>(x, n)`` with ``__half* x`` in the host code: T is half, as C++
    deduces it (it was drafted as a guessed f32)."""
    source = tmp_path / "deduce.cu"
    source.write_text("""#include <cuda_fp16.h>
template <typename T>
__global__ void scale(T* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * (T)2.0f;
}
int main() {
    int n = 4096;
    __half* x;
    cudaMalloc(&x, n * sizeof(__half));
    scale<<<(n + 255) / 256, 256>>>(x, n);
}
""")
    draft = draft_spec(source)
    assert 'templates = { T = "f16" }' in draft.text
    assert not any("f32 is a guess" in todo for todo in draft.todos)
