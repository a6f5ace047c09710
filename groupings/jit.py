"""How routing code is compiled: numba, cached on disk, and without reference counting on the hot path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from numba import njit
from numba.core.cpu import CPUTargetOptions

from groupings.digest import source_digest


def forget_caches_of_another_layout(root: Path = Path(__file__).parent, also: tuple[Path, ...] = ()) -> bool:
    """Drop numba's on-disk caches below `root` when its modules are not the ones that wrote them; True if dropped.

    Two ways a cache goes stale without numba noticing: a cache index pickles the types of its arguments by module
    path and is unpickled before the source stamp is checked (after modules move, ModuleNotFoundError instead of a
    recompile), and a function checks only its own file's stamp, so one that inlined an edited function of another
    module keeps the old code. A stamp of every module's name and content beside the caches catches both; `also`
    names the folders of other modules the functions below `root` call, whose content enters the stamp too.
    """
    stamp = source_digest([root, *also])
    marker = root / "__pycache__" / "numba-layout"
    try:
        if marker.is_file() and marker.read_text() == stamp:
            return False
        for cache in [*root.rglob("*.nbi"), *root.rglob("*.nbc")]:
            cache.unlink(missing_ok=True)
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(stamp)
    except OSError:  # a read-only install keeps whatever caches it has
        return False
    return True


forget_caches_of_another_layout()

# `_nrt` is numba's own (underscored) switch; should a release drop it, kernels still compile, only slower
_NO_REFCOUNT = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}


def hot(fn: Callable | None = None, *, inline: bool = False) -> Callable:
    """Compile a routing function: no runtime reference counting, so it must not allocate or keep arrays.

    Every field read from the state tuple would otherwise cost an atomic increment and decrement per message,
    which numba cannot prune across branches: a tenfold slowdown of the per-tuple loops.
    """
    options = {"cache": True, **_NO_REFCOUNT}
    if inline:
        options["inline"] = "always"
    return njit(**options) if fn is None else njit(**options)(fn)
