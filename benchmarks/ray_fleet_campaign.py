"""A simulated fleet: several Ray nodes on this one machine, each offering the device resource
of a different Apple chip and running the cost model for it, run a campaign of the six
examples x three chips; the wall time is compared between one node (all three chips' device
workers on it) and three nodes (one chip each).

    python benchmarks/ray_fleet_campaign.py [--nodes 1 3] [--budget 8] [--cpus-per-node 1]
                                            [--out DIR] [--only softmax ...]

Each node is a separate raylet started by ``ray.cluster_utils.Cluster`` (what Ray's own tests
use for multi-node clusters on one host), with ``--cpus-per-node`` CPUs for validation tasks.
Every run uses a fresh tuning database, so nothing is answered from an earlier run. Writes
``fleet.json`` and, per run, the campaign report (``nodes-N/campaign.md``) under ``--out``.
All times in the reports are modelled (the cost model of each chip), as the report says.

Mind the host: the nodes share its cores, so on a machine with fewer cores than nodes x CPUs
the "fleet" cannot go faster than the machine does, and the coordinator's own work (applying
rules, choosing candidates) runs in one process for all devices.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ["softmax", "layernorm", "reduce", "sgemm", "flash_attn", "selective_scan"]
CHIPS = {"M1": "apple-m1", "M3": "apple-m3", "M4": "apple-m4"}


def campaign_text(names: list[str], budget: int, out: Path, db: Path) -> str:
    lines = ['cluster = "ray"', f"budget = {budget}", "seed = 0", f'db = "{db}"',
             f'out = "{out}"', ""]
    for name in names:
        lines += ["[[kernels]]", f'file = "{ROOT / "examples" / (name + ".cu")}"', ""]
    for label, profile in CHIPS.items():
        lines += ["[[devices]]", f'name = "{label}"', f'resource = "fleet-{profile}"',
                  f'target = "model:{profile}"', "actors = 1", ""]
    return "\n".join(lines)


def run_fleet(nodes: int, names: list[str], budget: int, cpus: int, out: Path) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from kir.cluster.campaign import run_campaign
    from kir.cluster.campaign_config import load_campaign
    from kir.measure.ray_connect import connect

    resources = [f"fleet-{p}" for p in CHIPS.values()]
    per_node = [resources] if nodes == 1 else [[r] for r in resources[:nodes]]
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    cluster = Cluster()
    started = time.monotonic()
    for i, offered in enumerate(per_node):
        args = {"num_cpus": cpus, "resources": {r: 1 for r in offered}}
        if i == 0:
            cluster.add_node(**args, include_dashboard=False)
        else:
            cluster.add_node(**args)
    cluster.wait_for_nodes()
    connect(cluster.address)
    up_s = time.monotonic() - started
    folder = out / f"nodes-{nodes}"
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "campaign.toml"
    with tempfile.TemporaryDirectory() as scratch:
        config_path.write_text(campaign_text(names, budget, folder / "report",
                                             Path(scratch) / "tuning.db"))
        lines: list[str] = []
        done = run_campaign(load_campaign(config_path), say=lambda line: (print(line),
                                                                          lines.append(line)))
    ray.shutdown()
    cluster.shutdown()
    return {"nodes": nodes, "cpus_per_node": cpus, "load_average_before": load_before,
            "load_average_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "cluster_start_s": round(up_s, 1),
            "campaign_wall_s": round(done.wall_s, 1), "searches": len(done.outcomes),
            "failed": [o.line() for o in done.outcomes if o.error],
            "evaluations": sum(o.evaluations for o in done.outcomes),
            "report": str(done.report), "lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--cpus-per-node", type=int, default=1)
    parser.add_argument("--only", nargs="+", default=EXAMPLES)
    parser.add_argument("--out", type=Path, default=Path("fleet-out"))
    args = parser.parse_args()
    runs = []
    for nodes in args.nodes:
        print(f"== {nodes} node(s)")
        runs.append(run_fleet(nodes, args.only, args.budget, args.cpus_per_node, args.out))
        print(f"   campaign {runs[-1]['campaign_wall_s']} s")
    host = {"cores": os.cpu_count(), "python": platform.python_version(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}
    (args.out / "fleet.json").write_text(json.dumps({"host": host, "runs": runs}, indent=2))
    for run in runs:
        print(f"{run['nodes']} node(s): {run['searches']} searches, {run['evaluations']} "
              f"evaluations in {run['campaign_wall_s']} s (cluster up in "
              f"{run['cluster_start_s']} s)")


if __name__ == "__main__":
    main()
