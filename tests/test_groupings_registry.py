"""Registration, discovery, parameters, controllers and delegations: how strategies join `groupings`."""

from __future__ import annotations

import numpy as np
import pytest

import groupings
from groupings import registry
from groupings.compiled.catalog import TABLE
from groupings.control import Controller
from groupings.params import Param, at_least_one, resolve, shown_default

COMPILED = [s.name for s in TABLE]  # the compiled catalogue, in its order


# --- a toy strategy with a controller and a delegation ---------------------------------------------------------


class ToyController(Controller):
    """Sends every key to worker `version mod workers`."""

    def __init__(self, workers: int, seed: int, params: dict) -> None:
        super().__init__(workers, seed, params["period"])
        self.params = params

    def step(self, report) -> bool:
        self.versions.install(None)
        return True

    def lookup(self, keys, version=None):
        v = self.version if version is None else version
        return np.full(len(keys), v % self.workers, dtype=np.int32)


class Toy:
    def __init__(self, workers, seed, params, controller):
        self.name, self.workers, self.seed, self.params = "toy", workers, seed, params
        self.controller = controller

    def route(self, keys, now=None):
        return self.controller.lookup(keys)

    def feedback(self, report):
        pass

    def resize(self, workers):
        self.workers = workers

    def stats(self):
        return {"version": self.controller.version}


class ToyDelegation:
    def __init__(self, workers, params):
        self.workers, self.params = workers, params


TOY_PARAMS = (
    Param("period", float, 0.5, None, "controller period (s)"),
    Param("fast", bool, False, None, "a flag"),
    Param("mode", str, "apm", None, "a choice", choices=("apm", "apdm")),
    Param("vw", int, lambda n, v: 2 * n, at_least_one, "derived from workers", shown="2n"),
)


@pytest.fixture
def toy():
    registry.register("toy", Toy, TOY_PARAMS, "a toy strategy", ToyController, ToyDelegation)
    yield "toy"
    registry._ENTRIES.pop("toy", None)


def test_make_gives_a_private_controller_when_none_is_passed(toy):
    g = groupings.make(toy, 4, seed=3)
    assert isinstance(g.controller, ToyController) and g.controller.sources == [g]
    assert g.route(np.arange(3, dtype=np.uint64)).tolist() == [0, 0, 0]


def test_sources_share_the_run_controller(toy):
    controller = groupings.make_controller(toy, 4, seed=1, period="0.25")
    a, b = (groupings.make(toy, 4, seed=s, controller=controller, period="0.25") for s in (1, 2))
    assert a.controller is b.controller is controller and controller.sources == [a, b]
    controller.step(None)
    assert a.route(np.arange(2, dtype=np.uint64)).tolist() == [1, 1] == b.route(np.arange(2)).tolist()
    assert controller.period_s == 0.25


def test_factory_controller_and_delegation_get_the_same_resolved_params(toy):
    given = {"fast": "yes", "mode": "APDM", "period": "2"}
    expected = {"period": 2.0, "fast": True, "mode": "apdm", "vw": 10}
    assert groupings.make(toy, 5, **given).params == expected
    assert groupings.make_controller(toy, 5, **given).params == expected
    delegation = groupings.make_delegation(toy, 5, **given)
    assert isinstance(delegation, ToyDelegation) and delegation.params == expected


def test_strategies_without_controller_or_delegation():
    assert groupings.make_controller("pkg", 4) is None
    assert groupings.make_delegation("lasg", 4, refresh=2) is None
    with pytest.raises(ValueError, match="takes no controller"):
        groupings.make("pkg", 4, controller=object())
    with pytest.raises(ValueError, match="unknown parameter"):
        groupings.make_controller("pkg", 4, bogus=1)


def test_a_controller_for_another_worker_count_is_refused(toy):
    with pytest.raises(ValueError, match="serves 3 workers"):
        groupings.make(toy, 4, controller=groupings.make_controller(toy, 3))


def test_names_order(toy):
    names = groupings.names()
    assert names[: len(COMPILED)] == COMPILED
    adaptive = [n for n in registry.ADAPTIVE_ORDER if n in names]
    assert names[len(COMPILED) : len(COMPILED) + len(adaptive)] == adaptive
    rest = names[len(COMPILED) + len(adaptive) :]
    assert rest == sorted(rest) and "toy" in rest


