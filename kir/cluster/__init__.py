"""Searching on many machines: the Ray executor and campaigns.

Ray is an optional extra (``pip install -e ".[ray]"``): nothing here imports it until a search
or campaign asks for ``--cluster ray``, and without it the local pools run as before.
:mod:`kir.cluster.ray_executor` runs the location-free jobs of :mod:`kir.measure.portable` on
a Ray cluster (one actor per device, validation as CPU tasks); :mod:`kir.cluster.campaign`
runs searches for kernels x sizes x devices into one tuning database and one report.
"""

from kir.cluster.connect import (
    DEFAULT_RESOURCE,
    cluster_evaluator,
    connect,
    parse_cluster,
    require_ray,
)

__all__ = ["DEFAULT_RESOURCE", "cluster_evaluator", "connect", "parse_cluster", "require_ray"]
