"""Run a campaign: searches for kernels x sizes x devices, one tuning database, one report.

Each device gets one executor for the whole campaign (on a Ray cluster: its actors stay warm
from one kernel to the next) and a thread of the coordinator that runs that device's searches
one after another; devices search side by side. Every search writes through the
coordinator's tuning database, so a campaign interrupted (or finished) and started again
answers its finished searches from the database: with the same seed a generational search
replays the same candidates, every one a database hit (a "steady" search is not seeded by
its completion order and may ask for a few new ones).

After each search the winning trace is ablated (:func:`kir.report.ablate`: the time without
each step), which gives the rule x device transfer table of the report
(:mod:`kir.report.campaign`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kir.cluster.campaign_config import CampaignConfig, DeviceEntry, KernelEntry
from kir.driver.load import Loaded, load_kernel
from kir.errors import KirError
from kir.measure.remote import Executor, LocalExecutor, RemoteEvaluator
from kir.report.ablation import AblationRow
from kir.report.campaign import SearchOutcome, write_campaign_report
from kir.search.db import TuningDB, default_db_path


@dataclass
class CampaignRun:
    """What a campaign did: every search's outcome, the report, the wall time."""

    outcomes: list[SearchOutcome] = field(default_factory=list)
    report: Path | None = None
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def load_targets(config: CampaignConfig) -> list[tuple[KernelEntry, Loaded]]:
    """Every kernel at every size set, loaded (a bad kernel or size fails before any search)."""
    loaded = []
    for entry in config.kernels:
        for sizes in entry.sizes:
            loaded.append((entry, load_kernel(entry.file, spec_path=entry.spec,
                                              sizes=dict(sizes), kernel_name=entry.kernel)))
    for entry, found in loaded:
        if found.bound is None:
            raise KirError(f"{entry.file} has no spec: a campaign searches against one",
                           hint="write a .kir.toml beside it, or name one with spec = ...")
    return loaded


def make_executor(config: CampaignConfig, device: DeviceEntry) -> Executor:
    """The executor of ``device``: its Ray actors, or this machine's pools ("local")."""
    if config.cluster == "local":
        return LocalExecutor(device.target, workers=2)
    from kir.measure.ray_connect import connect, parse_cluster
    from kir.measure.ray_executor import RayExecutor

    connect(parse_cluster(config.cluster), local_resource=device.resource)
    return RayExecutor(device.resource, device.target, actors=device.actors)


def run_campaign(config: CampaignConfig, *, say: Callable[[str], None] = print,
                 executors: dict[str, Executor] | None = None) -> CampaignRun:
    """Run every search of ``config`` and write the report; ``executors`` (by device name)
    replaces the ones :func:`make_executor` would start."""
    started = time.monotonic()
    targets = load_targets(config)
    run = CampaignRun()
    owned = {}
    try:
        pools = {}
        for device in config.devices:
            pools[device.name] = (executors or {}).get(device.name) or \
                owned.setdefault(device.name, make_executor(config, device))
            run.notes += getattr(pools[device.name], "notes", [])
        db_path = config.db or default_db_path()
        total = len(targets) * len(config.devices)
        guard = threading.Lock()

        def one_device(device: DeviceEntry) -> None:
            for order, (_, loaded) in enumerate(targets):
                outcome = search_one(config, loaded, device, pools[device.name], db_path,
                                     order)
                with guard:
                    run.outcomes.append(outcome)
                    say(f"[{len(run.outcomes)}/{total}] {outcome.line()}")

        threads = [threading.Thread(target=one_device, args=(device,), name=device.name)
                   for device in config.devices]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for pool in owned.values():
            pool.close()
    order = {d.name: i for i, d in enumerate(config.devices)}
    run.outcomes.sort(key=lambda o: (o.order, order[o.device]))
    run.wall_s = time.monotonic() - started
    run.report = write_campaign_report(config.out, run.outcomes,
                                       devices=[d.name for d in config.devices],
                                       settings=_settings(config, db_path, run))
    return run


