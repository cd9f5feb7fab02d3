"""The numpy lockstep interpreter: kir's CPU reference for what a kernel computes.

Every thread of the grid is one lane of numpy vectors (grids too large for memory run in
chunks of whole blocks); divergence is a mask; shared memory is one array per block; a
barrier checks that the whole block reaches it; warp shuffles permute lanes within each
warp of 32. Arithmetic follows C and the GPU, not numpy: see :mod:`kir.ir.cops`.
"""

from kir.interp.counters import Counters
from kir.interp.run import DEFAULT_MAX_STEPS, run_kernel

__all__ = ["Counters", "run_kernel", "DEFAULT_MAX_STEPS"]
