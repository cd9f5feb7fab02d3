"""pytest plugin: run tests of MLX Metal kernels on a machine without Metal.

* ``pytest --emulate-metal``: for the whole session, ``mx.fast.metal_kernel`` builds kernels
  that run on kir's CPU emulator and ``mx.metal.is_available()`` is True, from before test
  modules are imported (so kernels built at import time are emulated too).
* the ``emulated_metal`` fixture does the same for one test, for modules the test imports or
  kernels it builds itself.

Registered as the ``kir_emulate`` plugin (entry point ``pytest11``); without the package
installed, ``-p kir.emulate.pytest_plugin`` loads it.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest


def pytest_addoption(parser: Any) -> None:
    parser.getgroup("kir").addoption(
        "--emulate-metal", action="store_true", default=False,
        help="run mx.fast.metal_kernel kernels on kir's CPU emulator where MLX has no Metal")


def pytest_configure(config: Any) -> None:
    if config.getoption("--emulate-metal"):
        from kir.emulate.patch import emulate_metal_kernels

        context = emulate_metal_kernels()
        context.__enter__()
        config._kir_emulate_metal = context


def pytest_unconfigure(config: Any) -> None:
    context = getattr(config, "_kir_emulate_metal", None)
    if context is not None:
        context.__exit__(None, None, None)


@pytest.fixture
def emulated_metal() -> Iterator[Any]:
    """``mx.fast.metal_kernel`` on kir's CPU emulator for this test (yields the factory)."""
    from kir.emulate.patch import emulate_metal_kernels

    with emulate_metal_kernels() as factory:
        yield factory
