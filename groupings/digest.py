"""A digest of a tree of Python modules, by path and content: how numba's caches (`groupings.jit`) and the committed
quick numbers (`experiments.provenance`) tell that the code under them is still the code that made them. No numba
here, so that asking costs nothing but reading the files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path


def source_digest(folders: Sequence[Path], base: Path | None = None) -> str:
    """sha256 (hex) over every .py file below `folders`, in path order, each as its path relative to `base` (the
    folders' common parent by default) and its bytes; files below a hidden folder (a virtualenv, say) are left out."""
    folders = [Path(f) for f in folders]
    base = Path(base) if base is not None else Path(os.path.commonpath([str(f) for f in folders]))
    digest = hashlib.sha256()
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")
                       if not any(part.startswith(".") for part in p.relative_to(base).parts)):
        digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
