"""Core values: Status order, Finding JSON, Check shorthand, FixPlan/FileEdit no-op detection, ids."""

from __future__ import annotations

import pytest

from gpudoctor.model import CHECK_ID_RE, Check, FileEdit, Finding, FixPlan, FixRefused, Status


def test_status_order_by_severity():
    order = [Status.OK, Status.INFO, Status.SKIP, Status.WARN, Status.FAIL, Status.ERROR]
    shuffled = [order[i] for i in (4, 1, 5, 0, 3, 2)]
    assert sorted(shuffled) == order
    assert [s.severity for s in order] == [0, 1, 2, 3, 4, 5]
    assert Status.WARN > Status.SKIP and Status.FAIL >= Status.FAIL and Status.OK <= Status.INFO
    assert Status.worst([Status.INFO, Status.FAIL, Status.WARN]) is Status.FAIL
    assert Status.worst([]) is Status.OK
    with pytest.raises(TypeError):
        Status.OK < 3  # noqa: B015


def test_finding_json_round_trip():
    f = Finding(
        "cuda.driver",
        Status.FAIL,
        "driver too old",
        "**upgrade**",
        {"driver": "470.86", "n": [1, 2]},
        ("a.b",),
        "https://docs.example.org/x",
        "kernel:py311",
        12.34567,
    )
    doc = f.to_json()
    assert doc == {
        "check": "cuda.driver",
        "status": "fail",
        "summary": "driver too old",
        "explanation": "**upgrade**",
        "evidence": {"driver": "470.86", "n": [1, 2]},
        "fixes": ["a.b"],
        "doc_url": "https://docs.example.org/x",
        "target": "kernel:py311",
        "duration_ms": 12.346,
        "area": "gpu",
        "commands": [],
        "caused_by": [],
    }  # not set on the finding: derived from the id prefix
    back = Finding.from_json(doc)
    assert back.status is Status.FAIL and back.fixes == ("a.b",) and back.duration_ms == 12.346
    assert back.area == "gpu" and Finding.from_json({**doc, "area": "platform"}).to_json()["area"] == "platform"
    minimal = Finding.from_json({"check": "a.b", "status": "ok", "summary": "s"})
    assert (minimal.explanation, minimal.evidence, minimal.fixes, minimal.target) == ("", {}, (), None)
    with pytest.raises(ValueError):
        Finding.from_json({"check": "a.b", "status": "fine", "summary": "s"})


def test_check_finding_shorthand():
    c = Check("a.b", "title", ("x",), lambda facts: [])
    f = c.finding(Status.WARN, "sum", "expl", evidence={"k": 1}, target="current")
    assert (f.check, f.status, f.summary, f.explanation, f.evidence, f.target) == (
        "a.b",
        Status.WARN,
        "sum",
        "expl",
        {"k": 1},
        "current",
    )


def test_file_edit_and_plan_detect_no_ops():
    same = FileEdit("/etc/pip.conf", "[global]\n", "[global]\n")
    new = FileEdit("/etc/pip.conf", None, "[global]\n")
    assert not same.changes_anything and new.changes_anything and new.mode == 0o644
    assert not FixPlan("pip.x", "nothing", (same,)).changes_anything
    assert FixPlan("pip.x", "create", (same, new)).changes_anything
    assert not FixPlan("pip.x", "empty").changes_anything
    assert issubclass(FixRefused, Exception)


@pytest.mark.parametrize(
    "id_, valid",
    [
        ("nvidia.driver", True),
        ("pip.index-url", True),
        ("a.b.c_d", True),
        ("cuda", False),
        ("Cuda.driver", False),
        (".a.b", False),
        ("a..b", False),
        ("a.b.", False),
        ("a b.c", False),
    ],
)
def test_check_id_format(id_, valid):
    assert bool(CHECK_ID_RE.match(id_)) is valid


def test_a_finding_carries_its_remedy_and_causes_as_data_through_json():
    import pytest

    from gpudoctor.model import Command

    f = Finding(
        check="cuda.libcuda",
        status=Status.FAIL,
        summary="libcuda missing",
        commands=(Command("docker run --gpus all <image>", "start with the GPU"), Command("sudo reboot", "", "root")),
        caused_by=("nvidia.driver",),
    )
    doc = f.to_json()
    assert doc["commands"][1] == {"text": "sudo reboot", "purpose": "", "safety": "root"}
    assert doc["caused_by"] == ["nvidia.driver"]
    assert Finding.from_json(doc) == Finding(**{**f.__dict__, "area": "gpu"})
    assert [c.note for c in f.commands] == ["", "needs root"]
    with pytest.raises(ValueError, match="safety"):
        Command("rm -rf /tmp/x", "clean", "dangerous")


def test_a_schema_2_finding_keeps_its_cause_from_the_evidence():
    old = {"check": "x.a", "status": "fail", "summary": "a", "evidence": {"caused_by": "x.b"}}
    assert Finding.from_json(old).caused_by == ("x.b",)
    assert Finding.from_json({**old, "caused_by": []}).caused_by == ()  # schema 3 says so itself
