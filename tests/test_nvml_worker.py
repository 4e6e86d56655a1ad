"""The NVML worker child against fake ``libnvidia-ml.so.1`` libraries built with gcc
(tests/fake_nvml.c): the real pynvml ctypes path, real child processes, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.nvidia import (
    collect_nvidia,
    parse_worker_output,
    run_nvml_worker,
)
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import GpuHealth
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.system import System
from gpudoctor.testing import make_facts, os_facts, pci_gpus
from nvml_lib import build_fake_nvml


def live_ctx(libdir: Path, probe_timeout: float = 20.0, **env) -> CollectContext:
    environ = dict(os.environ, LD_LIBRARY_PATH=str(libdir), **env)
    return CollectContext(System(env=environ), CollectOptions(probe_timeout_s=probe_timeout))


def free_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# ------------------------------------------------------------------ values through the real ctypes path


def test_healthy_fake_library_gives_every_fact(tmp_path):
    lib = build_fake_nvml(
        tmp_path / "lib",
        DEVICE_COUNT=2,
        PROC_PID=os.getpid(),
        TEMP=57,
        POWER_MW=301250,
        POWER_LIMIT_MW=700000,
        UTIL_GPU=93,
        UTIL_MEM=41,
        ECC_AGG_CORR=7,
        CLOCK_REASONS=4,
        PCIE_GEN_CUR=5,
        PCIE_GEN_MAX=5,
        DRIVER_VERSION="550.54.15",
        CUDA_VERSION=12040,
    )
    facts = collect_nvidia(live_ctx(lib))
    assert (facts.source, facts.nvml, facts.nvml_outcome) == ("nvml", "ok", "ok")
    assert (facts.driver_version, facts.cuda_driver_version) == ("550.54.15", "12.4")
    assert [d.index for d in facts.devices] == [0, 1]
    d0 = facts.devices[0]
    assert (d0.name, d0.compute_capability, d0.memory_total_mib, d0.pci_bus_id, d0.mig_mode) == (
        "NVIDIA H100 80GB HBM3",
        "9.0",
        81559,
        "00000000:18:00.0",
        False,
    )
    h = d0.health
    assert isinstance(h, GpuHealth)
    assert (h.ecc_enabled, h.ecc_volatile_uncorrected, h.ecc_aggregate_corrected) == (True, 0, 7)
    assert (h.retired_pages_sbe, h.retired_pages_dbe, h.retired_pages_pending) == (0, 0, False)
    assert (h.remapped_rows_correctable, h.remap_pending, h.remap_failure) == (0, False, False)
    assert h.clock_event_reasons == 4
    assert (h.pcie_gen_current, h.pcie_gen_max, h.pcie_width_current, h.pcie_width_max) == (5, 5, 16, 16)
    assert (h.temperature_c, h.temperature_slowdown_c, h.temperature_shutdown_c) == (57, 92, 97)
    assert (h.power_draw_w, h.power_limit_w) == (301.25, 700.0)
    assert (h.persistence_mode, h.compute_mode) == (True, "default")
    assert (h.utilization_gpu_pct, h.utilization_memory_pct) == (93, 41)
    (proc,) = h.processes
    assert (proc.pid, proc.used_memory_mib, proc.kind, proc.visible) == (os.getpid(), 1024, "compute", True)
    assert proc.command == Path("/proc/self/comm").read_text().strip()
    assert facts.devices[1].health.processes == ()


def test_mig_devices_are_listed(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=2, MIG_DEVICES=2)
    d0, d1 = collect_nvidia(live_ctx(lib)).devices
    assert d0.mig_mode is True and d1.mig_mode is False
    assert [(m.uuid, m.profile, m.gpu_instance, m.compute_instance) for m in d0.mig_instances] == [
        ("MIG-00000000-aaaa-bbbb-cccc-dddddddddddd", "1g.10gb", 7, 0),
        ("MIG-00000001-aaaa-bbbb-cccc-dddddddddddd", "1g.10gb", 8, 0),
    ]
    assert d1.mig_instances == ()


def test_not_supported_queries_become_unavailable(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", NO_ECC=True)
    h = collect_nvidia(live_ctx(lib)).devices[0].health
    for field in (
        "ecc_enabled",
        "ecc_volatile_uncorrected",
        "retired_pages_dbe",
        "retired_pages_pending",
        "remapped_rows_uncorrectable",
        "remap_failure",
    ):
        value = getattr(h, field)
        assert isinstance(value, Unavailable) and "Not Supported" in value.reason, field
    assert h.temperature_c == 41  # the rest still answers


def test_a_pid_outside_this_namespace_is_marked_not_visible(tmp_path):
    pid = free_pid()
    lib = build_fake_nvml(tmp_path / "lib", PROC_PID=pid)
    (proc,) = collect_nvidia(live_ctx(lib)).devices[0].health.processes
    assert (proc.pid, proc.visible, proc.command) == (pid, False, "")


FAULTS = [
    (
        {},
        {
            "devices.ecc": Status.OK,
            "devices.throttle": Status.OK,
            "devices.pcie": Status.OK,
            "devices.processes": Status.OK,
            "devices.persistence": Status.OK,
        },
    ),
    ({"ECC_VOL_UNC": 2, "ECC_AGG_UNC": 2}, {"devices.ecc": Status.FAIL}),
    ({"ROWS_UNC": 3, "ROWS_FAILURE": 1, "ECC_AGG_UNC": 3}, {"devices.ecc": Status.FAIL}),
    ({"RETIRED_SBE": 2, "RETIRED_PENDING": 1}, {"devices.ecc": Status.WARN}),
    ({"ROWS_CORR": 1, "ROWS_PENDING": 1}, {"devices.ecc": Status.WARN}),
    ({"ECC_AGG_UNC": 1, "RETIRED_DBE": 1}, {"devices.ecc": Status.OK}),
    ({"CLOCK_REASONS": 0x40, "TEMP": 90}, {"devices.throttle": Status.WARN}),
    ({"CLOCK_REASONS": 0x80}, {"devices.throttle": Status.WARN}),
    ({"CLOCK_REASONS": 0x4, "UTIL_GPU": 100}, {"devices.throttle": Status.INFO}),
    ({"PCIE_WIDTH_CUR": 4, "PCIE_GEN_CUR": 1, "UTIL_GPU": 90}, {"devices.pcie": Status.WARN}),
    ({"PCIE_GEN_CUR": 1}, {"devices.pcie": Status.INFO}),
    ({"PERSISTENCE": 0}, {"devices.persistence": Status.INFO}),
    ({"COMPUTE_MODE": 2}, {"devices.persistence": Status.WARN}),
    ({"PROC_PID": "FOREIGN"}, {"devices.processes": Status.WARN}),
]


@pytest.mark.parametrize(
    "defines, expected", FAULTS, ids=lambda v: ",".join(map(str, v)) if isinstance(v, dict) else ""
)
def test_fake_library_values_reach_the_checks(tmp_path, defines, expected):
    defines = dict(defines)
    if defines.get("PROC_PID") == "FOREIGN":
        defines["PROC_PID"] = free_pid()
    lib = build_fake_nvml(tmp_path / "lib", **defines)
    nv = collect_nvidia(live_ctx(lib))
    facts = make_facts(nvidia=nv, gpu=pci_gpus(1), os=os_facts())
    registry = load_registry()
    found = {f.check: f for f in evaluate([registry.checks[c] for c in expected], facts)}
    assert {c: f.status for c, f in found.items()} == expected, {c: f.summary for c, f in found.items()}


# ------------------------------------------------------------------ a broken library never takes the doctor down


def test_segfaulting_library_is_an_unavailable_naming_the_signal(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", SEGV_IN_INIT=True)
    facts = collect_nvidia(live_ctx(lib))
    assert facts.nvml_outcome == "crashed"
    assert isinstance(facts.nvml, Unavailable) and "SIGSEGV" in facts.nvml.reason
    assert facts.devices == ()


@pytest.mark.parametrize(
    "define, outcome, words",
    [
        ({"GARBAGE_IN_INIT": True}, "garbage", "no result document"),
        ({"EXIT_IN_INIT": 4}, "failed", "exit status 4"),
    ],
)
def test_garbage_or_exit_status_is_an_unavailable(tmp_path, define, outcome, words):
    lib = build_fake_nvml(tmp_path / "lib", **define)
    facts = collect_nvidia(live_ctx(lib))
    assert facts.nvml_outcome == outcome
    assert words in facts.nvml.reason


def test_an_nvml_error_at_init_keeps_the_usual_driver_diagnosis(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", INIT_RETURN=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    facts = collect_nvidia(live_ctx(lib))
    assert facts.nvml_outcome == "init-failed"
    assert "Driver Not Loaded" in facts.nvml.reason
    registry = load_registry()
    (f,) = evaluate([registry.checks["nvidia.driver"]], make_facts(nvidia=facts, gpu=pci_gpus(1), os=os_facts()))
    assert f.status is Status.FAIL and "no usable NVIDIA driver" in f.summary  # not "the library is broken"
    assert "Driver Not Loaded" in f.explanation


def test_hanging_library_is_killed_with_its_process_group(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", HANG_IN_CTOR=True)
    pidfile = tmp_path / "pids"
    start = time.monotonic()
    outcome, detail, doc = run_nvml_worker(live_ctx(lib, FAKE_NVML_PIDFILE=str(pidfile)), timeout_s=1.5)
    assert time.monotonic() - start < 10
    assert (outcome, doc) == ("timeout", None)
    assert "did not answer within 1.5 s" in detail and "process group" in detail
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2  # the worker and the helper its library forked
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def cli(args, libdir, tmp_path, **env):
    environ = dict(os.environ, LD_LIBRARY_PATH=str(libdir), NO_COLOR="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_cli_survives_a_segfaulting_nvml(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", SEGV_IN_INIT=True)
    pidfile = tmp_path / "pids"
    r = cli(["check", "nvidia.driver"], lib, tmp_path, FAKE_NVML_PIDFILE=str(pidfile))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "libnvidia-ml.so.1 is broken: it crashes when loaded" in r.stdout
    assert "SIGSEGV" in r.stdout
    assert not any(alive(int(p)) for p in pidfile.read_text().split())


def test_cli_survives_a_hanging_nvml_and_leaves_no_process(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", HANG_IN_CTOR=True)
    pidfile = tmp_path / "pids"
    r = cli(["check", "nvidia.driver", "--probe-timeout", "2"], lib, tmp_path, FAKE_NVML_PIDFILE=str(pidfile))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "it hangs when loaded" in r.stdout and "did not answer within 2 s" in r.stdout
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    pgids = set()
    for p in pids:
        assert not alive(p), p
        pgids.add(p)
    # nothing at all is left in the worker's process group
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            assert not (int(fields[2]) in pgids and fields[0] != "Z"), entry.name


def test_the_doctor_process_never_maps_libnvidia_ml(tmp_path):
    """In a fresh interpreter (other tests may import pynvml in this one): collect, then look at our own maps."""
    lib = build_fake_nvml(tmp_path / "lib")
    code = (
        "import sys\n"
        "from gpudoctor.collect import CollectContext, CollectOptions\n"
        "from gpudoctor.collect.nvidia import collect_nvidia\n"
        "from gpudoctor.system import System\n"
        "facts = collect_nvidia(CollectContext(System(), CollectOptions()))\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(facts.nvml_outcome, facts.devices[0].name, 'pynvml' in sys.modules, 'libnvidia-ml' in maps)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, LD_LIBRARY_PATH=str(lib)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.stdout.split() == ["ok", "NVIDIA", "H100", "80GB", "HBM3", "False", "False"], r.stderr


@pytest.mark.parametrize(
    "stdout, words",
    [
        ("", "no result document"),
        ("@@gpudoctor-nvml@@\n{not json\n@@gpudoctor-nvml@@\n", "not valid JSON"),
        ("@@gpudoctor-nvml@@\n[1, 2]\n@@gpudoctor-nvml@@\n", "version-1"),
        ('@@gpudoctor-nvml@@\n{"worker": 7, "ok": true}\n@@gpudoctor-nvml@@\n', "version-1"),
    ],
)
def test_worker_output_parser_refuses_garbage(stdout, words):
    with pytest.raises(ValueError, match=words):
        parse_worker_output(stdout)


def test_the_worker_is_not_started_where_no_driver_can_answer(tmp_path):
    """No NVIDIA kernel driver and no libnvidia-ml anywhere: starting a second
    interpreter could only say "not loaded", so the worker is skipped (a
    scripted runner that knows no command proves nothing was run)."""
    from gpudoctor.collect.nvidia import nvml_worth_trying, run_nvml_worker
    from gpudoctor.testing import ScriptedRunner, fake_system, write_tree

    root = write_tree(tmp_path / "root", {"usr/lib/x86_64-linux-gnu/libc.so.6": ""})
    ctx = CollectContext(fake_system(root, runner=ScriptedRunner()), CollectOptions())
    outcome, detail, doc = run_nvml_worker(ctx)
    assert (outcome, doc) == ("not-loaded", None)
    assert "no NVIDIA driver installed" in detail and "not started" in detail
    # each sign of a driver makes it worth trying
    for extra in (
        {"dev/nvidiactl": ""},
        {"dev/dxg": ""},
        {"proc/driver/nvidia/version": "NVRM"},
        {"usr/lib64/libnvidia-ml.so.1": ""},
        {"usr/local/nvidia/lib64/libnvidia-ml.so.550.54.15": ""},
    ):
        other = write_tree(tmp_path / str(len(list(tmp_path.iterdir()))), extra)
        assert nvml_worth_trying(CollectContext(fake_system(other), CollectOptions())) is None, extra
    lib = write_tree(tmp_path / "opt", {"fake/libnvidia-ml.so.1": ""})
    env_ctx = CollectContext(
        fake_system(root, env={"LD_LIBRARY_PATH": f"/nonexistent:{lib / 'fake'}"}), CollectOptions()
    )
    # LD_LIBRARY_PATH entries are paths inside the root
    assert nvml_worth_trying(env_ctx) is not None
    inside = write_tree(root, {"opt/fake/libnvidia-ml.so.1": ""})
    env_ctx = CollectContext(fake_system(inside, env={"LD_LIBRARY_PATH": "/opt/fake"}), CollectOptions())
    assert nvml_worth_trying(env_ctx) is None
