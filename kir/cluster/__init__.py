"""Campaigns: searches for kernels x sizes x devices on a cluster, into one tuning database
and one report (:mod:`kir.cluster.campaign`, the file format in
:mod:`kir.cluster.campaign_config`).

The Ray executor the campaign runs its jobs on lives below, in :mod:`kir.measure.ray_executor`
(with :mod:`kir.measure.ray_connect`), so the search session of :mod:`kir.api` can use it for
``--cluster ray`` too. Ray is an optional extra (``pip install -e ".[ray]"``): nothing imports
it until a search or campaign asks for a cluster.
"""
