"""The analytical cost model of Apple M-series GPUs, for machines with no GPU to time on.

Fed by the interpreter's counters (:class:`kir.interp.Counters`); every time it gives is
labelled *modelled*. ``profiles`` holds the GPUs (with sources), ``model`` the estimate.
"""

from kir.cost.model import CostEstimate, estimate, occupancy
from kir.cost.profiles import DEFAULT_PROFILE, PROFILES, GpuProfile, get_profile

__all__ = ["CostEstimate", "DEFAULT_PROFILE", "GpuProfile", "PROFILES", "estimate",
           "get_profile", "occupancy"]
