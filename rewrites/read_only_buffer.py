"""What the rules that move a global buffer's reads elsewhere (stage-in-shared,
cache-in-registers) share: their sites are the kernel's global buffers, and only a buffer the
kernel never writes can be read from a copy."""

from __future__ import annotations

from typing import Any

from kir import analysis
from kir.ir import Kernel
from kir.ir.types import PointerType
from kir.rules import BaseRule, NotApplicable


class ReadOnlyBufferRule(BaseRule):
    """A rule at a global buffer parameter the kernel never writes: ``plan_read_only`` is
    its analysis (the written ones are refused, named, before it runs)."""

    site_key = "buffer"

    def candidates(self, kernel: Kernel) -> list[str]:
        return [p.name for p in kernel.params
                if isinstance(p.type, PointerType) and p.type.space == "global"]

    def plan(self, kernel: Kernel, site: str) -> Any:
        if site in analysis.buffers_written(kernel.body):
            return NotApplicable(f"the kernel writes {site}")
        return self.plan_read_only(kernel, site)

    def plan_read_only(self, kernel: Kernel, site: str) -> Any:  # pragma: no cover
        raise NotImplementedError
