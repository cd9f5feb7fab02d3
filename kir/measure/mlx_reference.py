"""The spec's ``reference_mlx`` as a baseline: what the user's MLX program does without kir.

A GPU search times it (``mx.compile``'d, on the target GPU, at the compiled sizes, the same
way candidates are timed: median of repeated runs, each evaluated before the clock stops) so
its result says how the winner compares with plain MLX, not only with the unrewritten
kernel. Without a GPU there is nothing to time: the cost model says nothing about MLX's own
kernels.
"""

from __future__ import annotations

import numpy as np

from kir.errors import KirError


def time_reference_mlx(bound, warmup: int = 3, repeat: int = 10):
    """The :class:`kir.backends.mlx_runner.Timing` of the spec's ``reference_mlx`` on MLX's
    default device at ``bound``'s sizes (None when the spec names none)."""
    spec = bound.spec
    if spec.reference_mlx is None:
        return None
    import mlx.core as mx

    from kir.backends.mlx_runner import measure
    from kir.spec.bound import reference_function

    function = reference_function(spec, "reference_mlx")
    inputs = bound.make_inputs(0)
    names = [name for name, value in inputs.items() if isinstance(value, np.ndarray)]
    scalars = {name: value for name, value in inputs.items() if name not in names}
    sizes = dict(bound.sizes)
    arrays = [mx.array(inputs[name]) for name in names]

    def call(*values):
        result = function({**scalars, **dict(zip(names, values))}, sizes)
        return [result[name] for name in bound.outputs]

    compiled = mx.compile(call)
    try:
        mx.eval(compiled(*arrays))
    except Exception as exc:  # noqa: BLE001 - the user's code: say so
        raise KirError(f"{spec.path.name}: reference_mlx {spec.reference_mlx} failed under "
                       f"mx.compile: {type(exc).__name__}: {exc}") from exc
    return measure(lambda: mx.eval(compiled(*arrays)), warmup, repeat)
