"""Analyses for matrix-fragment statements (:class:`kir.ir.MatrixLoad` and friends).

Rules that change a buffer's layout or indices (pad-shared, transpose-shared, double-buffer,
vectorize-access, ...) must leave buffers that matrix statements read or write alone (or
rewrite their index and stride too): :func:`matrix_buffers` names them.
"""

from __future__ import annotations

from kir.ir import MatrixFill, MatrixLoad, MatrixStore, Node


def matrix_buffers(node: Node) -> set[str]:
    """Buffers a MatrixLoad or MatrixStore under ``node`` accesses."""
    return {n.buffer for n in node.walk() if isinstance(n, (MatrixLoad, MatrixStore))}


def fragment_names(node: Node) -> set[str]:
    """Matrix fragments declared under ``node`` (names that fresh locals must avoid)."""
    return {n.name for n in node.walk() if isinstance(n, (MatrixFill, MatrixLoad))}


__all__ = ["matrix_buffers", "fragment_names"]
