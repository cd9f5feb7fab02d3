"""tf32-matrix: matrix products on TF32 tensor cores (f32 accumulation)."""

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
                return dataclasses.replace(n, precision="tf32")
            return None

        body = transform(kernel.body, visit)
        try:
            tf32_operand_roles(body)
        except KirError as err:
            return NotApplicable(err.message)
        return dataclasses.replace(kernel, body=body)


RULES = [Tf32Matrix()]
