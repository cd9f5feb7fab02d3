"""What a GPU target is, as one value: its limits, its capabilities, how MLX packages a kernel
for it, and the dialect its source is printed in.

The instances live with their back end (:data:`kir.backends.metal.METAL_TARGET`,
:data:`kir.backends.cuda.CUDA_TARGET`) and are listed in :data:`kir.backends.TARGETS`, the one
table that ``--target`` choices, the emitter, verification limits and the rule context read.
This class sits at the bottom of the layers so the verifier, the rules and the search can
take a Target without importing a back end. Adding a target is one back-end module: a
:class:`kir.backends.cstyle.Dialect`, its helper header and a Target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Target:
    """One GPU target. Limits are per threadgroup (Metal) / block (CUDA)."""

    name: str                    # "metal", "cuda": what --target and Emitted.target say
    title: str                   # "Metal", "CUDA": how messages name it
    group_word: str              # "threadgroup" / "block", for messages
    max_threads: int             # threads per group
    max_shared_bytes: int        # group memory in all, static and dynamic
    max_static_shared_bytes: int  # statically sized group arrays
    warp_size: int               # SIMD-group / warp width
    supports_f64: bool           # 64-bit floats
    dynamic_shared: bool         # launch-sized shared memory (else: sized statically)
    narrow_shuffles: bool        # shuffles within sub-groups of a warp (CUDA's width)
    # MLX packaging: address-space prefixes of parameters and arrays in the printed body.
    input_space: Callable[[tuple[int, ...]], str]  # an input buffer of this shape
    output_space: str
    shared_space: str
    local_space: str
    # Atomics need atomic<T> declarations (Metal): atomics on an output make every output
    # `device atomic<T>` (MLX's atomic_outputs flag), which allows only
    # ``typed_atomic_types``; shared arrays hit by atomics are declared atomic<T>; atomics on
    # per-thread arrays are refused. Without (CUDA), atomics act on plain memory.
    typed_atomics: bool
    typed_atomic_types: frozenset[str] = frozenset()
    # Matrix products with TF32 operands and f32 accumulation (tensor cores); without, every
    # matrix product is exact f32 (Metal's SIMD-group matrices).
    tf32_matrix: bool = False
    # Warp shuffles and reductions name every lane of the warp as taking part (CUDA's
    # __shfl_*_sync(0xffffffff, ...)): lanes of a warp kept apart by a branch cannot both
    # reach one (backends.partial_warps). Without (Metal), the lanes that run one take part.
    whole_warp_exchanges: bool = False
    dialect: Any = field(default=None, repr=False, compare=False)  # a cstyle.Dialect
    helpers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        return self.name
