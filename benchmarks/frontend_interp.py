"""Frontend and interpreter speed: parse+lower of examples/flash_attn.cu, and the interpreter
on the flash attention example at B=1, H=4, N=256, D=64.

    python benchmarks/frontend_interp.py [--repeat 20]

Prints medians; BENCHMARKS.md records the figures with the date and machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from kir.frontends.cuda import load_cuda

from kir.driver.load import load_kernel
from kir.interp import run_kernel
from kir.spec import find_spec, load_spec

ROOT = Path(__file__).resolve().parent.parent
FLASH = ROOT / "examples" / "flash_attn.cu"


def median_seconds(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    text = FLASH.read_text()
    bound = load_spec(find_spec(FLASH)).bind({"B": 1, "H": 4, "N": 256, "D": 64})
    launch, templates = bound.launch(), bound.template_values()

    def parse():
        load_cuda(text, str(FLASH), template_values=templates, launch=launch)

    parse()  # the first call builds (or loads) the cached lark parser
    med, best = median_seconds(parse, args.repeat)
    print(f"parse+lower flash_attn.cu: median {med * 1e3:.1f} ms, min {best * 1e3:.1f} ms "
          f"({args.repeat} runs, parser already built)")

    loaded = load_kernel(FLASH, sizes={"B": 1, "H": 4, "N": 256, "D": 64})
    inputs = loaded.bound.make_inputs(0)
    med, best = median_seconds(lambda: run_kernel(loaded.kernel, inputs, loaded.bound.sizes),
                               max(3, args.repeat // 5))
    print(f"interpreter flash_attn B=1 H=4 N=256 D=64: median {med:.2f} s, min {best:.2f} s")
    print(f"machine: {platform.machine()} {platform.processor() or ''} "
          f"python {platform.python_version()}")


if __name__ == "__main__":
    main()
