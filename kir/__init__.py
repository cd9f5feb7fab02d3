"""kir: CUDA kernels in, validated and tuned MLX kernels (Metal, or CUDA) out.

    import kir
    k = kir.load("softmax.cu")            # its spec beside it, or spec=path / TOML / dict
    result = k.search(target="model", budget=20)
    softmax = result.module()             # the MLX function, in memory
    result.write("softmax_kir.py")

``import kir`` stays light: the API (:mod:`kir.api`), and with it numpy, lark and MLX, is
imported when first used.
"""

from pathlib import Path

from kir.version import __version__

__all__ = ["__version__", "examples_dir", "load", "LoadedKernel", "SearchResult"]


def examples_dir() -> Path:
    """The folder of the example kernels installed with kir (``kir examples`` copies it)."""
    from kir.driver.examples import examples_dir as folder

    return folder()

_API = {"load", "LoadedKernel", "SearchResult", "RunResult", "ModuleBuild"}


def __getattr__(name: str):
    if name in _API:
        import kir.api

        return getattr(kir.api, name)
    raise AttributeError(f"module 'kir' has no attribute {name!r}")
