"""GPU stack: driver ↔ CUDA ↔ torch build ↔ compute capability ↔ cuDNN ↔ devices.

Checks are exercised from facts snapshots (tests/fixtures/facts/gpu/*.json and
the real cases under tests/fixtures/cases/), the collectors from fake roots
and a scripted runner, and the probe's library parts for real: against the
installed torch 2.13.0 CPU build and with real ``dlopen`` calls on broken
libraries built in a temporary directory.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from gpudoctor.checks._gpu import (
    coverage,
    has_nvidia_gpu,
    judge_driver,
    parse_arch_list,
    table_arch_list,
    v,
    variant_for,
)
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.loader import collect_cuda_wheels, collect_loader, parse_ldconfig
from gpudoctor.collect.nvidia import collect_gpu, collect_nvidia
from gpudoctor.data import load_table, table_names
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.facts.loader import LoaderFacts
from gpudoctor.facts.targets import (
    CudaDevice,
    CudnnProbe,
    LibcudaProbe,
    ToolchainFacts,
    TritonFacts,
)
from gpudoctor.model import Status
from gpudoctor.probe import PROBE_SCRIPT
from gpudoctor.registry import load_registry, sort_key
from gpudoctor.schemas import published_schema
from gpudoctor.testing import (
    ScriptedRunner,
    fake_system,
    headline_problems,
    make_facts,
    nvidia_facts,
    nvml_device,
    ok,
    os_facts,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GPU_FIXTURES = FIXTURES / "facts" / "gpu"
CASES = FIXTURES / "cases"
GPU_CHECKS = (
    "cuda.available",
    "cuda.driver",
    "cuda.libcuda",
    "cuda.arch",
    "cudnn.load",
    "cuda.devices",
    "torch.compile",
)


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def run_checks(facts: Facts, registry, ids=GPU_CHECKS):
    """Evaluate the given checks on ``facts``; returns check id -> first finding."""
    findings = evaluate([registry.checks[i] for i in ids], facts)
    if "cuda.available" in ids:  # the headline is never better than what it summarises (issue 23)
        assert headline_problems(evaluate(list(registry.checks.values()), facts)) == []
    out = {}
    for f in findings:
        out.setdefault(f.check, f)
    return out


def load_fixture(name: str) -> Facts:
    return Facts.from_json(json.loads((GPU_FIXTURES / f"{name}.json").read_text()))


# --------------------------------------------------------------------------- data tables


def test_every_table_loads_and_every_row_names_a_source():
    names = table_names()
    assert {"cuda_drivers", "gpu_arch", "torch_wheels"} <= set(names)
    for name in names:
        if name == "checks":
            continue  # the check catalogue is gpudoctor's own metadata, not facts from a source
        table = load_table(name)
        rows = [(key, row) for key, value in table.items() if isinstance(value, list) for row in value]
        assert rows, f"{name} has no rows"
        for key, row in rows:
            assert isinstance(row.get("source"), str) and len(row["source"]) > 10, f"{name}.{key}: {row}"


def test_wheel_table_agrees_with_the_driver_table():
    releases = {r["cuda"] for r in load_table("cuda_drivers")["release"]}
    floors = {r["major"]: r["min_driver"] for r in load_table("cuda_drivers")["major"]}
    variants = {r["name"]: r for r in load_table("torch_wheels")["variant"]}
    for row in variants.values():
        if not row["cuda"]:
            continue
        assert row["cuda"] in releases, row["name"]
        assert row["min_driver"] == floors[int(row["cuda"].split(".")[0])], row["name"]
        assert row["index_url"].endswith("/" + row["name"])
    archs = {r["cc"] for r in load_table("gpu_arch")["arch"]}
    seen = set()
    for build in load_table("torch_wheels")["build"]:
        assert build["variant"] in variants, build
        for t in build["torch"]:
            assert (t, build["variant"]) not in seen, f"two rows for torch {t} {build['variant']}"
            seen.add((t, build["variant"]))
            first, newest = variants[build["variant"]]["first_torch"], variants[build["variant"]]["newest_torch"]
            assert v(first[: len(t)]) <= v(t) <= v(".".join(newest.split(".")[:2])), (t, build["variant"])
        for item in build["arch_list"].split(";"):
            assert re.fullmatch(r"\d+\.\d(\+PTX)?", item), build
            assert item.replace("+PTX", "") in archs, f"compute capability {item} missing from gpu_arch.toml"


def test_driver_rules_follow_the_release_notes():
    assert judge_driver("470.86", "12.1").fit == "too-old"
    assert judge_driver("470.86", "11.8").fit == "minor-compat"  # 11.x floor 450.80.02
    assert judge_driver("525.60.13", "12.8").fit == "minor-compat"
    assert judge_driver("570.26", "12.8").fit == "full"
    assert judge_driver("575.57.08", "13.0").fit == "too-old"  # 13.x needs >= 580
    assert judge_driver("440.33", "10.2").fit == "full"
    assert judge_driver("418.39", "10.2").fit == "too-old"  # no minor-version compat for 10.x
    assert variant_for("2.1.0+cu121", "470.86")["name"] == "cu118"
    assert variant_for("2.13.0+cu130", "550.54.15")["name"] == "cu126"
    assert variant_for(None, "440.0") is None


@pytest.mark.parametrize(
    "cc,arch,expect",
    [
        ((8, 6), ["sm_80"], "sm_80"),  # same major, higher minor runs the cubin
        ((8, 0), ["sm_86"], None),  # lower minor does not
        ((9, 0), ["sm_86"], None),  # never across majors
        ((12, 0), ["sm_90", "compute_90"], "compute_90"),  # PTX JIT forward
        ((9, 0), ["sm_90a"], "sm_90a"),
        ((10, 3), ["sm_100a"], None),  # arch-specific: exact only
        ((10, 3), ["sm_100f"], "sm_100f"),  # family: same major
        ((12, 1), table_arch_list("2.7.0+cu128", "12.8"), "sm_120"),
    ],
)
def test_cubin_and_ptx_rules(cc, arch, expect):
    cubin, ptx = coverage(cc, parse_arch_list(arch))
    assert (cubin or ptx).text == expect if expect else (cubin is None and ptx is None)


# --------------------------------------------------------------------------- fixtures

#: fixture -> {check: (status, [substrings of summary + explanation])}
EXPECTED = {
    "driver-too-old-a100": {
        "cuda.driver": (
            "fail",
            [
                "470.82.01",
                "CUDA 12.1",
                "525.60.13",
                "--index-url https://download.pytorch.org/whl/cu118",
                "torch==2.5.1",
                "cuda-compat-12-1",
            ],
        ),
        "cuda.available": ("fail", ["CUDA is unavailable in /home/user/venv/bin/python: the NVIDIA driver 470.82.01"]),
    },
    "driver-new-enough": {"cuda.driver": ("ok", ["550.54.15"]), "cuda.available": ("ok", ["CUDA works"])},
    "driver-minor-compat": {"cuda.driver": ("ok", ["minor-version compatibility", "550.54.14"])},
    "arch-blackwell-on-cu124": {
        "cuda.arch": ("fail", ["RTX 5090 (sm_120)", "torch 2.7 with cu128", "--index-url"]),
        "cuda.available": ("fail", ["CUDA is unusable in", "sm_120"]),
    },
    "arch-blackwell-on-cu128": {"cuda.arch": ("ok", ["sm_120"]), "cuda.available": ("ok", [])},
    "arch-ptx-only": {"cuda.arch": ("ok", ["only by compute_90 PTX", "JIT"])},
    "arch-ptx-only-driver-too-old": {
        "cuda.arch": ("fail", ["compute_90", "550.54.15", "≥ 570.26", "unsupported toolchain"])
    },
    "arch-sm86-on-sm80": {"cuda.arch": ("ok", ["sm_86 runs the sm_80 kernels"])},
    "arch-v100-on-2.11-cu128": {"cuda.arch": ("fail", ["sm_70", "2.11.0+cu128", "whl/cu126"])},
    "cudnn-ok": {"cudnn.load": ("ok", ["cuDNN 9.1.0", "nvidia/cudnn/lib/libcudnn.so.9", "7 sub-libraries"])},
    "cudnn-sublib-missing": {
        "cudnn.load": (
            "fail",
            [
                "libcudnn_engines_precompiled.so.9: cannot open shared object file",
                "pip install --force-reinstall nvidia-cudnn-cu12==9.1.0.70",
            ],
        ),
    },
    "cudnn-system-shadow": {
        "cudnn.load": (
            "fail",
            [
                "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
                "nvidia/cudnn/lib/libcudnn.so.9",
                "ld.so cache",
                "apt-get remove",
            ],
        ),
    },
    "cudnn-wheel-dir-on-path": {
        "cudnn.load": (
            "fail",
            ["on PATH", "export LD_LIBRARY_PATH=/home/user/venv/lib/python3.11/site-packages/nvidia/cudnn/lib:"],
        )
    },
    "libcuda-missing-wsl": {
        "cuda.libcuda": ("fail", ["cannot open shared object file", "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:"]),
        "cuda.available": ("fail", ["libcuda.so.1"]),
    },
    "libcuda-missing-in-container": {
        "cuda.libcuda": ("fail", ["--gpus all"]),
        "cuda.available": ("fail", ["--gpus all"]),
    },
    "libcuda-version-mismatch": {"cuda.libcuda": ("fail", ["535.183.01", "550.54.15", "Reboot"])},
    "devices-ok": {"cuda.devices": ("ok", ["indices match nvidia-smi"])},
    "devices-cuda-visible-empty": {
        "cuda.devices": ("fail", ["hides every GPU", "unset CUDA_VISIBLE_DEVICES"]),
        "cuda.available": ("fail", ["CUDA is unavailable in", "CUDA_VISIBLE_DEVICES=''"]),
    },
    "devices-invalid-entry": {"cuda.devices": ("warn", ["'7' matches no GPU", "7, 1 are hidden"])},
    "devices-mig-by-index": {"cuda.devices": ("warn", ["MIG mode", "MIG-<uuid>"])},
    "compile-ok": {"torch.compile": ("info", ["/usr/bin/gcc", "Python.h for 3.11", "triton 3.2.0"])},
    "compile-no-compiler": {"torch.compile": ("fail", ["no C compiler", "apt-get install build-essential"])},
    "compile-triton-missing": {"torch.compile": ("fail", ["Triton", "not installed"])},
    "no-gpu-cpu-torch": {
        "cuda.available": ("info", ["no NVIDIA GPU and no NVIDIA driver"]),
        "cuda.driver": ("skip", ["CPU-only"]),
        "cuda.arch": ("skip", []),
        "cudnn.load": ("skip", ["CPU-only"]),
        "cuda.libcuda": ("skip", []),
        "cuda.devices": ("skip", []),
    },
}


def test_there_is_a_fixture_for_every_expectation_and_enough_of_them():
    files = {p.stem for p in GPU_FIXTURES.glob("*.json")}
    assert set(EXPECTED) == files
    assert len(files) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_valid_against_the_published_schema(name):
    doc = json.loads((GPU_FIXTURES / f"{name}.json").read_text())
    jsonschema.validate(doc, published_schema("facts.schema.json"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_verdicts(name, registry):
    found = run_checks(load_fixture(name), registry)
    for check, (status, needles) in EXPECTED[name].items():
        f = found[check]
        text = f.summary + "\n" + f.explanation
        assert f.status.value == status, f"{check}: {f.status.value}: {f.summary}"
        for needle in needles:
            assert needle in text, f"{check}: {needle!r} not in:\n{text}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_fail_without_a_fault(name, registry):
    """Healthy fixtures (and the no-GPU one) produce no fail anywhere in the GPU checks."""
    found = run_checks(load_fixture(name), registry)
    expected_fails = {c for c, (s, _n) in EXPECTED[name].items() if s == "fail"}
    fails = {c for c, f in found.items() if f.status == Status.FAIL}
    if not expected_fails:
        assert not fails, {c: found[c].summary for c in fails}


def test_old_snapshots_without_the_new_probe_fields_still_load(registry):
    doc = json.loads((GPU_FIXTURES / "driver-new-enough.json").read_text())
    probe = doc["domains"]["targets"]["targets"][0]["probe"]
    for key in ("mapped_libraries", "cudnn", "libcuda", "toolchain", "triton", "site_packages"):
        del probe[key]
    del probe["torch"]["devices"]
    del doc["domains"]["loader"], doc["domains"]["cuda_wheels"]
    found = run_checks(Facts.from_json(doc), registry)
    assert found["cuda.driver"].status == Status.OK
    assert found["cudnn.load"].status == Status.SKIP and "not probed" in found["cudnn.load"].summary


def test_headline_is_shown_first(registry):
    ids = list(registry.checks)
    assert ids[0] == "cuda.available"
    assert sort_key("cuda.available") < sort_key("gpudoctor.plugins") < sort_key("nvidia.driver")
    for cid in GPU_CHECKS:
        assert cid in registry.checks


# --------------------------------------------------------------------------- cases


def _torch_from_case(doc: dict, **extra):
    return torch_facts(
        doc["torch.__version__"],
        doc.get("torch.version.cuda"),
        cuda_available=doc.get("torch.cuda.is_available()"),
        device_count=doc.get("torch.cuda.device_count()", 0),
        driver_api_version=doc.get("torch._C._cuda_getDriverVersion()"),
        **extra,
    )


def test_case_01_driver_470_vs_torch_cu121(tmp_path, registry):
    case = CASES / "01-driver-470-vs-torch-cu121"
    doc = json.loads((case / "torch-facts.json").read_text())
    root = write_tree(
        tmp_path,
        {
            "/proc/driver/nvidia/version": (case / "proc-driver-nvidia-version.txt").read_text(),
            "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n",
            "/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
            "/sys/bus/pci/devices/0000:01:00.0/device": "0x25a2\n",
        },
    )
    ctx = CollectContext(fake_system(root), CollectOptions())
    nv, pci = collect_nvidia(ctx), collect_gpu(ctx)
    assert nv.driver_version == "470.86" and len(pci.devices) == 1
    warning = re.search(r"UserWarning: CUDA initialization: (.*)", (case / "traceback.txt").read_text()).group(1)
    probe = probe_facts(
        doc["sys.executable"],
        _torch_from_case(doc, cudnn_version=doc["torch.backends.cudnn.version()"], cuda_error=warning),
        python_version="3.10.12",
        libcuda=LibcudaProbe(True, "/usr/lib/x86_64-linux-gnu/libcuda.so.470.86", None, 11040),
    )
    facts = make_facts(nvidia=nv, gpu=pci, os=os_facts("ubuntu", "22.04", "jammy"), targets=targets(target(probe)))
    found = run_checks(facts, registry, ("cuda.available", "cuda.driver", "cuda.arch", "cuda.libcuda"))
    drv = found["cuda.driver"]
    assert drv.status == Status.FAIL
    for needle in (
        "470.86",
        "2.1.0+cu121",
        "CUDA 12.1",
        "≥ 525.60.13",
        "CUDA ≤ 11.4",
        "Upgrade the NVIDIA driver",
        f"{doc['sys.executable']} -m pip install --force-reinstall torch==2.1.0 "
        "--index-url https://download.pytorch.org/whl/cu118",
    ):
        assert needle in drv.summary + drv.explanation, needle
    assert "cuda-compat" not in drv.explanation  # a GeForce laptop GPU: forward compat does not apply
    head = found["cuda.available"]
    assert head.status == Status.FAIL
    assert head.summary.startswith(f"CUDA is unavailable in {doc['sys.executable']}: the NVIDIA driver 470.86")
    # the architecture is fine (sm_86 in the cu121 wheel's list); it must not be blamed
    assert found["cuda.arch"].status != Status.FAIL
    assert found["cuda.libcuda"].status == Status.OK


def _ls_tree(listing: str):
    """Files and symlinks from an `ls -l` listing: (dir, [(name, link target or None)])."""
    lines = listing.strip().splitlines()
    directory = lines[0].rstrip(":")
    entries = []
    for line in lines[1:]:
        parts = line.split()
        if "->" in parts:
            arrow = parts.index("->")
            entries.append((parts[arrow - 1], parts[arrow + 1]))
        else:
            entries.append((parts[-1], None))
    return directory, entries


def test_case_05_cudnn_shadowed_by_ld_library_path(tmp_path, registry):
    case = CASES / "05-cudnn-ld-library-path-shadow"
    doc = json.loads((case / "torch-facts.json").read_text())
    env = dict(line.split("=", 1) for line in (case / "env.txt").read_text().splitlines() if "=" in line)
    module_dir, module_files = _ls_tree((case / "ls-cudnn-module.txt").read_text())
    torch_lib, torch_files = _ls_tree((case / "ls-torch-lib.txt").read_text())
    for directory, entries in ((module_dir, module_files), (torch_lib, torch_files)):
        host = tmp_path / directory.lstrip("/")
        host.mkdir(parents=True, exist_ok=True)
        for name, link in entries:
            (host / name).symlink_to(link) if link else (host / name).write_bytes(b"\x7fELF")
    site = torch_lib.rsplit("/torch/lib", 1)[0]
    # what the loader does: the first LD_LIBRARY_PATH entry holding libcudnn.so.8 wins (no RPATH in 1.12 wheels)
    first = next(
        d for d in env["LD_LIBRARY_PATH"].split(":") if d and (tmp_path / d.lstrip("/") / "libcudnn.so.8").exists()
    )
    loaded = str(Path(first) / Path((tmp_path / first.lstrip("/") / "libcudnn.so.8").resolve()).name)
    linked = tuple(
        int(x)
        for x in re.search(r"linked against \((\d+), (\d+), (\d+)\)", (case / "traceback.txt").read_text()).groups()
    )
    error = (case / "traceback.txt").read_text().strip().splitlines()[-1]
    probe = probe_facts(
        doc["sys.executable"],
        _torch_from_case(
            doc,
            cudnn_compile_version=".".join(map(str, doc["torch._C._cudnn.getCompileVersion()"])),
            cuda_error="torch.backends.cudnn.version(): " + error,
        ),
        python_version="3.8.13",
        env=env,
        site_packages=(site,),
        cudnn=CudnnProbe(True, "", 8, loaded, (loaded,), linked[0] * 1000 + linked[1] * 100 + linked[2]),
        libcuda=LibcudaProbe(True, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", None, 11040),
    )
    tg = targets(target(probe))
    ctx = CollectContext(
        fake_system(tmp_path, env=env, runner=ScriptedRunner(default=ok(""))), CollectOptions(), {"targets": tg}
    )
    loader, wheels = collect_loader(ctx), collect_cuda_wheels(ctx)
    assert loader.ld_library_path[0] == module_dir
    shadow = next(d for d in loader.dirs if d.path == module_dir)
    assert ("libcudnn.so.8", "libcudnn.so.8.0.3") in {(f.name, f.link_target) for f in shadow.libraries}
    facts = make_facts(
        nvidia=nvidia_facts("470.82.01", "11.4", [nvml_device(cc="8.0", name="NVIDIA A100-PCIE-40GB")]),
        targets=tg,
        loader=loader,
        cuda_wheels=wheels,
        os=os_facts("centos", "7", ""),
    )
    found = run_checks(facts, registry, ("cudnn.load", "cuda.available"))
    f = found["cudnn.load"]
    text = f.summary + "\n" + f.explanation
    assert f.status == Status.FAIL
    assert "cuDNN 8.0.3" in f.summary and "older than the 8.3.2" in f.summary and module_dir in f.summary
    assert "entry 1 of `LD_LIBRARY_PATH` (the first)" in text
    assert "module unload cudnn" in text
    assert f"{torch_lib}/libcudnn.so.8" in text  # names the wheel's own copy too
    rest = env["LD_LIBRARY_PATH"].split(":", 1)[1]
    assert f"export LD_LIBRARY_PATH={rest}\n" in text  # exact new value, other entries kept
    assert found["cuda.available"].status == Status.FAIL
    assert "cuDNN 8.0.3" in found["cuda.available"].summary


def test_case_26_torch_compile_missing_python_h(registry):
    case = CASES / "26-torch-compile-missing-python-h"
    doc = json.loads((case / "torch-facts.json").read_text())
    listing = (case / "probe-output.txt").read_text()
    others = tuple(f"/usr/include/{d}" for d in re.findall(r"^(python3\.\d+)$", listing, re.MULTILINE))
    gcc = re.search(r"\$ which gcc\n(\S+)", listing).group(1)
    include = doc["sysconfig.get_paths()['include']"]
    cuda = re.search(r"\+cu(\d+)(\d)$", doc["torch.__version__"]).groups()
    probe = probe_facts(
        doc["sys.executable"],
        torch_facts(doc["torch.__version__"], ".".join(cuda), cuda_available=doc["torch.cuda.is_available()"]),
        python_version=doc["sys.version"],
        include_dir=include,
        toolchain=ToolchainFacts(False, f"{include}/Python.h", gcc, None, others),
        triton=TritonFacts(True, doc["triton.__version__"], True),
    )
    facts = make_facts(
        targets=targets(target(probe)),
        os=os_facts("ubuntu", "20.04", "focal"),
        nvidia=nvidia_facts(devices=[nvml_device()]),
    )
    f = run_checks(facts, registry, ("torch.compile",))["torch.compile"]
    assert f.status == Status.FAIL
    assert "Python.h for Python 3.10 is missing" in f.summary
    assert "sudo apt-get install python3.10-dev" in f.explanation
    assert "/usr/include/python3.9" in f.explanation


def _nvml_from_xml(path: Path):
    root = ET.parse(path).getroot()
    out = []
    for i, g in enumerate(root.findall("gpu")):
        out.append(
            nvml_device(
                i,
                g.findtext("product_name"),
                g.findtext("compute_cap"),
                int(g.findtext("fb_memory_usage/total").split()[0]),
                g.findtext("uuid"),
                g.get("id"),
            )
        )
    return root.findtext("driver_version"), root.findtext("cuda_version"), out


@pytest.mark.parametrize("order", [None, "PCI_BUS_ID"])
def test_case_09_device_order_fastest_first(order, registry):
    case = CASES / "09-device-order-fastest-first"
    doc = json.loads((case / "torch-facts.json").read_text())
    driver, cuda, nvml = _nvml_from_xml(case / "nvidia-smi-q.xml")
    env = dict(line.split("=", 1) for line in (case / "env.txt").read_text().splitlines() if "=" in line)
    n = doc["torch.cuda.device_count()"]
    devices = [
        CudaDevice(
            i,
            doc[f"torch.cuda.get_device_name({i})"],
            "0.0",
            f"0000:{doc[f'torch.cuda.get_device_properties({i}).pci_bus_id']:02x}:00.0",
        )
        for i in range(n)
    ]
    if order:  # the healthy twin: PCI order requested, CUDA numbers like nvidia-smi
        env["CUDA_DEVICE_ORDER"] = order
        devices = sorted(devices, key=lambda d: d.pci_bus_id)
        devices = [CudaDevice(i, d.name, d.capability, d.pci_bus_id) for i, d in enumerate(devices)]
    probe = probe_facts(
        "/home/user/venvs/exp/bin/python",
        torch_facts(doc["torch.__version__"], "11.6", cuda_available=True, device_count=n, devices=tuple(devices)),
        env=env,
    )
    facts = make_facts(nvidia=nvidia_facts(driver, cuda, nvml), targets=targets(target(probe)))
    f = run_checks(facts, registry, ("cuda.devices", "cuda.available"))
    dev = f["cuda.devices"]
    if order:
        assert dev.status == Status.OK and "indices match nvidia-smi" in dev.summary
        return
    assert dev.status == Status.WARN
    assert "cuda:0 = nvidia-smi 1" in dev.summary and "cuda:1 = nvidia-smi 0" in dev.summary
    assert "| 0 | 1 | NVIDIA GeForce GTX 1080 Ti | 00000000:02:00.0 |" in dev.explanation
    assert "| 1 | 0 | NVIDIA GeForce GTX 745 | 00000000:01:00.0 |" in dev.explanation
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in dev.explanation
    # a warning, not a reason CUDA is unusable; the headline is never better than what it summarises
    head = f["cuda.available"]
    assert head.status == Status.WARN and head.summary.startswith("CUDA works")
    assert head.summary.endswith("but cuda.devices: " + dev.summary)


# --------------------------------------------------------------------------- collectors


LDCONFIG = """4 libs found in cache `/etc/ld.so.cache'
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
\tlibcudnn.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.9
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
"""


def test_ldconfig_parsed_in_python_keeps_cuda_libraries_only():
    names = [e.name for e in parse_ldconfig(LDCONFIG)]
    assert names == ["libcudnn.so.9", "libcuda.so.1", "libnvidia-ml.so.1"]


def test_loader_collector_on_an_image_root_uses_the_roots_cache(tmp_path):
    write_tree(
        tmp_path, {"/etc/ld.so.cache": b"cache", "/opt/cudnn/lib/libcudnn.so.9": b"x", "/opt/cudnn/lib/libz.so.1": b"x"}
    )
    cache = str(tmp_path / "etc" / "ld.so.cache")
    runner = ScriptedRunner({("ldconfig", "-p", "-C", cache): ok(LDCONFIG)})
    env = {"LD_LIBRARY_PATH": "/opt/cudnn/lib::/missing", "LD_PRELOAD": "/opt/x.so", "PATH": "/usr/bin"}
    facts = collect_loader(CollectContext(fake_system(tmp_path, env=env, runner=runner), CollectOptions(), {}))
    assert isinstance(facts, LoaderFacts)
    assert facts.ld_library_path == ("/opt/cudnn/lib", "", "/missing") and facts.ld_preload == ("/opt/x.so",)
    assert [e.name for e in facts.ldconfig] == ["libcudnn.so.9", "libcuda.so.1", "libnvidia-ml.so.1"]
    by_path = {d.path: d for d in facts.dirs}
    assert [f.name for f in by_path["/opt/cudnn/lib"].libraries] == ["libcudnn.so.9"]
    assert by_path["/missing"].exists is False


def test_cuda_wheels_collector_finds_cu12_and_cu13_layouts(tmp_path):
    site = "/venv/lib/python3.12/site-packages"
    write_tree(
        tmp_path,
        {
            f"{site}/nvidia/cudnn/lib/libcudnn.so.9": b"x",
            f"{site}/nvidia/cu13/lib/libcudart.so.13": b"x",
            f"{site}/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA": "Name: nvidia-cudnn-cu12\n",
            f"{site}/torch/lib/libtorch_cuda.so": b"x",
        },
    )
    probe = probe_facts("/venv/bin/python", site_packages=(site,))
    ctx = CollectContext(fake_system(tmp_path), CollectOptions(), {"targets": targets(target(probe))})
    wheels = collect_cuda_wheels(ctx).targets[0]
    assert [(d.name, d.version) for d in wheels.dists] == [("nvidia-cudnn-cu12", "9.1.0.70")]
    libs = {d.path: [f.name for f in d.libraries] for d in wheels.lib_dirs}
    assert libs[f"{site}/nvidia/cudnn/lib"] == ["libcudnn.so.9"]
    assert libs[f"{site}/nvidia/cu13/lib"] == ["libcudart.so.13"]
    assert f"{site}/torch/lib" in libs


# --------------------------------------------------------------------------- the probe, for real


def _load_probe_module():
    spec = importlib.util.spec_from_file_location("gpudoctor_probe_script", PROBE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def live_report():
    """One real `gpudoctor facts` run on this machine (one probe process), replayed by the tests."""
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", "facts"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return Facts.from_json(json.loads(proc.stdout))


def test_probe_maps_real_libraries_and_reports_no_cudnn_for_the_cpu_build(live_report):
    from importlib import metadata

    probe = live_report.get("targets").targets[0].probe
    assert probe.torch.version == metadata.version("torch") and probe.torch.cuda is None
    torch_lib = Path(importlib.util.find_spec("torch").origin).parent / "lib"
    mapped = [Path(p) for p in probe.mapped_libraries]
    assert torch_lib.resolve() / "libtorch_cpu.so" in [p.resolve() for p in mapped]
    assert not any(p.name.startswith("libcudnn") for p in mapped)
    assert probe.cudnn.applicable is False and "CPU-only" in probe.cudnn.reason
    assert probe.libcuda.loaded is False and "libcuda.so.1" in probe.libcuda.error
    assert probe.toolchain.python_h == Path(probe.toolchain.python_h_path).is_file()


def test_gpudoctor_check_here_blames_the_missing_gpu_and_nothing_else(live_report, registry):
    if has_nvidia_gpu(live_report) is not False:
        pytest.skip("this machine has (or may have) an NVIDIA GPU or driver")
    found = evaluate(list(registry.checks.values()), live_report)
    head = next(f for f in found if f.check == "cuda.available")
    assert head.status == Status.INFO
    assert "no NVIDIA GPU and no NVIDIA driver" in head.summary
    assert [f.check for f in found if f.status in (Status.FAIL, Status.ERROR)] == []
    for cid in ("cuda.driver", "cuda.arch", "cudnn.load", "cuda.libcuda", "cuda.devices"):
        assert next(f for f in found if f.check == cid).status == Status.SKIP
    assert next(f for f in found if f.check == "cudnn.load").summary.startswith("not applicable: ")


@pytest.fixture(scope="module")
def broken_libs(tmp_path_factory):
    """A fake cuDNN 9 directory: a text file posing as a library, a library linking a missing
    dependency, a good library exporting cudnnGetVersion, and absent sub-libraries."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build test libraries")
    d = tmp_path_factory.mktemp("cudnn")
    (d / "libcudnn_ops.so.9").write_text("this is not an ELF file\n")
    src = d / "v.c"
    src.write_text("unsigned long cudnnGetVersion(void) { return 90100; }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(d / "libcudnn_graph.so.9"), str(src)], check=True)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(d / "libcudnn.so.9"), str(src)], check=True)
    dep = d / "dep"
    dep.mkdir()
    (dep / "m.c").write_text("int gpudoctor_missing_fn(void) { return 1; }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(dep / "libgpudoctor_missing.so"), str(dep / "m.c")], check=True)
    (d / "c.c").write_text("int gpudoctor_missing_fn(void); int f(void) { return gpudoctor_missing_fn(); }\n")
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-o",
            str(d / "libcudnn_cnn.so.9"),
            str(d / "c.c"),
            f"-L{dep}",
            "-lgpudoctor_missing",
        ],
        check=True,
    )
    (dep / "libgpudoctor_missing.so").unlink()  # now the dependency is gone
    return d


def test_cudnn_load_test_reports_real_loader_errors_verbatim(broken_libs):
    probe = _load_probe_module()
    results = {r["name"]: r for r in probe.cudnn_load_test(9, [str(broken_libs)])}
    assert list(results) == list(probe.CUDNN_SUBLIBS[9])
    assert results["libcudnn_graph.so.9"]["ok"] is True
    ops = results["libcudnn_ops.so.9"]
    assert ops["ok"] is False and ops["error"].startswith(str(broken_libs / "libcudnn_ops.so.9"))
    assert "invalid ELF header" in ops["error"] or "file too short" in ops["error"]
    cnn = results["libcudnn_cnn.so.9"]
    assert cnn["ok"] is False
    assert "libgpudoctor_missing.so: cannot open shared object file: No such file or directory" in cnn["error"]
    adv = results["libcudnn_adv.so.9"]  # absent everywhere: a bare-name dlopen through the loader's search
    assert adv["ok"] is False and adv["path"] is None
    assert adv["error"] == "libcudnn_adv.so.9: cannot open shared object file: No such file or directory"
    assert probe.cudnn_runtime_version(str(broken_libs / "libcudnn.so.9")) == 90100


def test_cudnn_load_failures_from_the_real_loader_become_a_fail_with_the_error(broken_libs, registry):
    probe_mod = _load_probe_module()
    records = probe_mod.cudnn_load_test(9, [str(broken_libs)])
    shim = str(broken_libs / "libcudnn.so.9")
    doc = {
        "applicable": True,
        "expected_major": 9,
        "library_path": shim,
        "loaded_paths": [shim],
        "runtime_version": probe_mod.cudnn_runtime_version(shim),
        "search_dirs": [str(broken_libs)],
        "sublibraries": records,
    }
    from gpudoctor.facts.base import from_jsonable

    cudnn = from_jsonable(CudnnProbe, doc)
    probe = probe_facts(
        torch=torch_facts("2.6.0+cu124", "12.4", cudnn_compile_version="9.1.0", cuda_available=True), cudnn=cudnn
    )
    facts = make_facts(targets=targets(target(probe)))
    f = run_checks(facts, registry, ("cudnn.load",))["cudnn.load"]
    assert f.status == Status.FAIL
    assert "libgpudoctor_missing.so: cannot open shared object file" in f.explanation
    assert f.summary.startswith(f"{sum(not r['ok'] for r in records)} of 7 cuDNN 9 sub-libraries fail to load")


@pytest.mark.gpu
def test_probe_on_a_real_gpu_maps_cuda_devices_to_nvml(live_report, registry):
    nv = live_report.get("nvidia")
    probe = live_report.get("targets").targets[0].probe
    if not probe.torch.cuda:
        pytest.skip("the test interpreter's torch is a CPU build")
    assert probe.torch.cuda_available is True
    assert {d.uuid for d in probe.torch.devices} <= {d.uuid for d in nv.devices}
    found = {f.check: f for f in evaluate([registry.checks[c] for c in GPU_CHECKS], live_report)}
    assert found["cuda.available"].status == Status.OK


OLD_PYTHON = Path("/root/.pyenv/versions/3.6.15/bin/python")


@pytest.mark.skipif(not OLD_PYTHON.exists(), reason="no Python 3.6 interpreter on this machine")
def test_probe_runs_under_python_3_6_without_torch():
    from gpudoctor.probe import probe_target
    from gpudoctor.system import System

    probe = probe_target(System.live(), str(OLD_PYTHON), timeout_s=60)
    assert probe.python_version.startswith("3.6.")
    assert probe.torch.installed is False
    assert probe.cudnn.applicable is False and "not installed" in probe.cudnn.reason
    assert probe.libcuda.loaded is False and "libcuda.so.1" in probe.libcuda.error
    assert probe.toolchain.python_h_path.endswith("/Python.h") and probe.mapped_libraries == ()


@pytest.mark.parametrize("driver,index", [("550.54.15", "whl/cu126"), ("470.86", "whl/cu118")])
def test_torch_install_still_offers_a_cuda_build_the_driver_runs(driver, index, registry):
    probe = probe_facts(torch=torch_facts("2.13.0+cpu"))
    facts = make_facts(
        targets=targets(target(probe)), nvidia=nvidia_facts(driver, None, [nvml_device()]), gpu=pci_gpus(1)
    )
    found = run_checks(facts, registry, ("torch.install", "cuda.available"))
    assert found["torch.install"].status == Status.FAIL and index in found["torch.install"].explanation
    assert found["cuda.available"].status == Status.FAIL
    assert "CPU-only build" in found["cuda.available"].summary


@pytest.mark.parametrize("in_container,status", [(True, "fail"), (False, "ok")])
def test_nvidia_visible_devices_none_matters_only_in_a_container(in_container, status, registry):
    facts = load_fixture("devices-ok")
    probe = facts.get("targets").targets[0].probe
    from dataclasses import replace

    probe = replace(probe, env={**probe.env, "NVIDIA_VISIBLE_DEVICES": "void"})
    facts = facts.with_domains(
        targets=targets(target(probe)),
        os=os_facts("ubuntu", "22.04", "jammy", in_container=in_container, kind="docker"),
    )
    f = run_checks(facts, registry, ("cuda.devices",))["cuda.devices"]
    assert f.status.value == status
    if in_container:
        assert "--gpus all" in f.explanation


@pytest.mark.parametrize(
    "runtime,torch_reports,paths,needle",
    [
        (8902, None, ("/opt/cudnn8/libcudnn.so.8",), "a different major than the 9.1.0"),
        (90100, 90100, ("/opt/a/libcudnn.so.9", "/opt/b/libcudnn.so.9"), "two cuDNN copies are mapped"),
        (
            90100,
            90500,
            ("/opt/a/libcudnn.so.9",),
            "torch reports cuDNN 9.5.0 but the mapped /opt/a/libcudnn.so.9 is 9.1.0",
        ),
    ],
)
def test_cudnn_version_and_duplicate_faults(runtime, torch_reports, paths, needle, registry):
    cudnn = CudnnProbe(True, "", 9, paths[0], paths, runtime)
    probe = probe_facts(
        torch=torch_facts(
            "2.6.0+cu124", "12.4", cudnn_compile_version="9.1.0", cudnn_version=torch_reports, cuda_available=True
        ),
        cudnn=cudnn,
    )
    f = run_checks(make_facts(targets=targets(target(probe))), registry, ("cudnn.load",))["cudnn.load"]
    assert f.status == Status.FAIL and needle in f.summary


@pytest.mark.parametrize(
    "gpu_name,cc,compat,status,needle",
    [
        ("NVIDIA A100-SXM4-80GB", "8.0", "570.124.06", "ok", "forward-compatibility package"),
        ("NVIDIA GeForce RTX 3090", "8.6", "570.124.06", "fail", "error 804"),
        ("NVIDIA A100-SXM4-80GB", "8.0", "535.183.01", "fail", "error 803"),
        # a data-centre GPU whose architecture the compat branch dropped: Kepler ends with R470
        # (jax-ml/jax#15961), Pascal with R580; the same GPU with a compat branch that still runs it is fine
        ("Tesla K80", "3.7", "520.61.05", "fail", "supported only up to driver branch R470"),
        ("Tesla P100-PCIE-16GB", "6.0", "590.44.01", "fail", "supported only up to driver branch R580"),
        ("Tesla P100-PCIE-16GB", "6.0", "570.124.06", "ok", "forward-compatibility package"),
    ],
)
def test_forward_compatibility_libcuda(gpu_name, cc, compat, status, needle, registry):
    lc = LibcudaProbe(True, f"/usr/local/cuda-12.8/compat/libcuda.so.{compat}", None, 12080)
    probe = probe_facts(torch=torch_facts("2.7.0+cu128", "12.8", cuda_available=status == "ok"), libcuda=lc)
    facts = make_facts(
        targets=targets(target(probe)),
        gpu=pci_gpus(1),
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device(name=gpu_name, cc=cc)]),
    )
    found = run_checks(facts, registry, ("cuda.libcuda", "cuda.driver"))
    f = found["cuda.libcuda"]
    assert f.status.value == status and needle in f.summary + f.explanation
    if status == "ok":  # the old kernel driver is bridged, so cuda.driver does not fail either
        facts = facts.with_domains(nvidia=nvidia_facts("470.82.01", "11.4", [nvml_device(name=gpu_name, cc=cc)]))
        drv = run_checks(facts, registry, ("cuda.driver",))["cuda.driver"]
        assert drv.status == Status.OK and f"forward-compatibility libcuda {compat}" in drv.summary
