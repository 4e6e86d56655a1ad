"""The check catalogue (``data/checks.toml``) is the single source of the built-in checks' metadata."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from gpudoctor import catalogue
from gpudoctor.areas import AREAS, area_for
from gpudoctor.gate import BUILTIN_DEEP_ONLY, BUILTIN_GATE_IDS
from gpudoctor.model import Check
from gpudoctor.registry import CHECK_GROUP, catalogued, load_registry, sort_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _declared_entry_points() -> dict[str, str]:
    doc = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return dict(doc["project"]["entry-points"][CHECK_GROUP])


def test_every_row_has_an_entry_point_and_every_builtin_entry_point_a_row():
    declared = _declared_entry_points()
    installed = {ep.name for ep in metadata.entry_points(group=CHECK_GROUP) if ep.value.startswith("gpudoctor.")}
    rows = set(catalogue.rows())
    assert rows - set(declared) == set(), "rows without an entry point in pyproject.toml"
    assert set(declared) - rows == set(), "built-in entry points without a row in data/checks.toml"
    assert installed == set(declared), "the installed entry points differ from pyproject.toml (reinstall -e .)"


def test_rows_are_well_formed_and_agree_with_what_each_check_needs():
    rows = catalogue.rows()
    orders = [r.order for r in rows.values()]
    assert len(set(orders)) == len(orders) and orders == sorted(orders)
    checks = load_registry(load_fixes=False).checks
    for cid, r in rows.items():
        assert r.area in AREAS and area_for(cid) == r.area, cid
        check = checks[cid]
        if r.probe == "light" or r.gate == "deep":
            # a light probe level only means something for a check that reads the targets
            assert "targets" in check.needs or r.gate == "deep", cid
        if r.gate == "light" and "targets" in check.needs:
            assert r.probe == "light", f"{cid}: the light gate cannot run a full-probe check"


def test_the_check_modules_carry_no_metadata_of_their_own():
    """A built-in Check declares id, title, needs and evaluate; area, tags and probe level come from the row."""
    for ep in metadata.entry_points(group=CHECK_GROUP):
        if not ep.value.startswith("gpudoctor."):
            continue
        check = ep.load()
        assert (check.area, check.tags, check.probe_level) == ("", (), "full"), ep.name


def test_the_registry_order_the_gate_and_the_areas_follow_the_table():
    reg = load_registry(load_fixes=False)
    own = list(catalogue.rows())
    assert [cid for cid in reg.checks if cid in own] == own
    assert BUILTIN_GATE_IDS == {cid for cid, r in catalogue.rows().items() if r.gate}
    assert BUILTIN_DEEP_ONLY == {cid for cid, r in catalogue.rows().items() if r.gate == "deep"}
    for cid in own:
        assert ("gate" in reg.checks[cid].tags) == (cid in BUILTIN_GATE_IDS), cid
        assert reg.checks[cid].probe_level == catalogue.rows()[cid].probe, cid
    # gpudoctor's own findings and plug-ins: after the headline, plug-ins after their family's built-ins
    assert sort_key("cuda.available") < sort_key("gpudoctor.plugins") < sort_key("platform.container")
    assert sort_key("cudnn.load") < sort_key("cudnn.acme") < sort_key("torch.compile")
    assert sort_key("index.consistency") < sort_key("zz.unknown")


def test_a_plugin_keeps_what_it_declares_on_its_check():
    plugin = Check("acme.fabric", "t", (), lambda facts: [], tags=("gate",), area="platform", probe_level="light")
    assert catalogued(plugin) is plugin
    assert area_for("acme.fabric", plugin.area) == "platform" and area_for("acme.fabric") == "other"


def test_a_malformed_row_is_refused_with_its_id(monkeypatch):
    catalogue.rows.cache_clear()
    monkeypatch.setattr(
        catalogue, "load_table", lambda name: {"check": [{"id": "x.y", "area": "gpu", "order": 1, "gate": "always"}]}
    )
    try:
        with pytest.raises(ValueError, match="x.y"):
            catalogue.rows()
    finally:
        catalogue.rows.cache_clear()
