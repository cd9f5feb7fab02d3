"""Every rule at every site with every parameter value, over the examples: what it builds.

Prints one line per rule: how many (example, site, parameters) applications succeeded, how
many were refused, and a hash of every success's kernel fingerprint, with the time spent.
Two commits that print the same success hashes build the same kernels; refusal counts may
differ when a rule stops listing sites it cannot apply (rule protocol v2), which is the point
of that change. ``--json FILE`` writes every application for a detailed comparison.

    python benchmarks/rules_digest.py [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SIZES = {"flash_attn": {"H": 1, "N": 64}, "softmax": {"rows": 8, "cols": 128},
         "layernorm": {"rows": 8, "cols": 128}, "sgemm": {}, "reduce": {},
         "selective_scan": {}}


def applications(rule, kernel, ctx):
    """(site, params, fingerprint or None) for every site and parameter combination."""
    from kir.ir import Kernel
    from kir.rules import Step, apply_step

    for site in rule.sites(kernel):
        spaces = list(getattr(rule, "params", ()))
        for values in itertools.product(*(space.choices for space in spaces)):
            params = tuple((space.name, value) for space, value in zip(spaces, values))
            step = Step(rule.name, site, params, rule.site_key)
            try:
                new = apply_step(kernel, step, {rule.name: rule}, ctx)
            except Exception as exc:  # noqa: BLE001 - a crash is recorded, not fatal
                yield site, params, f"crash {type(exc).__name__}"
                continue
            yield site, params, new.fingerprint() if isinstance(new, Kernel) else None


def main(argv: list[str] | None = None) -> int:
    from kir.backends import TARGETS

    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.rules import context_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every application to this file")
    args = parser.parse_args(argv)
    from kir.rules import apply_trace
    from kir.search.hints import hints

    registry = load_registry(plugins=False)
    # The examples as written, and as each hint (known CUDA practice) leaves them: the later
    # rules of a recipe only find their sites in kernels earlier rules made.
    kernels = {}
    for name, sizes in SIZES.items():
        item = load_kernel(EXAMPLES / f"{name}.cu", sizes=sizes)
        ctx = context_for(item, TARGETS["metal"])
        kernels[name] = (item.kernel, ctx)
        for hint in hints(item.kernel, registry, ctx):
            kernels[f"{name}+{hint.name}"] = (
                apply_trace(item.kernel, hint.steps, registry, ctx).kernel, ctx)
    everything = {}
    total = time.perf_counter()
    for rule_name in sorted(registry):
        rule = registry[rule_name]
        started = time.perf_counter()
        ok = refused = 0
        digest = hashlib.sha256()
        for name, (kernel, ctx) in kernels.items():
            for site, params, fp in applications(rule, kernel, ctx):
                everything[f"{rule_name} {name} {site} {params}"] = fp
                if fp is None or fp.startswith("crash"):
                    refused += 1
                else:
                    ok += 1
                    digest.update(f"{name} {site} {params} {fp}".encode())
        print(f"{rule_name}: {ok} built {digest.hexdigest()[:12]}, {refused} refused, "
              f"{time.perf_counter() - started:.2f} s", flush=True)
    print(f"total {time.perf_counter() - total:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
