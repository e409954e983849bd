"""Internal: the installed version, in a module of its own so any module may read it
without importing the package (and the ``Queue`` facade with it)."""

__version__ = "0.1.0"
