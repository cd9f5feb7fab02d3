"""What a verdict was measured on: the :class:`DeviceDescriptor` a worker announces.

A timing depends on the chip, on the MLX release that compiled the kernel (MLX changes compile
options between releases), on the kir release that emitted it and on the operating system
(which ships the Metal compiler). A worker describes itself with these when it starts; a job is
built for one descriptor and a worker refuses a job built for another, so a fleet of mixed
machines never files an M1's time under an M3. The descriptor is also the tuning database's
device key (:class:`kir.search.db.TuningKey` keeps ``device``, ``mlx`` and ``os``).

The cost model depends on none of MLX or the OS: its descriptor leaves them empty, so modelled
results from any machine share one key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class DeviceDescriptor:
    """A device as a worker announces it. ``device`` names the hardware (``"Apple M2 Max"``,
    ``"NVIDIA H200"``, ``"model:apple-m1"``), ``target`` what runs there (``"metal"``,
    ``"cuda"``, ``"model:apple-m1"``); ``mlx``, ``kir`` and ``os`` are versions ("" when
    the verdicts do not depend on it)."""

    device: str
    target: str
    mlx: str = ""
    kir: str = ""
    os: str = ""

    def mismatch(self, other: "DeviceDescriptor") -> str | None:
        """None when ``other`` is the same device, else which fields differ, for a refusal."""
        differ = [f"{f.name} {getattr(self, f.name)!r} != {getattr(other, f.name)!r}"
                  for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]
        return "; ".join(differ) or None

    def __str__(self) -> str:
        extra = ", ".join(part for part in (
            self.target, self.mlx and f"MLX {self.mlx}", self.kir and f"kir {self.kir}",
            self.os) if part)
        return f"{self.device} ({extra})"
