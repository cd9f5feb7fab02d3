"""``kir db list|show KEY|export``: look into the tuning database the search fills."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kir.errors import KirError


def register(sub) -> None:
    p = sub.add_parser("db", help="list, show or export the tuning database",
                       description="`list`: every (kernel, sizes, target, device, version) the "
                                   "database holds results for. `show KEY`: that key's "
                                   "evaluations, fastest first (KEY is the number `list` "
                                   "prints, a kernel fingerprint prefix or a kernel name). "
                                   "`export [KEY]`: all rows as JSON or CSV on stdout.")
    p.add_argument("action", choices=["list", "show", "export"])
    p.add_argument("key", nargs="?", help="for show/export: list number, fingerprint or name")
    p.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache dir)")
    p.add_argument("--format", choices=["json", "csv"], default="json",
                   help="export format (default json)")
    p.add_argument("--limit", type=int, default=50, help="rows `show` prints (default 50)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kir.search import TuningDB, default_db_path

    path = Path(args.db) if args.db else default_db_path()
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
    print(f"target {k.target} on {k.device}, kir {k.version}")
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
