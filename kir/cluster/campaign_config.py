"""``kir campaign CONFIG.toml``: what to search, where, and with what budget.

::

    cluster = "ray"            # "ray", "ray:HOST:6379", or "local" (this machine's pools)
    budget = 24                # evaluations per search
    seed = 0
    strategy = "evolve"        # any --strategy; "steady" keeps a fleet busy, unseeded
    db = "campaign.db"         # the coordinator's tuning database (default: the user's)
    out = "campaign-out"       # where the report goes
    rules = ["tile-loop", "unroll-loop"]   # only these rules (default: every rule)

    [[kernels]]
    file = "examples/softmax.cu"       # paths are relative to this file
    sizes = [{ rows = 64, cols = 1000 }, { rows = 8, cols = 4096 }]   # default: the spec's
    # spec = "...", kernel = "..." as --spec / --kernel

    [[devices]]
    name = "M1"                        # the report's label
    resource = "fleet-m1"              # the Ray resource its workers' nodes offer
    target = "model:apple-m1"          # "auto" (the workers' GPU), "metal", "cuda", "model:P"
    actors = 1                         # device workers (default: one per unit of resource)

Every problem is a KirError naming the file, line and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kir.errors import KirError
from kir.search.engine import STRATEGIES
from kir.spec.schema import _error as located_error
from kir.spec.schema import _toml_error

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

TOP = {"cluster", "budget", "seed", "strategy", "db", "out", "kernels", "devices", "rules"}
KERNEL_KEYS = {"file", "sizes", "spec", "kernel"}
DEVICE_KEYS = {"name", "resource", "target", "actors"}


@dataclass(frozen=True)
class KernelEntry:
    """One kernel file and the size sets to search it at ({} = the spec's sizes)."""

    file: Path
    sizes: tuple[dict[str, int], ...] = ({},)
    spec: Path | None = None
    kernel: str | None = None


@dataclass(frozen=True)
class DeviceEntry:
    """One device of the campaign: its label, Ray resource, role and worker count."""

    name: str
    resource: str
    target: str = "auto"
    actors: int | None = None


@dataclass(frozen=True)
class CampaignConfig:
    path: Path
    kernels: tuple[KernelEntry, ...]
    devices: tuple[DeviceEntry, ...]
    cluster: str = "ray"
    budget: int = 24
    seed: int = 0
    strategy: str = "evolve"
    db: Path | None = None
    out: Path = field(default=Path("campaign-out"))
    rules: tuple[str, ...] | None = None  # rule names to search with (None: all)


def load_campaign(path: str | Path) -> CampaignConfig:
    """Read and check a campaign file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KirError(f"cannot read campaign {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(text, path, exc) from None
    return _Reader(text, path).read(data)


class _Reader:
    def __init__(self, text: str, path: Path) -> None:
        self.text, self.path, self.folder = text, path, path.resolve().parent

    def fail(self, message: str, *keys: str, hint: str | None = None) -> KirError:
        return located_error(self.text, self.path, message, keys, hint)

    def unknown(self, table: dict, allowed: set[str], *where: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(f"unknown key {key!r} in {'.'.join(where) or 'the campaign'}",
                                *where, key, hint=f"allowed: {', '.join(sorted(allowed))}")

    def typed(self, value: Any, kind: type, *keys: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"{'.'.join(keys)} must be a {kind.__name__}, got {value!r}", *keys)
        return value

    def file(self, value: Any, *keys: str) -> Path:
        found = self.folder / self.typed(value, str, *keys)
        if not found.is_file():
            raise self.fail(f"{'.'.join(keys)}: no such file {found}", *keys,
                            hint="paths are relative to the campaign file")
        return found

    def read(self, data: dict) -> CampaignConfig:
        self.unknown(data, TOP)
        kernels = [self.kernel(entry, i) for i, entry in
                   enumerate(self.tables(data.get("kernels"), "kernels"))]
        devices = [self.device(entry, i) for i, entry in
                   enumerate(self.tables(data.get("devices"), "devices"))]
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise self.fail("two devices share a name", "devices")
        budget = self.typed(data.get("budget", 24), int, "budget")
        if budget < 1:
            raise self.fail(f"budget must be at least 1, got {budget}", "budget")
        strategy = self.typed(data.get("strategy", "evolve"), str, "strategy")
        if strategy not in STRATEGIES:
            raise self.fail(f"unknown strategy {strategy!r}", "strategy",
                            hint=f"use one of {', '.join(STRATEGIES)}")
        cluster = self.typed(data.get("cluster", "ray"), str, "cluster")
        if cluster != "local" and cluster.partition(":")[0] != "ray":
            raise self.fail(f"unknown cluster {cluster!r}", "cluster",
                            hint='write "ray", "ray:HOST:PORT" or "local"')
        db = self.folder / self.typed(data["db"], str, "db") if "db" in data else None
        out = self.folder / self.typed(data.get("out", "campaign-out"), str, "out")
        return CampaignConfig(self.path, tuple(kernels), tuple(devices), cluster, budget,
                              self.typed(data.get("seed", 0), int, "seed"), strategy, db, out,
                              self.rules(data["rules"]) if "rules" in data else None)

    def rules(self, value: Any) -> tuple[str, ...]:
        from kir.driver.registry import load_registry

        if not isinstance(value, list) or not value or \
                not all(isinstance(v, str) for v in value):
            raise self.fail("rules must be a list of rule names", "rules")
        known = load_registry([])
        for name in value:
            if name not in known:
                raise self.fail(f"unknown rule {name!r}", "rules",
                                hint="`kir rules` lists them")
        return tuple(value)

    def tables(self, value: Any, key: str) -> list[dict]:
        if not value:
            raise self.fail(f"the campaign lists no {key}", key,
                            hint=f"add at least one [[{key}]] table")
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f"{key} must be [[{key}]] tables", key)
        return value

    def kernel(self, entry: dict, index: int) -> KernelEntry:
        self.unknown(entry, KERNEL_KEYS, "kernels")
        if "file" not in entry:
            raise self.fail(f"kernels entry {index + 1} has no file", "kernels")
        sizes = entry.get("sizes", [{}])
        if not isinstance(sizes, list) or not all(
                isinstance(s, dict) and all(isinstance(v, int) for v in s.values())
                for s in sizes) or not sizes:
            raise self.fail("sizes must be a list of tables of integers, e.g. "
                            "[{ rows = 64, cols = 1000 }]", "kernels", "sizes")
        spec = self.file(entry["spec"], "kernels", "spec") if "spec" in entry else None
        name = self.typed(entry["kernel"], str, "kernels", "kernel") if "kernel" in entry \
            else None
        return KernelEntry(self.file(entry["file"], "kernels", "file"),
                           tuple(dict(s) for s in sizes), spec, name)

    def device(self, entry: dict, index: int) -> DeviceEntry:
        self.unknown(entry, DEVICE_KEYS, "devices")
        for key in ("name", "resource"):
            if key not in entry:
                raise self.fail(f"devices entry {index + 1} has no {key}", "devices")
        target = self.typed(entry.get("target", "auto"), str, "devices", "target")
        if target not in ("auto", "metal", "cuda") and not target.startswith("model:"):
            raise self.fail(f"unknown device target {target!r}", "devices", "target",
                            hint="use auto, metal, cuda or model:PROFILE (model:apple-m1)")
        if target.startswith("model:"):
            from kir.cost.profiles import PROFILES, get_profile

            try:
                get_profile(target)
            except KirError:
                raise self.fail(f"unknown GPU profile in {target!r}", "devices", "target",
                                hint=f"choose one of {', '.join(PROFILES)}") from None
        actors = entry.get("actors")
        if actors is not None and self.typed(actors, int, "devices", "actors") < 1:
            raise self.fail("actors must be at least 1", "devices", "actors")
        return DeviceEntry(self.typed(entry["name"], str, "devices", "name"),
                           self.typed(entry["resource"], str, "devices", "resource"),
                           target, actors)
