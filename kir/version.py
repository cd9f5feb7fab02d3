"""kir's version: one place for the package metadata, ``kir --version``, ``kir.__version__``
and the tuning database's keys (a new kir may build other kernels)."""

__version__ = "0.1.0"
