"""tf32-matrix and tf32x3-matrix: matrix products on TF32 tensor cores (f32 accumulation),
at TF32's precision or, split in three, at f32's."""

from __future__ import annotations

import dataclasses

from kir.analysis.matrix_roles import tf32_operand_roles
from kir.errors import KirError
from kir.ir import Kernel, MatrixMultiplyAccumulate, Node, transform
from kir.rules import BaseRule, Match, NoParams, NotApplicable, RuleContext

# The documented cost: TF32 keeps f32's 8 exponent bits and 10 of its 23 mantissa bits, so
# each operand is off by at most 2^-11 of itself (round to nearest) and each product by about
# 2^-10 relative; sums stay in f32. A K-term dot product of values of one sign is then off by
# up to ~2^-10 of the sum of |a||b| (NVIDIA, "Accelerating AI Training with NVIDIA TF32 Tensor
# Cores", 2020; PTX ISA, cvt .tf32). Whether that is allowed is the spec's tolerance's call.
TF32_RELATIVE_ERROR = 2.0 ** -10
# Split in three (big + small parts, small x small dropped), each product is off by about
# 2^-21 relative: f32's own rounding of a product is 2^-24, and a K-term f32 sum already
# loses ~K * 2^-24 (CUTLASS, "3xTF32" fast accurate f32 GEMM; Ootomo & Yokota, "Recovering
# single precision accuracy from Tensor Cores while surpassing the FP32 theoretical peak
# performance", IJHPCA 2022).
TF32X3_RELATIVE_ERROR = 2.0 ** -21


class Tf32Matrix(BaseRule):
    """Run every f32 matrix product on TF32 tensor cores, with f32 accumulation.

    Encodes what cuBLAS does for f32 GEMMs when TF32 is allowed (``CUBLAS_TF32_TENSOR_OP_MATH``;
    PyTorch's ``allow_tf32``, MLX's own CUDA matmul): operands are rounded to TF32 (10
    mantissa bits) and multiplied on the tensor cores (``mma.sync`` m16n8k8 .tf32), sums kept in
    f32. On the H200 the tensor cores do ~7x the f32 FMA rate; kir's exact f32 fragments on
    CUDA otherwise multiply through shuffles.

    The one site is ``all`` (every f32 product of the kernel), listed when there is one. Refused
    on a target without TF32 products (Metal: SIMD-group matrices multiply in f32 and there is
    nothing to gain) and when an operand fragment plays another part too (the operand layouts
    differ from the accumulator's). Legality is a precision question, as for ``fast-math``:
    each product may be off by about 2^-10 relative (``TF32_RELATIVE_ERROR``), and the
    interpreter rounds the same way, so validation against the spec's tolerance decides.
    """

    name = "tf32-matrix"
    site_key = "at"
    precision = "tf32"

    def candidates(self, kernel: Kernel) -> list[str]:
        exact = any(isinstance(n, MatrixMultiplyAccumulate) and n.precision == "f32"
                    for n in kernel.body.walk())
        return ["all"] if exact else []

    def plan(self, kernel: Kernel, site: str) -> None:
        return None

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        if ctx.target is not None and not ctx.target.tf32_matrix:
            return NotApplicable(f"{ctx.target.title} has no TF32 matrix products "
                                 "(its matrices multiply in f32 already)")

        def visit(n: Node) -> Node | None:
            if isinstance(n, MatrixMultiplyAccumulate) and n.precision == "f32":
                return dataclasses.replace(n, precision=self.precision)
            return None

        body = transform(kernel.body, visit)
        try:
            tf32_operand_roles(body)
        except KirError as err:
            return NotApplicable(err.message)
        return dataclasses.replace(kernel, body=body)


class Tf32x3Matrix(Tf32Matrix):
    """Run every f32 matrix product on TF32 tensor cores at f32's accuracy: three TF32
    products of split operands.

    CUDA practice: CUTLASS's "3xTF32" GEMMs (``OpMultiplyAddFastF32``) for f32 work that
    cannot take TF32's error: each operand is split into its TF32 rounding and the rounded
    rest, ``x = big + small``, and ``small_a·big_b + big_a·small_b + big_a·big_b`` is summed in
    f32 on the tensor cores (the small·small term dropped). Each product is then off by about
    2^-21 relative (``TF32X3_RELATIVE_ERROR``), the order of f32's own rounding in a sum, so a
    spec with an f32 tolerance admits what it refuses from ``tf32-matrix``; three tensor-core
    products still cost far less than kir's shuffled f32 fragments. Same site, target and
    operand conditions as ``tf32-matrix``; the interpreter computes the same three products.

    Measured on the H200 (BENCHMARKS.md, round 5), 2048^3 alpha/beta GEMM of unit-variance
    inputs: max abs error 0.002 where TF32's is 0.031, 0.71 ms where the same warp tiles in
    kir's f32 fragments take 0.93 ms. The tensor cores' own f32 accumulation is not
    exact (it truncates), which the interpreter does not model, so at large K the error on
    the GPU exceeds the interpreter's: an atol of 1e-4 at K = 2048 refuses it there, and the
    search's check on the GPU at the compiled sizes is what decides.
    """

    name = "tf32x3-matrix"
    precision = "tf32x3"


RULES = [Tf32Matrix(), Tf32x3Matrix()]
