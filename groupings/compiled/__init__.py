"""The compiled strategies (kg, sg, pkg, potc, porc, chbl, dc, wc, rr): numba kernels that compose a candidate set
with a selector over a shared state table, as Storm's PartialKeyGrouping composes an assignment creator and a
target selector. Importing `catalog.py` registers them; the registry imports it on its first name lookup (the
package itself imports nothing, so that a module such as `spacesaving` may use `compiled.state` first)."""
