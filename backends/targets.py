"""The one table of targets: each a :class:`kir.target.Target` defined beside its dialect
(:mod:`kir.backends.metal`, :mod:`kir.backends.cuda`). ``--target`` choices, the emitter,
verification limits and the rule context all read it."""

from __future__ import annotations

from kir.backends.cuda import CUDA_TARGET
from kir.backends.metal import METAL_TARGET

from kir.errors import KirError
from kir.target import Target

TARGETS: dict[str, Target] = {t.name: t for t in (METAL_TARGET, CUDA_TARGET)}


def target_named(name: str | Target) -> Target:
    """The target called ``name`` ("metal", "cuda"); a Target passes through."""
    if isinstance(name, Target):
        return name
    if name not in TARGETS:
        raise KirError(f"unknown target {name!r}", hint=f"choose one of {', '.join(TARGETS)}")
    return TARGETS[name]


def target_for(name: str) -> Target:
    """The target a timing target stands for: "metal" and "cuda" themselves; the Apple-GPU
    cost model ("model", "model:apple-m2") models Metal."""
    return TARGETS["metal"] if name.startswith("model") else target_named(name)
