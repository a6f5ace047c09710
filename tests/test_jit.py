"""numba's on-disk caches survive a change of the package's modules (they are dropped, not misread)."""

from __future__ import annotations

from groupings.jit import forget_caches_of_another_layout


def test_caches_of_another_layout_are_dropped_once(tmp_path):
    (tmp_path / "a.py").write_text("")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (cache / "a.f-1.py311.nbi").write_bytes(b"index")
    (cache / "a.f-1.py311.1.nbc").write_bytes(b"code")
    assert forget_caches_of_another_layout(tmp_path)  # no stamp yet: whoever wrote them is unknown
    assert not list(cache.glob("*.nb?"))
    (cache / "a.f-1.py311.nbi").write_bytes(b"index")
    assert not forget_caches_of_another_layout(tmp_path)  # same layout: kept
    assert (cache / "a.f-1.py311.nbi").exists()
    (tmp_path / "b.py").write_text("")  # a module appears: the layout changed
    assert forget_caches_of_another_layout(tmp_path)
    assert not (cache / "a.f-1.py311.nbi").exists()


def test_caches_are_dropped_when_any_module_changes(tmp_path):
    # a compiled caller keeps the inlined code of another module's function: only a content stamp notices the edit
    (tmp_path / "callee.py").write_text("X = 1\n")
    (tmp_path / "caller.py").write_text("")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    forget_caches_of_another_layout(tmp_path)
    (cache / "caller.f-1.py311.nbi").write_bytes(b"index")
    assert not forget_caches_of_another_layout(tmp_path)
    (tmp_path / "callee.py").write_text("X = 2\n")
    assert forget_caches_of_another_layout(tmp_path)
    assert not (cache / "caller.f-1.py311.nbi").exists()
