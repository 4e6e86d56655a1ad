"""``@frozen_dataclass`` behaves like ``@dataclass(frozen=True)``: the same class written both ways,
compared operation by operation."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from gpudoctor.records import frozen_dataclass


@dataclass(frozen=True)
class Std:
    name: str
    value: float = 0.0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    cache: int = field(default=0, hash=False)


@frozen_dataclass
class Ours:
    name: str
    value: float = 0.0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    cache: int = field(default=0, hash=False)


@frozen_dataclass
class OursChild(Ours):
    extra: int = 1


@frozen_dataclass
class Node:
    label: str
    children: list = field(default_factory=list)


NAN = float("nan")
CASES = [
    (("a",), ("a",)),
    (("a", 1.0), ("a", 2.0)),
    (("a", 1.0, ("x",)), ("a", 1.0, ("x",))),
    (("a", 1.0, (), "note one"), ("a", 1.0, (), "note two")),  # compare=False
    (("a", 1.0, (), "", "s1"), ("a", 1.0, (), "", "s2")),  # repr=False, still compared
    (("a", 1.0, (), "", "", 1), ("a", 1.0, (), "", "", 2)),  # hash=False, still compared
    (("a", NAN), ("a", NAN)),  # the same NaN object: tuple comparison finds it equal
    (("a", float("nan")), ("a", float("nan"))),  # two NaN objects: not equal
]


@pytest.mark.parametrize(("left", "right"), CASES)
def test_eq_hash_repr_as_the_standard_decorator(left, right):
    std_l, std_r, our_l, our_r = Std(*left), Std(*right), Ours(*left), Ours(*right)
    assert (our_l == our_r) == (std_l == std_r)
    assert (our_l != our_r) == (std_l != std_r)
    assert hash(our_l) == hash(std_l)
    assert (hash(our_l) == hash(our_r)) == (hash(std_l) == hash(std_r))
    assert repr(our_l) == repr(std_l).replace("Std(", "Ours(")


def test_frozen_and_still_a_dataclass():
    o = Ours("a", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del o.name  # type: ignore[misc]
    assert dataclasses.is_dataclass(o)
    assert dataclasses.replace(o, value=2.0) == Ours("a", 2.0)
    assert dataclasses.asdict(o)["name"] == "a"
    assert [f.name for f in dataclasses.fields(o)] == [f.name for f in dataclasses.fields(Std)]
    assert pickle.loads(pickle.dumps(o)) == o
    assert Ours.__match_args__ == Std.__match_args__
    assert len({Ours("a"), Ours("a"), Ours("b")}) == 2


def test_other_classes_never_equal():
    assert Ours("a") != Std("a")
    assert Ours("a").__eq__(Std("a")) is NotImplemented
    assert Ours("a") != OursChild("a")  # a subclass instance is another class, as with dataclass
    assert OursChild("a", extra=1) != OursChild("a", extra=2)
    assert repr(OursChild("a")).startswith("OursChild(name='a'") and repr(OursChild("a")).endswith("extra=1)")


def test_recursive_repr_is_guarded():
    n = Node("root")
    n.children.append(n)
    assert repr(n) == "Node(label='root', children=[...])"


def test_own_eq_hash_or_repr_is_refused():
    with pytest.raises(TypeError, match="defines __repr__"):

        @frozen_dataclass
        class Custom:
            x: int

            def __repr__(self) -> str:
                return "custom"


def _package_frozen_classes():
    import importlib
    import pkgutil

    import gpudoctor
    from gpudoctor import records

    for mod in pkgutil.walk_packages(gpudoctor.__path__, "gpudoctor."):
        if ".probe._" not in mod.name and not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)
    out, stack = set(), [object]
    while stack:
        cls = stack.pop()
        subs = type.__subclasses__(cls) if issubclass(cls, type) else cls.__subclasses__()
        for sub in subs:
            if sub not in out:
                out.add(sub)
                stack.append(sub)
    return [c for c in out if dataclasses.is_dataclass(c) and c.__eq__ is records._eq]


def test_every_package_class_compares_and_shows_its_own_fields():
    """Subclasses in the package (decorated or not) never compare on a parent's field list."""
    classes = _package_frozen_classes()
    assert len(classes) > 150
    for cls in classes:
        fields = dataclasses.fields(cls)
        assert cls.__frozen_compare__ == tuple(f.name for f in fields if f.compare), cls
        assert cls.__frozen_repr__ == tuple(f.name for f in fields if f.repr), cls
        assert cls.__match_args__ == tuple(f.name for f in fields if f.init and not f.kw_only), cls


@pytest.mark.parametrize("name", ["case01-driver-470-torch-cu121.json", "gpu-driver-550-cpu-torch.json"])
def test_real_facts_survive_json_pickle_and_copies(name):
    import copy
    import json
    from pathlib import Path

    from gpudoctor.facts import Facts

    path = Path(__file__).parent / "fixtures" / "facts" / name
    facts = Facts.from_json(json.loads(path.read_text()))
    again = Facts.from_json(json.loads(json.dumps(facts.to_json(redact=False))))
    assert facts.domains and again.domains == facts.domains
    for value in facts.domains.values():
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value and copy.copy(value) == value
        if dataclasses.is_dataclass(value):
            assert dataclasses.replace(value) == value
            try:
                expected = hash(value)
            except TypeError:  # a field holds a dict: unhashable, as with @dataclass(frozen=True)
                continue
            assert hash(pickle.loads(pickle.dumps(value))) == expected


def test_replace_copy_and_match_on_a_subclass_as_the_standard_decorator():
    import copy

    child = OursChild("a", 1.0, extra=5)
    moved = dataclasses.replace(child, extra=6)
    assert type(moved) is OursChild and moved == OursChild("a", 1.0, extra=6) and moved != child
    assert copy.deepcopy(child) == child and pickle.loads(pickle.dumps(child)) == child
    assert hash(copy.copy(child)) == hash(child)
    match child:
        case OursChild("a", 1.0, (), "", "", 0, extra):
            assert extra == 5
        case _:
            pytest.fail("positional match over the inherited fields failed")
