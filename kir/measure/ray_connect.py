"""``--cluster ray[:ADDRESS]``: import Ray (or say how to install it), connect, and build the
evaluator of a search on the cluster."""

from __future__ import annotations

from typing import Any

from kir.driver.load import Loaded
from kir.errors import KirError

DEFAULT_RESOURCE = "kir-device"  # the custom resource device workers offer, by default
INSTALL_HINT = 'install the Ray extra: pip install -e ".[ray]" (or pip install "kir[ray]")'


def require_ray() -> Any:
    """The ``ray`` module, or a KirError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise KirError("--cluster ray needs Ray, which is not installed",
                       hint=INSTALL_HINT + "; without --cluster the search runs on this "
                                           "machine's own worker pools") from None
    return ray


def parse_cluster(text: str) -> str | None:
    """``ray`` → None (Ray finds the cluster: ``RAY_ADDRESS`` or one started here with
    ``ray start``; else :func:`connect` starts one on this machine); ``ray:ADDRESS`` →
    ADDRESS (``HOST:6379``, ``auto``, ``ray://HOST:10001``)."""
    kind, _, address = text.partition(":")
    if kind != "ray":
        raise KirError(f"unknown --cluster {text!r}",
                       hint="write --cluster ray or --cluster ray:HOST:PORT")
    if _ and not address:
        raise KirError(f"--cluster {text!r}: the address after 'ray:' is empty",
                       hint="write --cluster ray:HOST:PORT, or just --cluster ray")
    return address or None


def connect(address: str | None = None, *, local_resource: str | None = None,
            **init: Any) -> Any:
    """Connect to the Ray cluster at ``address`` (see :func:`parse_cluster`) unless this
    process is connected already. Without an address and with no cluster to find, a
    cluster of this machine alone is started, offering one unit of ``local_resource`` (one
    device worker here). ``init`` goes to ``ray.init`` (tests start a local cluster with
    fake device resources). Returns the ``ray`` module."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    # Workers' own output stays in their logs: verdicts carry what went wrong, and worker
    # chatter would break the search's progress line.
    quiet = {"include_dashboard": False, "log_to_driver": False}
    try:
        if address is None and local_resource is not None and not init:
            try:
                ray.init(address="auto", **quiet)
            except ConnectionError:
                ray.init(address="local", resources={local_resource: 1}, **quiet)
        else:
            # Settings for a cluster of our own (CPUs, resources) start a new one here
            # ("local"), never join one somebody else started on this machine.
            ray.init(address=address or ("local" if init else None), **quiet, **init)
    except ConnectionError as exc:
        raise KirError(f"cannot reach the Ray cluster at {address or 'auto'}: {exc}",
                       hint="start it with `ray start --head` (docs/SCALE_OUT.md), or check "
                            "the address") from None
    return ray


def role_for(target: str | None, profile: str) -> str:
    """The device workers' role for a search's ``--target``: the GPU they find (``auto``),
    the one named, or the cost model of ``profile``."""
    if target in (None, "auto"):
        return "auto"
    if target == "model":
        return f"model:{profile}"
    return target


def cluster_evaluator(loaded: Loaded, cluster: str, resource: str | None, role: str,
                      check_sizes: dict[str, int] | None = None, **executor: Any):
    """A :class:`~kir.measure.remote.RemoteEvaluator` for ``loaded`` on the cluster named
    by ``cluster`` (``ray[:ADDRESS]``), its device workers on nodes offering ``resource``."""
    from kir.measure.ray_executor import RayExecutor
    from kir.measure.remote import RemoteEvaluator

    resource = resource or DEFAULT_RESOURCE
    connect(parse_cluster(cluster), local_resource=resource)
    pool = RayExecutor(resource, role, **executor)
    return RemoteEvaluator(loaded, pool, check_sizes=check_sizes)