def _settings(config: CampaignConfig, db_path: Path, run: CampaignRun) -> dict[str, str]:
    return {"campaign": str(config.path), "cluster": config.cluster,
            "strategy": config.strategy, "budget per search": str(config.budget),
            "seed": str(config.seed), "tuning database": str(db_path),
            "rules": ", ".join(config.rules) if config.rules else "all",
            "wall time": f"{run.wall_s:.1f} s", **({"notes": "; ".join(run.notes)}
                                                   if run.notes else {})}


def search_one(config: CampaignConfig, loaded: Loaded, device: DeviceEntry,
               executor: Executor, db_path: Path, order: int = 0) -> SearchOutcome:
    """One search of the campaign, its ablation and its own report; a failure is recorded
    in the outcome, and the campaign goes on."""
    from kir.api.searching import validation_fingerprint
    from kir.backends import target_for
    from kir.driver.registry import load_registry
    from kir.report import ablate, write_report
    from kir.rules import apply_trace, context_for
    from kir.search import SearchConfig, search
    from kir.search.engine import default_key
    from kir.search.hints import hints

    outcome = SearchOutcome.start(loaded, device.name, order)
    try:
        registry = load_registry([])
        if config.rules is not None:  # a Registry still, so its fingerprint keys the rows
            for name in set(registry) - set(config.rules):
                del registry[name]
        check = _check_sizes(loaded)
        evaluator = RemoteEvaluator(loaded, executor, check_sizes=check, owns_executor=False)
        outcome.descriptor = evaluator.descriptor
        ctx = context_for(loaded, target_for("model" if evaluator.modelled
                                             else evaluator.target))
        key_sizes = {**ctx.sizes, **{f"check:{k}": v for k, v in (check or {}).items()}}
        # Keyed as ``kir compile --search`` keys its verdicts, so the two share rows.
        key = default_key(loaded.kernel, evaluator, key_sizes,
                          validation_fingerprint(loaded, registry))
        settings = SearchConfig(strategy=config.strategy, budget=config.budget,
                                seed=config.seed)
        seeds = [h.steps for h in hints(loaded.kernel, registry, ctx)]
        with TuningDB(db_path) as db:
            result = search(loaded.kernel, registry, evaluator, ctx, settings, db, seeds,
                            key=key)
            rows: list[AblationRow] = []
            if result.best_ms and result.stopped != "baseline_failed":
                rows = ablate(loaded.kernel, result.best_steps, result.best_ms, registry,
                              ctx, evaluator, db, key)
        outcome.finish(result, rows, evaluator.time_sizes)
        if result.stopped == "baseline_failed":
            first = result.history[0] if result.history else None
            outcome.error = "the unrewritten kernel fails its own check" + (
                f" ({first.status}: {first.error})" if first else "")
        folder = config.out / outcome.slug
        replay = apply_trace(loaded.kernel, result.best_steps, registry, ctx)
        write_report(folder, result=result, base=loaded.kernel, step_kernels=replay.kernels,
                     ablation=rows, title=f"{outcome.kernel} on {device.name}",
                     settings={"sizes": outcome.sizes_text, "device": str(evaluator.descriptor)},
                     unit=outcome.unit)
        outcome.report = folder / "report.md"
    except KirError as exc:
        outcome.error = exc.message
    except Exception as exc:  # noqa: BLE001 - one search's failure is its own
        outcome.error = f"{type(exc).__name__}: {exc}"
    return outcome


def _check_sizes(loaded: Loaded) -> dict[str, int] | None:
    """Where the interpreter validates (as ``kir compile --search`` does): the spec's check
    table, else sizes derived from its defaults; None when those are the compiled ones."""
    from kir.spec.shrink import check_sizes

    spec, compiled = loaded.spec, dict(loaded.bound.sizes)
    if spec.check:
        return dict(spec.check)
    try:
        found = check_sizes(spec, compiled)
    except KirError:
        return None  # no smaller sizes meet the spec's constraints
    return None if found == compiled else found