def test_describe(toy):
    info = groupings.describe(toy)
    assert info["doc"] == "a toy strategy" and info["controller"] and info["delegation"]
    assert [(p["name"], p["type"], p["default"]) for p in info["params"]] == [
        ("period", "float", 0.5),
        ("fast", "bool", False),
        ("mode", "str", "apm"),
        ("vw", "int", "2n"),
    ]
    assert info["params"][2]["choices"] == ["apm", "apdm"]
    assert groupings.describe(toy, workers=6)["params"][3]["default"] == 12
    assert groupings.describe("dc")["params"][0]["default"] == "1/(5n)"
    assert groupings.describe("dc", workers=10)["params"][1]["default"] == 200
    for name in groupings.names():
        info = groupings.describe(name)
        assert isinstance(info["doc"], str) and info["doc"]
        assert all({"name", "type", "default", "help"} <= set(p) for p in info["params"])


def test_unknown_names_and_bad_registrations(toy):
    with pytest.raises(ValueError, match="unknown grouping 'nope'"):
        groupings.describe("nope")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("toy", lambda n, s, p, c: None)
    for bad in ("Bad", "two words", "", 3):
        with pytest.raises(ValueError):
            registry.register(bad, Toy)
    with pytest.raises(ValueError, match="twice"):
        registry.register("toy2", Toy, (TOY_PARAMS[0], TOY_PARAMS[0]))
    with pytest.raises(ValueError):
        registry.register("toy2", Toy, ("period",))
    assert "toy2" not in groupings.names()


# --- discovery of the adaptive package ---------------------------------------------------------------------------


def test_every_adaptive_module_is_imported():
    import groupings.adaptive as adaptive

    assert "groupings.adaptive.lasg" in adaptive.STRATEGY_MODULES
    assert "lasg" in groupings.names()


def test_a_broken_module_makes_discovery_fail_loudly(tmp_path):
    package = tmp_path / "toy_strategies"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text(
        "from groupings import registry\nregistry.register('toygood', lambda n, s, p, c: None, doc='ok')\n"
    )
    (package / "zbroken.py").write_text("raise RuntimeError('half written')\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ImportError, match="toy_strategies.zbroken.*half written"):
            registry.import_submodules("toy_strategies", [str(package)])
        assert "toygood" in groupings.names()  # modules before the broken one did register
    finally:
        sys.path.remove(str(tmp_path))
        registry._ENTRIES.pop("toygood", None)
        for name in [m for m in sys.modules if m.startswith("toy_strategies")]:
            del sys.modules[name]


# --- parameters ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, expected",
    [
        (True, True),
        ("true", True),
        (" Yes ", True),
        ("1", True),
        (1, True),
        (np.bool_(False), False),
        ("off", False),
        ("0", False),
        (0, False),
    ],
)
def test_bool_params(given, expected):
    assert Param("flag", bool, False).coerce(given) is expected


@pytest.mark.parametrize("given", ["maybe", 2, 0.5, None, "10"])
def test_bad_bool_params(given):
    with pytest.raises(ValueError, match="flag must be true or false"):
        Param("flag", bool, False).coerce(given)


def test_choice_params():
    p = Param("utility", str, "apm", None, "", choices=("apm", "apdm"))
    assert p.coerce(" APDM ") == "apdm"
    with pytest.raises(ValueError, match=r"utility must be one of apm\|apdm"):
        p.coerce("mpa")
    with pytest.raises(ValueError):
        p.coerce(3)
    assert Param("label", str, "x").coerce(" free text ") == "free text"


def test_param_declarations_are_checked():
    with pytest.raises(ValueError):
        Param("x", list, [])
    with pytest.raises(ValueError):
        Param("x", int, 1, choices=("a",))
    with pytest.raises(ValueError):
        Param("x", str, "c", choices=("a", "b"))  # the default must be a valid value
    with pytest.raises(ValueError):
        Param("not a name", int, 1)


def test_unknown_param_is_one_line_naming_it_and_the_valid_ones():
    with pytest.raises(ValueError) as err:
        resolve("toy", TOY_PARAMS, 4, {"perod": 1})
    message = str(err.value)
    assert "\n" not in message and "'perod'" in message
    assert all(p.name in message for p in TOY_PARAMS)


def test_rules_see_the_values_before_them():
    declared = (
        Param("lo", int, 1),
        Param("hi", int, lambda n, v: v["lo"] + n, lambda x, n, v: None if x > v["lo"] else "must exceed lo"),
    )
    assert resolve("t", declared, 3, {"lo": 5}) == {"lo": 5, "hi": 8}
    with pytest.raises(ValueError, match="hi of grouping t must exceed lo"):
        resolve("t", declared, 3, {"lo": 5, "hi": 2})
    assert shown_default(declared[1], declared) == "depends on workers"
    assert shown_default(declared[1], declared, workers=2) == 3
