"""``kir campaign CONFIG.toml``: searches for kernels x sizes x devices on a cluster, into one
tuning database and one report (see :mod:`kir.cluster.campaign_config` for the file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("campaign", help="search kernels x sizes x devices on a cluster",
                       description="Run a search for every kernel, size set and device of "
                                   "CONFIG.toml (on a Ray cluster, or this machine's pools "
                                   "with cluster = \"local\"), all into one tuning database, "
                                   "and write one report: the best time per kernel and device "
                                   "with its ratio to the unrewritten kernel, and which rules "
                                   "paid off on which device. Started again, finished "
                                   "searches are answered from the database. See "
                                   "docs/SCALE_OUT.md.")
    p.add_argument("config", metavar="CONFIG.toml")
    p.add_argument("--out", metavar="DIR", help="report folder (default: the file's `out`)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every search ran, 1 when one failed (its line says why)."""
    import dataclasses

    from kir.cluster.campaign import run_campaign
    from kir.cluster.campaign_config import load_campaign

    config = load_campaign(args.config)
    if args.out:
        config = dataclasses.replace(config, out=Path(args.out))
    searches = sum(len(k.sizes) for k in config.kernels) * len(config.devices)
    print(f"campaign: {searches} searches ({len(config.devices)} devices) on "
          f"{config.cluster}", file=sys.stderr)
    done = run_campaign(config, say=lambda line: print(line, file=sys.stderr))
    for note in done.notes:
        print(note, file=sys.stderr)
    failed = [o for o in done.outcomes if o.error]
    print(f"{len(done.outcomes)} searches in {done.wall_s:.1f} s"
          + (f", {len(failed)} failed" if failed else "") + f"; report: {done.report}")
    return 1 if failed else 0
