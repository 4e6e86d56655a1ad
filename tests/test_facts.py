"""The Facts aggregate and its JSON decoding: Unavailable, typed access, error paths, forward compatibility."""

from __future__ import annotations

import json

import pytest

from gpudoctor.facts import (
    FACTS_SCHEMA_VERSION,
    Facts,
    FactsDecodeError,
    Unavailable,
    domain,
    registered_domains,
)
from gpudoctor.facts.base import from_jsonable, to_jsonable
from gpudoctor.facts.host import CpuFacts, ShmFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.testing import (
    cpu_facts,
    make_facts,
    nvidia_facts,
    nvml_device,
    probe_facts,
    shm_facts,
    target,
    targets,
)


def test_unavailable_is_falsy_with_a_reason():
    u = Unavailable("no driver")
    assert not u and str(u) == "unavailable: no driver"
    assert to_jsonable(u) == {"unavailable": "no driver"}


def test_typed_access_and_missing_domains():
    facts = make_facts(shm=shm_facts(64 * 1024**2))
    assert facts.of(ShmFacts).total_bytes == 64 * 1024**2
    assert facts.of(CpuFacts) == Unavailable("the cpu facts were not collected")
    changed = facts.with_domains(cpu=cpu_facts(4))
    assert changed.of(CpuFacts).logical_cpus == 4 and "cpu" not in facts.domains


def test_round_trip_of_builders():
    facts = make_facts(
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device(0), nvml_device(1, mig=Unavailable("n/a"))]),
        cpu=cpu_facts(16, quota_cpus=2.5),
        shm=shm_facts(Unavailable("statvfs failed")),
        targets=targets(target(), target(Unavailable("timeout"), label="/x", kind="python")),
    )
    doc = json.loads(json.dumps(facts.to_json()))
    assert doc["schema_version"] == FACTS_SCHEMA_VERSION
    again = Facts.from_json(doc)
    assert again.domains == facts.domains
    assert again.of(CpuFacts).quota.cpus == 2.5


def test_unknown_domains_and_keys_are_ignored_for_forward_compatibility():
    doc = make_facts(shm=shm_facts()).to_json()
    doc["domains"]["future_domain"] = {"anything": 1}
    doc["domains"]["shm"]["new_field"] = "from a newer gpudoctor"
    facts = Facts.from_json(doc)
    assert set(facts.domains) == {"shm"}
    assert facts.of(ShmFacts) == shm_facts()


def test_whole_domain_unavailable():
    facts = Facts.from_json({"schema_version": 1, "domains": {"nvidia": {"unavailable": "collector crashed"}}})
    assert facts.of(NvidiaDriverFacts) == Unavailable("collector crashed")


@pytest.mark.parametrize(
    "doc, path",
    [
        ("[]", "$: a facts snapshot is a JSON object"),
        ({"schema_version": "1", "domains": {}}, "$.schema_version"),
        (
            {
                "schema_version": 1,
                "domains": {"shm": {"path": "/dev/shm", "mounted": True, "total_bytes": "64M", "free_bytes": 1}},
            },
            "$.domains.shm",
        ),
        (
            {"schema_version": 1, "domains": {"shm": {"path": "/dev/shm", "mounted": True, "total_bytes": 1}}},
            "$.domains.shm: missing required key 'free_bytes'",
        ),
        (
            {
                "schema_version": 1,
                "domains": {"cpu": {"logical_cpus": True, "affinity_cpus": 1, "cgroup_version": 2, "quota": None}},
            },
            "$.domains.cpu.logical_cpus: expected an integer",
        ),
        ({"schema_version": 1, "domains": {"gpu": {"devices": {}}}}, "$.domains.gpu.devices: expected an array"),
    ],
)
def test_decode_errors_name_the_json_path(doc, path):
    with pytest.raises(FactsDecodeError) as exc:
        Facts.from_json(json.loads(doc) if isinstance(doc, str) else doc)
    assert path in str(exc.value)


def test_from_jsonable_scalars():
    assert from_jsonable(float, 3) == 3.0 and isinstance(from_jsonable(float, 3), float)
    for tp, bad in ((float, True), (int, 1.5), (bool, 1), (str, 1), (type(None), 0)):
        with pytest.raises(FactsDecodeError):
            from_jsonable(tp, bad)


def test_durations_and_metadata_survive():
    f = Facts({"shm": shm_facts()}, "0.1.0", "2026-11-30T00:00:00+00:00", "/mnt/img", {"shm": 1.23456})
    again = Facts.from_json(f.to_json())
    assert (again.gpudoctor_version, again.collected_at, again.root) == (
        "0.1.0",
        "2026-11-30T00:00:00+00:00",
        "/mnt/img",
    )
    assert again.durations_ms == {"shm": 1.235}


def test_snapshot_redacts_by_default():
    env = {"HF_TOKEN": "hf_abc", "PIP_INDEX_URL": "https://u:p@mirror.example.org/simple"}
    facts = make_facts(targets=targets(target(probe_facts(env=env))))
    text = json.dumps(facts.to_json())
    assert "hf_abc" not in text and "u:p@" not in text
    assert "hf_abc" in json.dumps(facts.to_json(redact=False))


def test_domain_names_are_unique():
    from dataclasses import dataclass

    with pytest.raises(ValueError, match="claimed by"):

        @domain("shm")
        @dataclass(frozen=True)
        class OtherShm:
            x: int

    assert registered_domains()["shm"] is ShmFacts
    with pytest.raises(TypeError):
        domain("plain")(type("NotADataclass", (), {}))


def test_version_1_snapshots_still_load_and_new_ones_say_version_2():
    """Facts schema 2 only added domains and defaulted fields: a version-1
    snapshot (every fixture written before 0.2.0) loads, the newer facts absent."""
    from conftest import FIXTURES

    old = json.loads((FIXTURES / "facts" / "gpu-driver-550-cpu-torch.json").read_text())
    assert old["schema_version"] == 1
    facts = Facts.from_json(old)
    assert facts.get("nvidia") and not facts.get("cuda_libraries")  # new domain: Unavailable, not an error
    assert facts.to_json()["schema_version"] == FACTS_SCHEMA_VERSION == 2
    with pytest.raises(FactsDecodeError, match="reads facts schemas 1, 2"):
        Facts.from_json({"schema_version": 3, "domains": {}})
    with pytest.raises(FactsDecodeError):
        Facts.from_json({"schema_version": True, "domains": {}})
