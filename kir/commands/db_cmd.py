"""``kir db list|show KEY|export|merge FILE...``: look into the tuning database the search
fills, and combine databases filled on other machines into it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kir.errors import KirError


def register(sub) -> None:
    p = sub.add_parser("db", help="list, show, export or merge tuning databases",
                       description="`list`: every (kernel, sizes, target, device, version) the "
                                   "database holds results for. `show KEY`: that key's "
                                   "evaluations, fastest first (KEY is the number `list` "
                                   "prints, a kernel fingerprint prefix or a kernel name). "
                                   "`export [KEY]`: all rows as JSON or CSV on stdout. "
                                   "`merge FILE...` (or `import`): copy the rows of other "
                                   "tuning databases into this one; a candidate both hold "
                                   "with different verdicts is a conflict, reported, and "
                                   "resolved by --prefer.")
    p.add_argument("action", choices=["list", "show", "export", "merge", "import"])
    p.add_argument("key", nargs="*", metavar="KEY|FILE",
                   help="for show/export: list number, fingerprint or name; for merge/import: "
                        "the databases to copy in")
    p.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache dir)")
    p.add_argument("--format", choices=["json", "csv"], default="json",
                   help="export format (default json)")
    p.add_argument("--limit", type=int, default=50, help="rows `show` prints (default 50)")
    p.add_argument("--prefer", choices=["existing", "incoming", "newer"], default="existing",
                   help="merge: which verdict a conflict keeps (default: the one already here)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.search import TuningDB, default_db_path

    path = Path(args.db) if args.db else default_db_path()
    if args.action in ("merge", "import"):
        return merge(path, args.key, args.prefer)
    if len(args.key) > 1:
        raise KirError(f"`kir db {args.action}` takes one KEY, got {len(args.key)}",
                       hint="`kir db list` numbers the keys")
    args.key = args.key[0] if args.key else None
    if not path.exists():
        raise KirError(f"no tuning database at {path}",
                       hint="`kir compile FILE --search` creates it; pass --db for another file")
    with TuningDB(path, read_only=True) as db:  # looking changes nothing
        if args.action == "list":
            return list_keys(db)
        if args.action == "show":
            if not args.key:
                raise KirError("`kir db show` needs a KEY", hint="`kir db list` numbers them")
            return show_key(db, args.key, args.limit)
        key = find_key(db, args.key).key if args.key else None
        print(db.export(args.format, key), end="")
        return 0


def merge(path: Path, files: list[str], prefer: str) -> int:
    """Merge ``files`` into the database at ``path`` (created when missing) and report:
    rows added, duplicates, and each conflict. Exit 0 (conflicts are findings, not
    failures: the report names them)."""
    from kir.search import TuningDB
    from kir.search.db_merge import MergeReport, merge_into

    if not files:
        raise KirError("`kir db merge` needs the databases to copy in",
                       hint="kir db merge OTHER.db [MORE.db ...] [--db TARGET]")
    report = MergeReport()
    with TuningDB(path) as db:
        for name in files:
            merge_into(db, Path(name), prefer, report)
    print(f"merged {len(files)} database(s) into {path}: {report.added} rows added, "
          f"{report.duplicates} duplicates, {len(report.conflicts)} conflicts "
          f"({report.keys} keys read)")
    for conflict in report.conflicts:
        print(f"  conflict ({conflict.kind}): {conflict.describe()}")
    return 0


def _ms(value: float | None, modelled: bool = False) -> str:
    """A time for the listing: ``0.2177 ms``, marked when the cost model made it up."""
    if value is None:
        return "—"
    return f"{value:.4g} ms" + (" (modelled)" if modelled else "")


def _modelled(key) -> bool:
    """Whether a key's times come from the cost model (its target is ``model:PROFILE``)."""
    return key.target.startswith("model")


def list_keys(db) -> int:
    infos = db.runs()
    if not infos:
        print(f"{db.path}: empty")
        return 0
    print(f"{'#':>3}  {'kernel':<18} {'fingerprint':<16}  {'target':<15} {'device':<16} "
          f"{'evals':>5} {'ok':>4}  {'best':>11}  {'baseline':>11}  sizes")
    for number, info in enumerate(infos, 1):
        k = info.key
        mark = "*" if _modelled(k) else " "
        print(f"{number:>3}  {k.kernel_name[:18]:<18} {k.kernel_fp:<16}  {k.target[:15]:<15} "
              f"{k.device[:16]:<16} {info.count:>5} {info.ok:>4}  {_ms(info.best_ms):>11}"
              f"{mark} {_ms(info.baseline_ms):>11}{mark} {k.sizes}")
    print(f"\n{len(infos)} keys in {db.path}")
    if any(_modelled(i.key) for i in infos):
        print("* modelled (the Apple-GPU cost model), not measured")
    return 0


def find_key(db, text: str):
    """The KeyInfo named by a list number, a fingerprint prefix or a kernel name."""
    infos = db.runs()
    if text.isdigit() and 1 <= int(text) <= len(infos):
        return infos[int(text) - 1]
    found = [i for i in infos if i.key.kernel_fp.startswith(text) or i.key.kernel_name == text]
    if not found:
        raise KirError(f"no key {text!r} in {db.path}", hint="`kir db list` shows the keys")
    if len(found) > 1:
        raise KirError(f"{text!r} names {len(found)} keys in {db.path}",
                       hint="use the number `kir db list` prints")
    return found[0]


def show_key(db, text: str, limit: int) -> int:
    info = find_key(db, text)
    k = info.key
    print(f"kernel {k.kernel_name} ({k.kernel_fp}), sizes {k.sizes}")
    print(f"target {k.target} on {k.device}, kir {k.version}"
          + (f", MLX {k.mlx}" if k.mlx else "") + (f", {k.os}" if k.os else ""))
    modelled = _modelled(k)
    print(f"{info.count} evaluations, {info.ok} valid, best {_ms(info.best_ms, modelled)}, "
          f"unrewritten {_ms(info.baseline_ms, modelled)}, last "
          f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(info.last))}\n")
    rows = sorted(db.rows(k), key=lambda r: (r.evaluation.time_ms is None,
                                             r.evaluation.time_ms or 0.0, len(r.genome)))
    for row in rows[:limit]:
        ev = row.evaluation
        steps = " ".join(row.genome) or "(unrewritten)"
        what = _ms(ev.time_ms, modelled or bool(ev.details.get("modelled"))) if ev.ok \
            else f"{ev.status}: {ev.error[:60]}"
        print(f"  {row.fingerprint}  {what:<28}  {steps}")
    if len(rows) > limit:
        print(f"  ... {len(rows) - limit} more (--limit)")
    if db.damaged:
        print(f"  {db.damaged} damaged row(s) not shown (a search judges those candidates "
              "again and rewrites them)")
    return 0
