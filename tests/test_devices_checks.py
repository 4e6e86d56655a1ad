"""``devices.*`` checks from facts snapshots (tests/fixtures/facts/devices/*.json): each health
fault and its healthy twin, asserting the status, the root cause in the summary and the remedy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.checks.devices_persistence import is_datacentre
from gpudoctor.checks.devices_throttle import reason_names
from gpudoctor.data import load_table
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.model import Status
from gpudoctor.registry import load_registry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "facts" / "devices"
DEVICE_CHECKS = (
    "devices.ecc",
    "devices.throttle",
    "devices.pcie",
    "devices.processes",
    "devices.persistence",
    "devices.xid",
    "devices.smoke",
)


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def run(name: str, registry):
    facts = Facts.from_json(json.loads((FIXTURES / f"{name}.json").read_text()))
    out = {}
    for f in evaluate([registry.checks[i] for i in DEVICE_CHECKS], facts):
        out.setdefault(f.check, f)
    return out


def test_healthy_twin_is_ok_everywhere(registry):
    found = run("healthy", registry)
    assert {c: f.status for c, f in found.items()} == dict.fromkeys(DEVICE_CHECKS, Status.OK)


# fixture -> check -> (status, words in the summary, words in the explanation)
CASES = {
    "ecc-volatile-uncorrected": {
        "devices.ecc": (
            Status.FAIL,
            ["uncorrectable", "GPU 1"],
            [
                "2 uncorrectable ECC errors since the driver loaded",
                "drain the node",
                "nvidia-smi -r -i 1",
                "row remap is pending",
            ],
        )
    },
    "ecc-aggregate-unhandled": {
        "devices.ecc": (Status.FAIL, ["uncorrectable", "GPU 0"], ["no retired page or remapped row", "RMA"])
    },
    "ecc-aggregate-handled": {"devices.ecc": (Status.OK, ["no uncorrectable"], ["already handled"])},
    "retired-pages-pending": {
        "devices.ecc": (Status.WARN, ["pending a reset", "Tesla V100"], ["pending retirement", "nvidia-smi -r -i 0"])
    },
    "remap-pending": {"devices.ecc": (Status.WARN, ["pending a reset"], ["row remap is pending", "idle"])},
    "remap-failure": {"devices.ecc": (Status.FAIL, ["uncorrectable"], ["row remapping failed", "RMA"])},
    "geforce-no-ecc": {
        "devices.ecc": (Status.OK, ["no uncorrectable"], ["ECC is not supported"]),
        "devices.persistence": (Status.OK, ["fine"], []),
    },
    "throttle-hw-slowdown": {
        "devices.throttle": (Status.WARN, ["heat or power", "GPU 0"], ["hw_slowdown", "power supply"])
    },
    "throttle-hw-thermal": {
        "devices.throttle": (
            Status.WARN,
            ["heat or power"],
            ["hw_thermal_slowdown", "sw_thermal_slowdown", "89 °C", "airflow"],
        )
    },
    "throttle-power-brake": {"devices.throttle": (Status.WARN, ["heat or power"], ["hw_power_brake_slowdown"])},
    "throttle-near-slowdown": {
        "devices.throttle": (Status.WARN, ["heat or power"], ["88 °C, within 5 °C of its slowdown threshold"])
    },
    "throttle-sw-power-cap": {"devices.throttle": (Status.INFO, ["software power cap"], ["699 W of its 700 W"])},
    "pcie-x4-gen1-busy": {
        "devices.pcie": (
            Status.WARN,
            ["PCIe link below its maximum", "GPU 1"],
            ["Gen1 x4 (can do Gen5 x16)", "riser", "BIOS"],
        )
    },
    "pcie-gen-low-busy": {"devices.pcie": (Status.WARN, ["PCIe link below"], ["Gen3 x16 (can do Gen5 x16)", "88 %"])},
    "pcie-gen-low-idle": {"devices.pcie": (Status.INFO, ["idle"], ["under load"])},
    "processes-foreign": {
        "devices.processes": (Status.WARN, ["not visible here", "PID 4242"], ["30512 MiB", "another container"])
    },
    "processes-own": {"devices.processes": (Status.INFO, ["1 process"], ["PID 318", "python3"])},
    "persistence-off-datacentre": {
        "devices.persistence": (
            Status.INFO,
            ["persistence mode is off on 2"],
            ["nvidia-smi -pm 1", "nvidia-persistenced"],
        )
    },
    "compute-mode-prohibited": {"devices.persistence": (Status.WARN, ["prohibited"], ["nvidia-smi -c DEFAULT -i 0"])},
    "xid-79-fallen-off-bus": {
        "devices.xid": (
            Status.FAIL,
            ["XID 79", "fallen off the bus", "0000:18:00"],
            ["Drain the node", "reboot", "**Fatal.**"],
        )
    },
    "xid-48-dbe": {"devices.xid": (Status.FAIL, ["XID 48", "Double-bit"], ["nvidia-smi -r -i"])},
    "xid-13-app": {"devices.xid": (Status.INFO, ["XID 13", "XID 43"], ["compute-sanitizer", "2×"])},
    "xid-63-row-remap": {"devices.xid": (Status.WARN, ["XID 63"], ["Reset the GPU when it is idle"])},
    "xid-unknown": {"devices.xid": (Status.WARN, ["XID 999"], ["not in gpudoctor's XID table", "xid-errors"])},
    "smoke-matmul-wrong": {
        "devices.smoke": (
            Status.FAIL,
            ["smoke test failed on cuda:1"],
            ["differs from the CPU result", "0.734", "Drain the node"],
        )
    },
    "smoke-copy-error": {"devices.smoke": (Status.FAIL, ["cuda:0"], ["illegal memory access", "nvidia-smi -r"])},
    "smoke-peer-corrupt": {"devices.smoke": (Status.FAIL, ["cuda:0 → cuda:1"], ["arrived corrupted"])},
    "smoke-slow-pinned": {
        "devices.smoke": (
            Status.WARN,
            ["slower than the PCIe link", "cuda:0"],
            ["6.1 GB/s, 10% of what its Gen5 x16 link can carry (63.0 GB/s)", "nvidia-smi topo -m"],
        )
    },
    "smoke-budget-spent": {"devices.smoke": (Status.WARN, ["cuda:0"], ["time budget: d2d"])},
    "smoke-not-run": {"devices.smoke": (Status.SKIP, ["did not run"], [])},
    "kernel-log-unreadable": {
        "devices.xid": (Status.SKIP, ["could not be read"], ["Operation not permitted", "sudo dmesg"])
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_health_fault(name, registry):
    found = run(name, registry)
    for check, (status, summary_words, explanation_words) in CASES[name].items():
        f = found[check]
        assert f.status is status, (check, f.summary)
        for w in summary_words:
            assert w in f.summary, (check, w, f.summary)
        for w in explanation_words:
            assert w in f.explanation, (check, w, f.explanation)
    # the other device checks stay quiet: one fault, one finding above ok/info
    loud = {c for c, f in found.items() if f.status >= Status.WARN and c not in CASES[name]}
    assert not loud, {c: found[c].summary for c in loud}


def test_every_fixture_has_expectations():
    names = {p.stem for p in FIXTURES.glob("*.json")}
    assert names == set(CASES) | {"healthy"}


def test_gate_tags_the_fail_deciding_checks(registry):
    gated = {c for c in DEVICE_CHECKS if "gate" in registry.checks[c].tags}
    assert gated == {"devices.ecc", "devices.xid"}


def test_no_nvml_skips_with_the_reason(registry):
    path = Path(__file__).parent / "fixtures" / "facts" / "gpu-no-module.json"
    facts = Facts.from_json(json.loads(path.read_text()))
    found = {f.check: f for f in evaluate([registry.checks[c] for c in DEVICE_CHECKS[:5]], facts)}
    assert len(found) == 5
    assert all(f.status is Status.SKIP for f in found.values())
    assert all("NVML" in f.summary for f in found.values())


def test_xid_table_rows_have_meaning_action_and_source():
    rows = load_table("xid")["xid"]
    assert len({r["xid"] for r in rows}) == len(rows)
    for r in rows:
        assert r["status"] in ("fail", "warn", "info")
        assert r["fatal"] == (r["status"] == "fail")
        assert r["meaning"] and r["action"] and r["source"].startswith("https://docs.nvidia.com/deploy/xid-errors")
    fatal = {r["xid"] for r in rows if r["fatal"]}
    assert {48, 79, 95} <= fatal and not {13, 31, 43} & fatal


def test_smoke_ok_shows_the_bandwidth_table_in_evidence(registry):
    f = run("healthy", registry)["devices.smoke"]
    assert f.summary == "2 GPUs passed the smoke test (product, copies, peer access)"
    assert f.evidence["devices"]["cuda:1"]["h2d_pinned_gbps"] == "53.1"
    assert f.evidence["devices"]["cuda:0"]["link"] == "Gen5 x16: 63.0 GB/s per direction"


def test_clock_reason_bits_decode():
    assert reason_names(0x1) == ["gpu_idle"]
    assert reason_names(0x8 | 0x80 | 0x4) == ["sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"]


@pytest.mark.parametrize(
    "name, dc",
    [
        ("NVIDIA H100 80GB HBM3", True),
        ("NVIDIA A100-SXM4-40GB", True),
        ("Tesla V100-SXM2-16GB", True),
        ("NVIDIA L40S", True),
        ("Tesla T4", True),
        ("NVIDIA GeForce RTX 4090", False),
        ("NVIDIA RTX A6000", False),
        ("Quadro RTX 8000", False),
        ("NVIDIA H200", True),
        ("NVIDIA B200", True),
    ],
)
def test_datacentre_names(name, dc):
    assert is_datacentre(name) is dc


def test_smoke_not_run_says_so_once_and_names_the_command(registry):
    """The default reason ("not run (gpudoctor check --deep runs it)") once read
    "did not run: not run (...)"; another reason keeps its colon."""
    summary = run("smoke-not-run", registry)["devices.smoke"].summary
    assert summary == "the GPU smoke test did not run (gpudoctor check --deep runs it)"
    facts = Facts.from_json(json.loads((FIXTURES / "smoke-not-run.json").read_text()))
    from dataclasses import replace

    from gpudoctor.facts.base import Unavailable
    from gpudoctor.facts.targets import ProbeFacts, TargetsFacts

    ts = facts.of(TargetsFacts)
    assert isinstance(ts, TargetsFacts)
    t0 = ts.targets[0]
    assert isinstance(t0.probe, ProbeFacts)
    other = replace(t0, probe=replace(t0.probe, smoke=Unavailable("the probe timed out")))
    changed = facts.with_domains(targets=replace(ts, targets=(other, *ts.targets[1:])))
    (f,) = evaluate([registry.checks["devices.smoke"]], changed)
    assert f.summary == "the GPU smoke test did not run: the probe timed out"


# --------------------------------------------------------------------------- exclusive compute mode
# jade-hpc-gpu/jade-hpc-gpu.github.io#73: Slurm nodes set E. Process; a job whose GPU another process
# already holds fails with "all CUDA-capable devices are busy or unavailable"


@pytest.mark.parametrize(
    "mode, processes, status, words",
    [
        ("exclusive_process", ((28211, 1092, "python3"),), Status.WARN, ["exclusive_process", "PID 28211", "busy"]),
        ("exclusive_thread", ((28211, 1092, ""),), Status.WARN, ["exclusive_thread", "PID 28211"]),
        ("exclusive_process", (), Status.OK, ["fine"]),  # the twin: exclusive but free, the job gets it
        ("default", ((28211, 1092, "python3"),), Status.OK, ["fine"]),  # shared: others may join
    ],
)
def test_exclusive_compute_mode_held_by_another_process(mode, processes, status, words, registry):
    from gpudoctor.facts.gpu_health import GpuProcess
    from gpudoctor.testing import gpu_health, make_facts, nvidia_facts, nvml_device

    procs = tuple(GpuProcess(pid, mib, "compute", True, cmd) for pid, mib, cmd in processes)
    dev = nvml_device(0, "Tesla V100-SXM2-16GB", "7.0", health=gpu_health(compute_mode=mode, processes=procs))
    facts = make_facts(nvidia=nvidia_facts("384.145", "9.0", [dev]))
    (f,) = [f for f in evaluate([registry.checks["devices.persistence"]], facts) if f.check == "devices.persistence"]
    assert f.status is status
    assert all(w in f.summary + f.explanation for w in words), f.summary
