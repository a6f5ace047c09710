"""The compiled strategies (kg, sg, pkg, potc, porc, chbl, dc, wc, rr): numba kernels that compose a candidate set
with a selector over a shared state table, as Storm's PartialKeyGrouping composes an assignment creator and a
target selector. Importing the package registers them (`catalog.py`)."""

from . import catalog  # noqa: F401  (registers the catalogue)
