"""This machine as a :class:`~kir.search.device.DeviceDescriptor`: what a worker announces
before it takes jobs, and what the tuning database files its verdicts under."""

from __future__ import annotations

import platform

from kir.search.db import kir_version
from kir.search.device import DeviceDescriptor


def os_name() -> str:
    """``macOS 15.1 arm64`` on a Mac (the OS release ships the Metal compiler), else
    ``Linux 6.8.0 x86_64``."""
    if platform.system() == "Darwin":
        release = platform.mac_ver()[0] or platform.release()
        return f"macOS {release} {platform.machine()}"
    return f"{platform.system()} {platform.release()} {platform.machine()}"


def mlx_version() -> str:
    """The installed MLX release, or "" without MLX."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return ""
    try:
        return version("mlx")
    except PackageNotFoundError:
        return ""


def describe_model(profile: str) -> DeviceDescriptor:
    """The cost model for ``profile`` (``apple-m1``...): its verdicts depend on kir only."""
    from kir.cost import get_profile

    name = f"model:{get_profile(profile).name}"
    return DeviceDescriptor(name, name, "", kir_version(), "")


def describe_gpu(target: str, runner: object | None = None) -> DeviceDescriptor:
    """This machine's GPU through MLX for ``target`` ("metal" or "cuda"), or, with a
    ``runner`` other than MLX's (the CPU emulator in tests), that runner on this machine."""
    from kir.measure.gpu.jobs import MLXRunner

    if runner is not None and not isinstance(runner, MLXRunner):
        return DeviceDescriptor(f"{type(runner).__name__}:{target}", target, "", kir_version(),
                                os_name())
    from kir.measure.mlx import mlx_device_name

    return DeviceDescriptor(mlx_device_name(target), target, mlx_version(), kir_version(),
                            os_name())
