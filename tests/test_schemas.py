"""Published JSON Schemas equal what the code generates; Facts JSON round-trips for generated values."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _foundation import validator
from conftest import FIXTURES
from gpudoctor.facts import Facts, Unavailable, registered_domains
from gpudoctor.facts.base import _hints, _is_union
from gpudoctor.schemas import generated_schemas, published_schema

FACTS_VALIDATOR = validator("facts.schema.json")


@pytest.mark.parametrize(
    "name", ["facts.schema.json", "report.schema.json", "explain.schema.json", "watch.schema.json"]
)
def test_published_schema_equals_generated(name):
    assert published_schema(name) == generated_schemas()[name], "regenerate with: python -m gpudoctor.schemas"


def test_every_domain_is_in_the_facts_schema():
    props = published_schema("facts.schema.json")["properties"]["domains"]["properties"]
    assert set(props) == set(registered_domains())


@pytest.mark.parametrize("path", sorted((FIXTURES / "facts").glob("*.json")), ids=lambda p: p.name)
def test_hand_written_snapshots_validate(path):
    FACTS_VALIDATOR.validate(json.loads(path.read_text()))


def test_schema_rejects_what_from_json_rejects():
    bad = {
        "schema_version": 1,
        "domains": {"shm": {"path": "/dev/shm", "mounted": "yes", "total_bytes": 1, "free_bytes": 1}},
    }
    assert not FACTS_VALIDATOR.is_valid(bad)
    assert not FACTS_VALIDATOR.is_valid({"schema_version": 3, "domains": {}})
    assert FACTS_VALIDATOR.is_valid({"schema_version": 1, "domains": {}})  # older snapshots stay valid


# ----------------------------------------------------------------- generated values

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def strategy_for(tp: typing.Any) -> st.SearchStrategy:
    """A strategy for any facts field type (the same type grammar base.py encodes)."""
    if tp is type(None):
        return st.none()
    if tp is Unavailable:
        return st.builds(Unavailable, text)
    if _is_union(tp):
        return st.one_of([strategy_for(a) for a in typing.get_args(tp)])
    origin = typing.get_origin(tp)
    if origin is tuple:
        return st.lists(strategy_for(typing.get_args(tp)[0]), max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(text, strategy_for(typing.get_args(tp)[1]), max_size=3)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return st.builds(tp, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp) if f.init})
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is str:
        return text
    raise TypeError(f"no strategy for {tp!r}")


facts_strategy = st.builds(
    lambda domains, version: Facts(
        domains=domains, gpudoctor_version=version, collected_at="2026-11-30T00:00:00+00:00"
    ),
    st.fixed_dictionaries(
        {},
        optional={
            name: st.one_of(strategy_for(cls), strategy_for(Unavailable)) for name, cls in registered_domains().items()
        },
    ),
    text,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts_strategy)
def test_facts_json_round_trip_and_schema(facts):
    doc = facts.to_json(redact=False)
    FACTS_VALIDATOR.validate(doc)
    again = Facts.from_json(json.loads(json.dumps(doc)))
    assert again.domains == facts.domains
    assert again.gpudoctor_version == facts.gpudoctor_version


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts_strategy)
def test_redacted_snapshot_still_matches_the_schema(facts):
    doc = facts.to_json(redact=True)
    FACTS_VALIDATOR.validate(doc)
    assert Facts.from_json(doc).domains.keys() == facts.domains.keys()


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(registered_domains())), st.data())
def test_each_domain_round_trips_alone(name, data):
    value = data.draw(strategy_for(registered_domains()[name]))
    facts = Facts(domains={name: value})
    assert Facts.from_json(json.loads(json.dumps(facts.to_json(redact=False)))).get(name) == value
