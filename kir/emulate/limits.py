"""Per-chip launch limits of Apple GPUs, M1 to M4, for ``kir check``.

The numbers come from the GPU profiles of the cost model (:mod:`kir.cost.profiles`, which cites
Apple's Metal feature set tables: 1024 threads and 32 KiB of threadgroup memory per threadgroup
on the Apple7 family (M1) and later). The family of each chip:

* [MFT] Apple, "Metal feature set tables" (developer.apple.com/metal/capabilities): Apple7 =
  A14 and M1, Apple8 = A15, A16 and M2, Apple9 = A17 Pro, M3 and M4; "maximum threads per
  threadgroup" 1024 and "maximum total threadgroup memory allocation" 32 KB for all three.

A pipeline may allow fewer threads than 1024 (``maxTotalThreadsPerThreadgroup`` falls when a
kernel uses many registers; MLX then refuses the launch, as in mlx-vlm#1799): the emulator
cannot know a kernel's register use, so that is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.cost.profiles import PROFILES, GpuProfile

FAMILY = {"m1": "Apple7", "m2": "Apple8", "m3": "Apple9", "m4": "Apple9"}  # [MFT]


@dataclass(frozen=True)
class ChipLimits:
    """What one chip allows a single threadgroup."""

    chip: str  # the profile's name, e.g. "apple-m2-max"
    display: str
    family: str  # Metal GPU family, e.g. "Apple8"
    max_threads: int
    threadgroup_memory: int  # bytes

    @classmethod
    def of(cls, profile: GpuProfile) -> ChipLimits:
        generation = profile.name.split("-")[1]
        return cls(profile.name, profile.display, FAMILY[generation],
                   profile.max_threads_per_group, profile.threadgroup_memory)


CHIPS: tuple[ChipLimits, ...] = tuple(ChipLimits.of(p) for p in PROFILES.values())


def over_thread_limit(threads: int) -> list[ChipLimits]:
    """The chips whose threadgroups cannot hold ``threads`` threads."""
    return [chip for chip in CHIPS if threads > chip.max_threads]


def over_memory_limit(nbytes: int) -> list[ChipLimits]:
    """The chips whose threadgroups cannot hold ``nbytes`` of threadgroup memory."""
    return [chip for chip in CHIPS if nbytes > chip.threadgroup_memory]


def chip_list(chips: list[ChipLimits]) -> str:
    """"every M1-M4 chip" or the chips' names."""
    if len(chips) == len(CHIPS):
        return "every M1-M4 chip (Apple7-Apple9 families)"
    return ", ".join(chip.display for chip in chips)
