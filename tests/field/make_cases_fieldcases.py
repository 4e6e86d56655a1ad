"""Write the field cases of issue 24 for the GPU stack, WSL, notebooks, the data pipeline,
NCCL and torch.compile (``python tests/field/make_cases_fieldcases.py``).

Every case is one public report: the artefacts the reporter showed (verbatim, with user
names, host names and paths neutralised), a ``case.toml`` (source, expectations, and every
value the artefacts do not show written down as an assumption) and the replay input, a
``facts.json`` built here with the public facts builders. The script only writes files;
the replay test (tests/field/test_cases.py) judges them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, KernelInterpreter, KernelSpecFacts
from gpudoctor.facts.libraries import CudaLibrariesFacts, FrameworkInstall, LinkDir
from gpudoctor.facts.loader import CudaWheelsFacts, LibraryDir, LibraryFile, LoaderFacts, TargetWheels, WheelDist
from gpudoctor.facts.targets import (
    CudaDevice,
    LibcudaProbe,
    ProbeFacts,
    ToolchainFacts,
    TritonFacts,
)
from gpudoctor.testing import (
    cpu_facts,
    make_facts,
    nvidia_facts,
    nvml_device,
    os_facts,
    pci_gpus,
    probe_facts,
    shm_facts,
    target,
    targets,
    torch_facts,
)

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
ROOT = HERE.parent.parent
MIB, GIB = 1024**2, 1024**3


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


LIB = _load(ROOT / "tests/fixtures/facts/libraries/make_fixtures.py", "_field_libs_fixtures")
SYSLIB = "/usr/lib/x86_64-linux-gnu"
WSL = "/usr/lib/wsl/lib"


# --------------------------------------------------------------------------- case writer


@dataclass
class Case:
    area: str
    name: str
    source: str
    title: str
    kind: str
    facts: Facts
    artefacts: Mapping[str, str]
    expect: Mapping[str, Any]
    framework: str | None = None
    platform: str | None = None
    distro: str | None = None
    twin_of: str | None = None
    assumptions: Sequence[str] = ()
    checks: Sequence[str] | None = None
    xfail: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(v)


def toml_text(c: Case) -> str:
    lines = []
    if c.xfail:
        lines.append(f"xfail = {_toml_value(c.xfail)}")
    lines += [f"source = {_toml_value(c.source)}", f"title = {_toml_value(c.title)}", f"kind = {_toml_value(c.kind)}"]
    for key in ("framework", "platform", "distro", "twin_of"):
        value = getattr(c, key)
        if value:
            lines.append(f"{key} = {_toml_value(value)}")
    if c.assumptions:
        lines.append("assumptions = [")
        lines += [f"  {_toml_value(a)}," for a in c.assumptions]
        lines.append("]")
    lines += ["", "[replay]", 'mode = "facts"']
    if c.checks:
        lines.append(f"checks = {_toml_value(list(c.checks))}")
    lines += ["", "[expect]"]
    for key in ("status", "carrier", "keywords", "forbidden", "fine"):
        if key in c.expect:
            lines.append(f"{key} = {_toml_value(c.expect[key])}")
    return "\n".join(lines) + "\n"


def write(c: Case) -> None:
    d = CASES / c.area / c.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for name, text in c.artefacts.items():
        (d / name).write_text(text.strip("\n") + "\n")
    (d / "case.toml").write_text(toml_text(c))
    (d / "facts.json").write_text(json.dumps(c.facts.to_json(redact=False), indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- builders


def gpu(name: str, cc: str, index: int = 0, memory_mib: int = 24564) -> Any:
    return nvml_device(index, name, cc, memory_mib=memory_mib)


def tprobe(
    python: str,
    torch: Any,
    *,
    python_version: str = "3.10.12",
    libcuda: Any = None,
    env: Mapping[str, str] | None = None,
    **kw: Any,
) -> ProbeFacts:
    prefix = kw.pop("prefix", python.rsplit("/bin/", 1)[0])
    return probe_facts(
        python,
        torch,
        python_version=python_version,
        env=dict(env or {"PATH": f"{prefix}/bin:/usr/bin:/bin"}),
        prefix=prefix,
        is_venv=kw.pop("is_venv", prefix not in ("/usr", "/usr/local", "/opt/conda")),
        is_conda=kw.pop("is_conda", "conda" in prefix),
        libcuda=libcuda if libcuda is not None else Unavailable("not reported by this probe version"),
        **kw,
    )


def cuda_torch(version: str, cuda: str, *, available: bool = True, arch: Sequence[str] = (), devices=(), **kw: Any):
    return torch_facts(
        version,
        cuda,
        cuda_available=available,
        device_count=len(devices) if available else 0,
        arch_list=tuple(arch),
        devices=tuple(devices),
        **kw,
    )


def facts(**domains: Any) -> Facts:
    return make_facts(**domains)


def arch(*ccs: str, ptx: str | None = None) -> tuple[str, ...]:
    out = [f"sm_{c}" for c in ccs]
    if ptx:
        out.append(f"compute_{ptx}")
    return tuple(out)


# --------------------------------------------------------------------------- gpu: driver vs framework CUDA

TOO_OLD = (
    "The NVIDIA driver on your system is too old (found version {v}). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with "
    "your version of the CUDA driver."
)


def driver_cases() -> list[Case]:
    out = []
    # Yuan-2.0 #65: an NGC-based container with torch for CUDA 12.1 on a CUDA 11.0 driver
    ngc_py = "/usr/bin/python3"
    for name, driver, cuda, api, ok in (
        ("ngc-container-cu121-driver-450", "450.80.02", "11.0", 11000, False),
        ("ngc-container-cu121-driver-535", "535.104.05", "12.2", 12020, True),
    ):
        tf = cuda_torch(
            "2.1.0a0+32f93b1",
            "12.1",
            available=ok,
            devices=[CudaDevice(0, "NVIDIA A800 80GB PCIe", "8.0")] if ok else (),
            arch=arch("52", "60", "61", "70", "72", "75", "80", "86", "87", "90", ptx="90"),
            driver_api_version=api,
            cuda_error=None if ok else "CUDA initialization: " + TOO_OLD.format(v=11000),
        )
        out.append(
            Case(
                "gpu",
                name,
                "https://github.com/IEIT-Yuan/Yuan-2.0/issues/65",
                "torch for CUDA 12.1 in the project's container on a host driver that reports CUDA 11.0"
                + (" (twin: driver 535)" if ok else ""),
                "cuda.driver-too-old",
                facts(
                    nvidia=nvidia_facts(driver, cuda, [gpu("NVIDIA A800 80GB PCIe", "8.0", memory_mib=81920)]),
                    gpu=pci_gpus(1, device_id="0x20f5"),
                    os=os_facts("ubuntu", "22.04", "jammy", in_container=True, kind="docker"),
                    targets=targets(target(tprobe(ngc_py, tf, prefix="/usr", is_venv=False))),
                ),
                {
                    "traceback.txt": (
                        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:124: UserWarning: CUDA "
                        "initialization: " + TOO_OLD.format(v=11000) + " (Triggered internally at "
                        "/opt/pytorch/pytorch/c10/cuda/CUDAFunctions.cpp:108.)"
                    ),
                    "maintainer-reply.txt": "我们提供的容器cuda版本是12.1，建议gpu驱动更新到535",
                }
                if not ok
                else {"report.txt": "Twin of ngc-container-cu121-driver-450 after the driver upgrade to 535."},
                {
                    "status": "ok" if ok else "fail",
                    "carrier": "cuda.driver",
                    "keywords": [] if ok else ["450.80.02", "525.60.13", "12.1"],
                    "fine": ["nvidia.driver", "cuda.arch"],
                },
                framework="torch",
                platform="docker",
                distro="ubuntu-22.04",
                twin_of="ngc-container-cu121-driver-450" if ok else None,
                assumptions=[
                    "found version 11000 = CUDA 11.0: driver assumed 450.80.02 (the CUDA 11.0 GA driver)"
                    if not ok
                    else "driver 535.104.05 as the maintainer advised (535)",
                    "torch version 2.1.0a0+32f93b1 (an NGC 23.x build, path /opt/pytorch); the report shows only "
                    "'CUDA 12.1' for the container",
                    "GPU model assumed A800 80GB PCIe (not shown)",
                    "Ubuntu 22.04 container (python3.10 dist-packages)",
                ],
            )
        )
    # googlecolab/colabtools #1685: pip install torch (1.7.0, CUDA 10.2) on a CUDA 10.1 driver
    colab_py = "/usr/bin/python3"
    for name, driver, cuda, api, ok in (
        ("colab-torch170-cu102-driver-418", "418.67", "10.1", 10010, False),
        ("colab-torch170-cu102-driver-450", "450.80.02", "11.0", 11000, True),
    ):
        tf = cuda_torch(
            "1.7.0",
            "10.2",
            available=ok,
            devices=[CudaDevice(0, "Tesla T4", "7.5")] if ok else (),
            arch=arch("37", "50", "60", "70", "75") if ok else (),
            driver_api_version=api,
            cuda_error=None if ok else TOO_OLD.format(v=10010),
        )
        out.append(
            Case(
                "gpu",
                name,
                "https://github.com/googlecolab/colabtools/issues/1685",
                "pip install torch in a notebook pulls torch 1.7.0 (CUDA 10.2) onto a CUDA 10.1 driver"
                + (" (twin: driver 450)" if ok else ""),
                "cuda.driver-too-old",
                facts(
                    nvidia=nvidia_facts(driver, cuda, [gpu("Tesla T4", "7.5", memory_mib=15109)]),
                    gpu=pci_gpus(1, device_id="0x1eb8"),
                    os=os_facts("ubuntu", "18.04", "bionic", in_container=True, kind="docker"),
                    targets=targets(target(tprobe(colab_py, tf, python_version="3.6.9", prefix="/usr", is_venv=False))),
                ),
                {
                    "notebook-cell.txt": (
                        "!pip install torch torchvision\nimport torch\ntorch.cuda.ipc_collect()\n"
                        "RuntimeError: " + TOO_OLD.format(v=10010) + "\n\ntorch.cuda.is_available()\nFalse"
                    )
                }
                if not ok
                else {"report.txt": "Twin of colab-torch170-cu102-driver-418 on a runtime with driver 450."},
                {
                    "status": "ok" if ok else "fail",
                    "carrier": "cuda.driver",
                    "keywords": [] if ok else ["418.67", "10.2", "440.33"],
                    "fine": ["nvidia.driver", "torch.install"],
                },
                framework="torch",
                platform="colab",
                distro="ubuntu-18.04",
                twin_of="colab-torch170-cu102-driver-418" if ok else None,
                assumptions=[
                    "found version 10010 = CUDA 10.1: driver assumed 418.67 (Colab's driver in 2020)"
                    if not ok
                    else "driver 450.80.02",
                    "torch 1.7.0 from PyPI is the CUDA 10.2 build (the PyPI default for 1.7.0)",
                    "GPU assumed Tesla T4, Python 3.6.9, Ubuntu 18.04 (Colab runtime of the time)",
                ],
            )
        )
    # ivadomed #69: torch 1.3.0 (CUDA 10.1) in a venv on a CUDA 10.0 driver
    venv_py = "/home/user/ivadomed/venv/bin/python"
    tf = cuda_torch("1.3.0", "10.1", available=False, driver_api_version=10000, cuda_error=TOO_OLD.format(v=10000))
    out.append(
        Case(
            "gpu",
            "venv-torch130-cu101-driver-410",
            "https://github.com/ivadomed/ivadomed/issues/69",
            "torch 1.3.0 (CUDA 10.1) in a fresh venv on a CUDA 10.0 driver",
            "cuda.driver-too-old",
            facts(
                nvidia=nvidia_facts("410.48", "10.0", [gpu("GeForce GTX 1080 Ti", "6.1", memory_mib=11178)]),
                gpu=pci_gpus(1, device_id="0x1b06"),
                os=os_facts("ubuntu", "18.04", "bionic"),
                targets=targets(target(tprobe(venv_py, tf, python_version="3.6.8"))),
            ),
            {
                "report.txt": (
                    "1. Create venv and install dependencies\n"
                    "2. `python -c 'import torch;print(torch.cuda.is_available())'` gives `False`\n\n"
                    "`print(torch.cuda.get_device_name(0))` gives :\n\n> AssertionError: \n"
                    "The NVIDIA driver on your system is too old (found version 10000).\n"
                    "Please update your GPU driver by downloading and installing a new\n"
                    "version from the URL: http://www.nvidia.com/Download/index.aspx\n"
                    "Alternatively, go to: https://pytorch.org to install\n"
                    "a PyTorch version that has been compiled with your version\nof the CUDA driver."
                )
            },
            {"status": "fail", "carrier": "cuda.driver", "keywords": ["410.48", "10.1", "418.39"]},
            framework="torch",
            platform="host",
            distro="ubuntu-18.04",
            assumptions=[
                "found version 10000 = CUDA 10.0: driver assumed 410.48",
                "torch 1.3.0 from PyPI is the CUDA 10.1 build",
                "GPU, distribution and Python version not shown: GTX 1080 Ti, Ubuntu 18.04, 3.6.8",
            ],
        )
    )
    return out


# --------------------------------------------------------------------------- gpu: arch lists


def _warn(gpu_name: str, sm: str, supported: str) -> str:
    return (
        f"{gpu_name} with CUDA capability {sm} is not compatible with the current PyTorch installation.\n"
        f"The current PyTorch install supports CUDA capabilities {supported}.\n"
        f"If you want to use the {gpu_name} GPU with PyTorch, please check the instructions at "
        "https://pytorch.org/get-started/locally/"
    )


def arch_case(
    name: str,
    source: str,
    title: str,
    gpu_name: str,
    cc: str,
    torch_version: str,
    cuda: str,
    arch_list: Sequence[str],
    driver: tuple[str, str],
    artefact: str,
    expect: Mapping[str, Any],
    *,
    python: str = "/home/user/venv/bin/python",
    distro: tuple[str, str, str] = ("ubuntu", "22.04", "jammy"),
    container: str | None = None,
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
    framework: str = "torch",
    memory_mib: int = 24564,
    python_version: str = "3.10.12",
) -> Case:
    dev = CudaDevice(0, gpu_name, cc)
    tf = cuda_torch(torch_version, cuda, available=True, devices=[dev], arch=arch_list)
    return Case(
        "gpu",
        name,
        source,
        title,
        "cuda.arch-not-in-build",
        facts(
            nvidia=nvidia_facts(driver[0], driver[1], [gpu(gpu_name, cc, memory_mib=memory_mib)]),
            gpu=pci_gpus(1),
            os=os_facts(*distro, in_container=bool(container), kind=container),
            targets=targets(target(tprobe(python, tf, python_version=python_version))),
        ),
        {"report.txt": artefact},
        expect,
        framework=framework,
        platform=container or "host",
        distro="-".join(distro[:2]),
        twin_of=twin_of,
        assumptions=assumptions,
    )


SM50_90 = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"


def arch_cases() -> list[Case]:
    out = []
    out.append(
        arch_case(
            "rtx5090-torch-cu124-sm120",
            "https://github.com/Hellod035/LeggedLab/issues/26",
            "RTX 5090 (sm_120) with a torch build whose kernels stop at sm_90",
            "NVIDIA GeForce RTX 5090",
            "12.0",
            "2.5.1+cu124",
            "12.4",
            SM50_90.split(),
            ("570.133.07", "12.8"),
            "环境：\n5090+i9-14th\n报错：\n" + _warn("NVIDIA GeForce RTX 5090", "sm_120", SM50_90),
            {
                "status": "fail",
                "carrier": "cuda.arch",
                "keywords": ["sm_120", "cu128"],
                "forbidden": ["upgrade the nvidia driver"],
                "fine": ["cuda.driver", "nvidia.driver"],
            },
            memory_mib=32607,
            assumptions=[
                "torch version not shown: 2.5.1+cu124 (its arch list is exactly the one the warning prints)",
                "driver not shown: 570.133.07 (a Blackwell-capable driver; a 5090 needs ≥ 570)",
                "Ubuntu 22.04, venv /home/user/venv",
            ],
        )
    )
    out.append(
        arch_case(
            "rtx5090-torch-cu128-ok",
            "https://github.com/Hellod035/LeggedLab/issues/26",
            "The same RTX 5090 after the reporter's fix: a torch build for CUDA 12.8 (twin)",
            "NVIDIA GeForce RTX 5090",
            "12.0",
            "2.7.0+cu128",
            "12.8",
            ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
            ("570.133.07", "12.8"),
            "解决：\npip install --upgrade --pre torch torchvision --index-url https://download.pytorch.org/whl/nightly/cu128",
            {"status": "ok", "carrier": "cuda.arch", "fine": ["cuda.driver", "torch.install"]},
            memory_mib=32607,
            twin_of="rtx5090-torch-cu124-sm120",
            assumptions=["the reporter installed a cu128 nightly; the twin uses the 2.7.0+cu128 release"],
        )
    )
    out.append(
        arch_case(
            "rtx5090-docker-torch201-cu118-sm120",
            "https://github.com/pBFSLab/DeepPrep/issues/233",
            "RTX 5090 in a container whose torch 2.0.1 (CUDA 11.8) has no Blackwell kernels",
            "NVIDIA GeForce RTX 5090",
            "12.0",
            "2.0.1+cu118",
            "11.8",
            "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90".split(),
            ("570.124.06", "12.8"),
            _warn("NVIDIA GeForce RTX 5090", "sm_120", "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90")
            + "\nthe version torch is 2.0.1\ncuda is 11.8",
            {"status": "fail", "carrier": "cuda.arch", "keywords": ["sm_120", "2.0.1"], "fine": ["cuda.driver"]},
            python="/opt/conda/bin/python",
            container="docker",
            memory_mib=32607,
            assumptions=["driver 570.124.06 (not shown)", "Ubuntu 22.04 image with /opt/conda (not shown)"],
        )
    )
    out.append(
        arch_case(
            "rtx3080-torch171-cu101-sm86",
            "https://github.com/BindsNET/bindsnet/issues/468",
            "RTX 3080 (sm_86) with torch 1.7.1 built for CUDA 10.x (kernels up to sm_75)",
            "GeForce RTX 3080",
            "8.6",
            "1.7.1",
            "10.2",
            "sm_37 sm_50 sm_60 sm_70 sm_75".split(),
            ("460.32.03", "11.2"),
            "/home/user/miniconda3/envs/binds/lib/python3.6/site-packages/torch/cuda/__init__.py:104: UserWarning: \n"
            + _warn("GeForce RTX 3080", "sm_86", "sm_37 sm_50 sm_60 sm_70 sm_75"),
            {"status": "fail", "carrier": "cuda.arch", "keywords": ["sm_86", "1.7.1"], "fine": ["cuda.driver"]},
            python="/home/user/miniconda3/envs/binds/bin/python",
            distro=("ubuntu", "20.04", "focal"),
            memory_mib=10018,
            python_version="3.6.13",
            assumptions=[
                "torch 1.7.1 from PyPI: the CUDA 10.2 build (its arch list is the one printed)",
                "driver 460.32.03 (not shown), Ubuntu 20.04 (not shown)",
            ],
        )
    )
    out.append(
        arch_case(
            "rtx3080-torch171-cu110-ok",
            "https://github.com/BindsNET/bindsnet/issues/468",
            "The same RTX 3080 with torch 1.7.1+cu110, whose kernels include sm_80 (twin)",
            "GeForce RTX 3080",
            "8.6",
            "1.7.1+cu110",
            "11.0",
            "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80".split(),
            ("460.32.03", "11.2"),
            "Twin: torch 1.7.1+cu110 from download.pytorch.org (sm_80 cubins run on sm_86).",
            {"status": "ok", "carrier": "cuda.arch", "fine": ["cuda.driver"]},
            python="/home/user/miniconda3/envs/binds/bin/python",
            distro=("ubuntu", "20.04", "focal"),
            memory_mib=10018,
            python_version="3.6.13",
            twin_of="rtx3080-torch171-cu101-sm86",
        )
    )
    out.append(
        arch_case(
            "k40m-conda-torch13-sm35",
            "https://github.com/pytorch/pytorch/issues/30532",
            "Tesla K40m (sm_35) with torch 1.3 from conda: is_available() is True, every kernel fails",
            "Tesla K40m",
            "3.5",
            "1.3.1",
            "10.1",
            "sm_37 sm_50 sm_60 sm_70 sm_75 compute_75".split(),
            ("418.87.01", "10.1"),
            "I am using a Tesla K40m, installed pytorch 1.3 with conda, using CUDA 10.1\n"
            "1. conda install pytorch cudatoolkit -c pytorch\n"
            "python -c 'import torch; print(torch.cuda.isavailable());'\n>>> True\n"
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            {"status": "fail", "carrier": "cuda.arch", "keywords": ["sm_35", "K40m"], "fine": ["cuda.driver"]},
            python="/home/user/miniconda3/envs/mdtk/bin/python",
            distro=("centos", "7", ""),
            memory_mib=11441,
            python_version="3.7.5",
            assumptions=[
                "torch 1.3.1 conda build; its arch list (sm_37 ... sm_75, compute_75) is from the 1.3 release notes",
                "driver 418.87.01, CentOS 7 cluster (not shown)",
            ],
        )
    )
    return out


# --------------------------------------------------------------------------- gpu: libcuda vs kernel module (TensorFlow)


def tf_probe(python: str, tf_version: str, libcuda: Any, *, python_version: str = "3.8.10", env=None) -> ProbeFacts:
    return tprobe(
        python,
        torch_facts(installed=False),
        python_version=python_version,
        libcuda=libcuda,
        env=env,
        distributions={"tensorflow": tf_version},
    )


def libcuda_cases() -> list[Case]:
    out = []
    diag = (
        "E tensorflow/stream_executor/cuda/cuda_driver.cc:328] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no "
        "CUDA-capable device is detected\n"
        "I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:169] retrieving CUDA diagnostic information for host: "
        "f7b7a8f85319\n"
        "I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:176] hostname: f7b7a8f85319\n"
        "I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:200] libcuda reported version is: {dso}\n"
        "I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:204] kernel reported version is: {kernel}\n"
        "E tensorflow/stream_executor/cuda/cuda_diagnostics.cc:313] kernel version {kernel} does not match DSO "
        "version {dso} -- cannot find working devices in this configuration"
    )
    rows = (
        (
            "tf25-docker-libcuda-460-kernel-455",
            "https://github.com/tensorflow/tensorflow/issues/48722",
            "tensorflow/tensorflow:2.5.0-gpu on a host with driver 455: the image's libcuda 460.73.01 is loaded",
            "455.32.00",
            "460.73.01",
            "2.5.0",
            "docker",
            ("ubuntu", "20.04", "focal"),
            "/usr/bin/python3",
            "docker run --gpus all --entrypoint python tensorflow/tensorflow:2.5.0-gpu -c "
            '"import tensorflow as tf; tf.zeros([50])"\n\n',
            [
                "the image's libcuda.so.460.73.01 is the copy in /usr/local/cuda/compat that the image puts on the "
                "loader path (the report shows only 'libcuda reported version is: 460.73.1')",
                "GPU not shown: GeForce RTX 2080 Ti",
            ],
            "/usr/local/cuda-11.2/compat/libcuda.so.460.73.01",
            "GeForce RTX 2080 Ti",
            "7.5",
        ),
        (
            "tf26-conda-libcuda-470-kernel-460",
            "https://github.com/tensorflow/tensorflow/issues/52530",
            "tensorflow-gpu 2.6 in conda: the driver's user-space libraries were upgraded to 470, the loaded kernel "
            "module is still 460",
            "460.91.03",
            "470.57.02",
            "2.6.0",
            None,
            ("ubuntu", "20.04", "focal"),
            "/home/user/miniconda3/envs/tf/bin/python",
            "CUDA/cuDNN version: kernel version 460.91.3 does not match DSO version 470.57.2 -- cannot find working "
            "devices in this configuration\nFailed to initialize NVML: Driver/library version mismatch\n\n",
            ["GPU not shown: GeForce RTX 3090", "libcuda path: the distribution's libcuda.so.470.57.02"],
            f"{SYSLIB}/libcuda.so.470.57.02",
            "GeForce RTX 3090",
            "8.6",
        ),
        (
            "tf-host-libcuda-375-kernel-384",
            "https://github.com/tensorflow/tensorflow/issues/22525",
            "TensorFlow on a laptop whose kernel module (384.130) and libcuda (375.66) come from two driver installs",
            "384.130",
            "375.66",
            "1.10.0",
            None,
            ("ubuntu", "16.04", "xenial"),
            "/usr/bin/python3",
            "",
            ["TensorFlow 1.10.0 (version not shown)", "GPU not shown: GeForce GTX 1060", "Python 3.5.2"],
            f"{SYSLIB}/libcuda.so.375.66",
            "GeForce GTX 1060",
            "6.1",
        ),
    )
    for name, src, title, kernel, dso, tfv, container, distro, py, prefix, assumptions, path, gname, gcc in rows:
        k3 = kernel if kernel.count(".") == 2 else kernel + ".0"
        d3 = ".".join(str(int(x)) for x in (dso.split(".") + ["0"])[:3])
        k3 = ".".join(str(int(x)) for x in k3.split("."))
        out.append(
            Case(
                "gpu",
                name,
                src,
                title,
                "cuda.libcuda-forward-compat-unsupported" if "compat" in path else "cuda.libcuda-version-mismatch",
                facts(
                    nvidia=nvidia_facts(kernel, source="proc", devices=[gpu(gname, gcc)]),
                    gpu=pci_gpus(1),
                    os=os_facts(*distro, in_container=bool(container), kind=container),
                    targets=targets(target(tf_probe(py, tfv, LibcudaProbe(True, path, None, None)))),
                ),
                {"tensorflow-log.txt": prefix + diag.format(kernel=k3, dso=d3)},
                {
                    "status": "fail",
                    "carrier": "cuda.libcuda",
                    "keywords": [kernel, dso] + (["forward-compatibility"] if "compat" in path else ["mismatch"]),
                },
                framework="tensorflow",
                platform=container or "host",
                distro="-".join(distro[:2]),
                assumptions=assumptions,
            )
        )
    out.append(
        Case(
            "gpu",
            "tf26-conda-libcuda-matches-kernel",
            "https://github.com/tensorflow/tensorflow/issues/52530",
            "The same conda TensorFlow after a reboot: libcuda and the kernel module are both 470.57.02 (twin)",
            "cuda.libcuda-version-mismatch",
            facts(
                nvidia=nvidia_facts("470.57.02", "11.4", [gpu("GeForce RTX 3090", "8.6")]),
                gpu=pci_gpus(1),
                os=os_facts("ubuntu", "20.04", "focal"),
                targets=targets(
                    target(
                        tf_probe(
                            "/home/user/miniconda3/envs/tf/bin/python",
                            "2.6.0",
                            LibcudaProbe(True, f"{SYSLIB}/libcuda.so.470.57.02", None, 11040),
                        )
                    )
                ),
            ),
            {"report.txt": "Twin of tf26-conda-libcuda-470-kernel-460 after rebooting into the 470 module."},
            {"status": "ok", "carrier": "cuda.libcuda", "fine": ["nvidia.driver"]},
            framework="tensorflow",
            platform="host",
            distro="ubuntu-20.04",
            twin_of="tf26-conda-libcuda-470-kernel-460",
        )
    )
    return out


# --------------------------------------------------------------------------- libraries: WSL


WSL_FILES = ("libcuda.so", "libcuda.so.1", "libcuda.so.1.1", "libnvidia-ml.so.1", "nvidia-smi")
WSL_KERNEL = "5.15.90.1-microsoft-standard-WSL2"


def wsl_facts(resolvable: Sequence[str], *, torch_version="2.0.1+cu117", cuda="11.7", python=None, roots=None):
    py = python or "/home/user/miniconda3/envs/torch/bin/python"
    site = py.rsplit("/bin/", 1)[0] + "/lib/python3.10/site-packages"
    torch_cuda = f"{site}/torch/lib/libtorch_cuda.so"
    lookups = [
        LIB.res(
            "dlopen",
            f"{WSL}/{n}" if n in resolvable else None,
            "ld.so cache" if n in resolvable else "not found",
            needed=n,
        )
        for n in ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1")
    ]
    libcuda = (
        LibcudaProbe(True, f"{WSL}/libcuda.so.1.1", None, 12020)
        if "libcuda.so.1" in resolvable
        else LibcudaProbe(False, None, "libcuda.so.1: cannot open shared object file: No such file or directory")
    )
    tf = cuda_torch(
        torch_version,
        cuda,
        available="libcuda.so.1" in resolvable,
        devices=[CudaDevice(0, "NVIDIA GeForce RTX 3060 Ti", "8.6")] if "libcuda.so.1" in resolvable else (),
    )
    torch_fw = LIB.fw("torch", "torch", torch_version, int(cuda.split(".")[0]), 8, [torch_cuda])
    return facts(
        os=os_facts("ubuntu", "22.04", "jammy", wsl=True, kernel=WSL_KERNEL),
        nvidia=nvidia_facts("536.67", "12.2", [gpu("NVIDIA GeForce RTX 3060 Ti", "8.6", memory_mib=8192)]),
        gpu=pci_gpus(0),
        targets=targets(target(tprobe(py, tf, site_packages=(site,), libcuda=libcuda))),
        cuda_libraries=LIB.libs_facts(
            LIB.model(roots or [f"torch:{torch_cuda}"], lookups=lookups), [torch_fw], WSL_FILES
        ),
    )


def wsl_cases() -> list[Case]:
    out = []
    rows = (
        (
            "wsl-conda-torch-cudnn8-no-unversioned-libcuda",
            "https://github.com/pytorch/pytorch/issues/85773",
            "Conda PyTorch in WSL 2: matmul works, the first Conv2d aborts because cuDNN dlopens libcuda.so",
            "console-output.txt",
            "torch.cuda.is_available()=True\nY.shape=torch.Size([2, 3, 4, 4])\nmatrix multiply works\n"
            "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: "
            "No such file or directory\nPlease make sure libcudnn_cnn_infer.so.8 is in your library path!\nAborted",
            "1.12.1",
            "11.3",
            ["conda torch 1.12.1 with cudatoolkit 11.3 (the conda channel's build of the time)"],
        ),
        (
            "wsl-ctypes-libcuda-so-not-found",
            "https://github.com/microsoft/WSL/issues/8587",
            "WSL 2: ctypes loads libcuda.so.1 but not libcuda.so, so cuDNN 8 aborts in resnet training",
            "python-session.txt",
            ">>> from ctypes import cdll\n>>> cdll.LoadLibrary('libcuda.so.1')\n"
            "<CDLL 'libcuda.so.1', handle 562f22ae4160 at 0x7f74fb662c10>\n>>> cdll.LoadLibrary('libcuda.so')\n"
            'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
            '  File "/home/user/miniconda3/lib/python3.9/ctypes/__init__.py", line 460, in LoadLibrary\n'
            "    return self._dlltype(name)\n"
            '  File "/home/user/miniconda3/lib/python3.9/ctypes/__init__.py", line 382, in __init__\n'
            "    self._handle = _dlopen(self._name, mode)\n"
            "OSError: libcuda.so: cannot open shared object file: No such file or directory",
            "1.12.0+cu116",
            "11.6",
            ["torch 1.12.0+cu116 (the report names pytorch and timm, no version)"],
        ),
        (
            "wsl-nougat-cudnn-cnn-infer-libcuda",
            "https://github.com/facebookresearch/nougat/issues/105",
            "nougat on WSL Ubuntu 22.04: 'Could not load library libcudnn_cnn_infer.so.8' until libcuda.so is linked",
            "report.txt",
            "On WSL Ubuntu 22.04.2 LTS, I had to create a link to /usr/lib/wsl/lib/libcuda.so.1 in "
            ".local/lib/pythonx.xx/site-packages/nvidia/cudnn/lib/ directory, where libcudnn_cnn_infer.so.8 was found "
            "to make it work.",
            "2.0.1+cu117",
            "11.7",
            ["torch 2.0.1+cu117 with the nvidia-cudnn-cu11 8.5 wheel (nougat's requirements of the time)"],
        ),
        (
            "wsl-yolov10-amp-check-libcuda",
            "https://github.com/THU-MIG/yolov10/issues/395",
            "YOLOv10 training on WSL 2 aborts in the AMP check: libcuda.so cannot be opened",
            "train-output.txt",
            "AMP: running Automatic Mixed Precision (AMP) checks with YOLOv8n...\n"
            "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: "
            "No such file or directory\nAborted",
            "2.0.1+cu117",
            "11.7",
            ["torch 2.0.1+cu117 (yolov10 requirements); Ubuntu 22.04 in WSL 2 (not shown)"],
        ),
    )
    for name, src, title, fname, text, tv, cu, assumptions in rows:
        out.append(
            Case(
                "libraries",
                name,
                src,
                title,
                "cuda.wsl-libcuda-unresolvable",
                wsl_facts(("libcuda.so.1", "libnvidia-ml.so.1"), torch_version=tv, cuda=cu),
                {fname: text},
                {
                    "status": "fail",
                    "carrier": "cuda.wsl",
                    "keywords": ["libcuda.so", "/usr/lib/wsl/lib", "ldconfig"],
                    "forbidden": ["reinstall cudnn", "apt-get install nvidia-driver", "ubuntu-drivers install"],
                },
                framework="torch",
                platform="wsl",
                distro="ubuntu-22.04",
                assumptions=[
                    "libcuda.so.1 resolves (the process got far enough to run CUDA kernels); libcuda.so "
                    "(unversioned) does not, as the error says",
                    "Windows driver 536.67 / GeForce RTX 3060 Ti (not shown)",
                    *assumptions,
                ],
            )
        )
    out.append(
        Case(
            "libraries",
            "wsl-libcuda-so-resolvable-ok",
            "https://github.com/microsoft/WSL/issues/8587",
            "WSL 2 after `sudo ldconfig` registers /usr/lib/wsl/lib: libcuda.so and libcuda.so.1 resolve (twin)",
            "cuda.wsl-libcuda-unresolvable",
            wsl_facts(("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1"), torch_version="1.12.0+cu116", cuda="11.6"),
            {"report.txt": "Twin of wsl-ctypes-libcuda-so-not-found with /usr/lib/wsl/lib in the ld.so cache."},
            {"status": "ok", "carrier": "cuda.wsl", "fine": ["cuda.libcuda", "cuda.available"]},
            framework="torch",
            platform="wsl",
            distro="ubuntu-22.04",
            twin_of="wsl-ctypes-libcuda-so-not-found",
        )
    )
    return out


# --------------------------------------------------------------------------- data: /dev/shm, workers, NCCL

BUS = (
    "RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Bus error. It is possible that dataloader's "
    "workers are out of shared memory. Please try to raise your shared memory limit."
)


def shm_case(
    name: str,
    source: str,
    title: str,
    kind: str,
    *,
    shm_total: int,
    shm_free: int | None = None,
    gpus: Sequence[tuple[str, str]] = (("GeForce GTX 1080 Ti", "6.1"),),
    container: str | None = "docker",
    distro: tuple[str, str, str] = ("ubuntu", "20.04", "focal"),
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    framework: str = "torch",
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
    xfail: str | None = None,
) -> Case:
    devs = [gpu(n, cc, index=i) for i, (n, cc) in enumerate(gpus)]
    return Case(
        "data",
        name,
        source,
        title,
        kind,
        facts(
            shm=shm_facts(shm_total, shm_free),
            os=os_facts(*distro, in_container=bool(container), kind=container),
            nvidia=nvidia_facts("535.104.05", "12.2", devs),
            gpu=pci_gpus(len(devs)),
        ),
        artefacts,
        expect,
        framework=framework,
        platform=container or "host",
        distro="-".join(distro[:2]),
        twin_of=twin_of,
        xfail=xfail,
        assumptions=["NVIDIA driver 535.104.05 (not shown; irrelevant to /dev/shm)", *assumptions],
    )


def data_cases() -> list[Case]:
    out = []
    shm_fail = {"status": "fail", "carrier": "dataloader.shm", "keywords": ["/dev/shm", "--shm-size"]}
    out.append(
        shm_case(
            "docker-dataparallel-bus-error-64m",
            "https://github.com/pytorch/pytorch/issues/5040",
            "DataLoader workers die with SIGBUS in a Docker container started with the default 64 MB /dev/shm",
            "dataloader.shm-too-small",
            shm_total=64 * MIB,
            gpus=(("GeForce GTX 1080 Ti", "6.1"), ("GeForce GTX 1080 Ti", "6.1")),
            artefacts={
                "traceback.txt": 'File "/opt/project/train.py", line 150, in <module>\n    dataset_sizes=dataset_sizes)\n'
                'File "/opt/conda/envs/pytorch-py3.6/lib/python3.6/site-packages/torch/nn/parallel/data_parallel.py",'
                " line 64, in forward\n" + "RuntimeError: DataLoader worker (pid 13) is killed by signal: Bus error."
            },
            expect=shm_fail,
            assumptions=[
                "docker run without --shm-size or --ipc=host: /dev/shm is Docker's default 64 MB (the paths "
                "/opt/project and /opt/conda are a Docker image's)",
                "two GPUs (nn.DataParallel), GTX 1080 Ti (not shown)",
            ],
        )
    )
    for name, size, ok in (
        ("fastai-course-docker-64m", 64 * MIB, False),
        ("fastai-course-docker-shm-3g", 3 * GIB, True),
    ):
        out.append(
            shm_case(
                name,
                "https://github.com/fastai/docker-containers/issues/21",
                "fastai-course container: the first DataLoader cell dies with a bus error"
                + (" (twin: started with --shm-size=3G)" if ok else ""),
                "dataloader.shm-too-small",
                shm_total=size,
                artefacts={
                    "report.txt": "Twin of fastai-course-docker-64m: docker run --gpus all -p 8888:8888 "
                    "--shm-size=3G fastdotai/fastai-course:latest ./run_jupyter.sh"
                }
                if ok
                else {
                    "error.txt": "RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\nerror. It is "
                    "possible that dataloader's workers are out of shared\nmemory. Please try to raise your shared "
                    "memory limit.",
                    "fix-from-discord.txt": "docker run --gpus all -p 8888:8888 -v --shm-size=3G "
                    "fastdotai/fastai-course:latest ./run_jupyter.sh",
                },
                expect={"status": "ok", "carrier": "dataloader.shm"} if ok else shm_fail,
                assumptions=["one GTX 1080 Ti as reported; Ubuntu 20.04 image (not shown)"],
                twin_of="fastai-course-docker-64m" if ok else None,
            )
        )
    out.append(
        shm_case(
            "protenix-docker-4090-bus-error",
            "https://github.com/bytedance/Protenix/issues/2",
            "Protenix inference in its Docker image on one RTX 4090: worker killed by SIGBUS even with 1 worker",
            "dataloader.shm-too-small",
            shm_total=64 * MIB,
            gpus=(("NVIDIA GeForce RTX 4090", "8.9"),),
            distro=("ubuntu", "22.04", "jammy"),
            artefacts={
                "error.txt": BUS.format(pid=572),
                "maintainer-reply.txt": "It is due to the limited shared memory in docker. \nYou can check the memory "
                "by `df -lh | grep shm` or manually set  docker run --gpus all -it --shm-size=128g ...",
            },
            expect=shm_fail,
            assumptions=["the container ran with Docker's default 64 MB /dev/shm (the maintainer's diagnosis)"],
        )
    )
    out.append(
        shm_case(
            "mmdetection-docker-run-no-shm-size",
            "https://github.com/open-mmlab/mmdetection/issues/1997",
            "mmdetection training in `docker run --rm -it ...` without --shm-size: bus error with free RAM",
            "dataloader.shm-too-small",
            shm_total=64 * MIB,
            gpus=(("GeForce RTX 2080 Ti", "7.5"),),
            distro=("ubuntu", "18.04", "bionic"),
            artefacts={
                "docker-run.sh": "sudo docker run --rm -it -v $(pwd):/$(pwd) -w $(pwd) --name cascademask cascademask "
                "python tools/train.py configs/mask_rcnn_r50_fpn_1x.py",
                "error.txt": BUS.format(pid=37),
            },
            expect=shm_fail,
            assumptions=["GPU model and image distribution not shown (GeForce RTX 2080 Ti, Ubuntu 18.04)"],
        )
    )
    out.append(
        shm_case(
            "host-shm-64g-bus-error-elsewhere",
            "https://github.com/greatlog/UnpairedSR/issues/17",
            "Bus error on a host with a 64 GB /dev/shm, even with num_workers=0: shared memory is not the cause",
            "dataloader.shm-not-the-cause",
            shm_total=64 * GIB,
            container=None,
            artefacts={
                "report.txt": "请问作者是否有遇到过这个问题：共享内存不足。\n我已经进行了以下尝试：\n（1）num_worker设置为0\n仍然报错，显示Bus "
                "error\n（2）修改系统共享内存\n系统共享内存已经为64g，仍然报错共享内存不足\n（3）我的系统没有使用docker，"
                "也就不存在docker下共享内存不足的问题\n（4）我的数据集大小正常，只有几百兆"
            },
            expect={"status": "ok", "carrier": "dataloader.shm", "forbidden": ["--shm-size"]},
            assumptions=["GPU and distribution not shown (GTX 1080 Ti, Ubuntu 20.04)"],
        )
    )
    # NCCL's SHM transport between local ranks
    nccl_fail = {"status": "fail", "carrier": "dataloader.shm", "keywords": ["NCCL", "/dev/shm"]}
    out.append(
        shm_case(
            "nccl-horovod-tf-container-posix-fallocate",
            "https://github.com/NVIDIA/nccl/issues/290",
            "Horovod + TensorFlow in the NGC TF container, 4 ranks: NCCL cannot allocate its SHM segments",
            "nccl.shm-too-small",
            shm_total=64 * MIB,
            gpus=tuple(("Tesla V100-SXM2-32GB", "7.0") for _ in range(4)),
            distro=("ubuntu", "18.04", "bionic"),
            framework="tensorflow",
            artefacts={
                "docker-run.sh": "docker run -it -d --rm --net=host --mount type=bind,source=/home,destination=/home "
                "--runtime nvidia nvcr.io/nvidia/tensorflow:20.01-tf1-py3 sh",
                "nccl-output.txt": "gpu2:2144:2556 [2] NCCL INFO Ring 00 : 2[3d000] -> 3[3e000] via direct shared "
                "memory\n\ngpu2:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
                "left on device\ngpu2:2143:2561 [1] NCCL INFO include/shm.h:41 -> 2",
            },
            expect={**nccl_fail, "keywords": ["NCCL", "/dev/shm", "--shm-size"]},
            assumptions=["4 GPUs (mpirun -np 4, ranks 0-3), V100 (not shown)", "/dev/shm is Docker's 64 MB default"],
        )
    )
    out.append(
        shm_case(
            "nccl-kubeflow-4xT4-emptydir",
            "https://github.com/NVIDIA/nccl/issues/525",
            "Kubeflow job on a 4×T4 node: NCCL 2.9.6 fails to create its SHM segments in the pod's 64 MB /dev/shm",
            "nccl.shm-too-small",
            shm_total=64 * MIB,
            gpus=tuple(("Tesla T4", "7.5") for _ in range(4)),
            container="kubernetes",
            distro=("ubuntu", "20.04", "focal"),
            framework="tensorflow",
            artefacts={
                "nccl-output.txt": "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on "
                "device\n[3] NCCL INFO include/shm.h:41 -> 2\n[3] include/shm.h:48 NCCL WARN Error while creating "
                "shared memory segment nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)",
                "workaround.yaml": "spec:\n  volumes:\n  - name: dshm\n    emptyDir:     \n        medium: Memory\n"
                "  containers:\n  - image:  image-name\n    volumeMounts:\n      - mountPath: /dev/shm\n        name: dshm",
            },
            expect={
                **nccl_fail,
                "keywords": ["NCCL", "emptyDir", "Memory"],
                "forbidden": ["docker run --shm-size", "mount -o remount"],
            },
            assumptions=["the pod has the container runtime's 64 MB /dev/shm (no memory-backed emptyDir)"],
        )
    )
    out.append(
        shm_case(
            "nccl-docker-4x2080-nccl27",
            "https://github.com/NVIDIA/nccl/issues/342",
            "NCCL 2.7.3 in nvidia/cuda:10.1-devel-ubuntu18.04 on 4 RTX 2080: SHM segment creation fails",
            "nccl.shm-too-small",
            shm_total=64 * MIB,
            gpus=tuple(("GeForce RTX 2080", "7.5") for _ in range(4)),
            distro=("ubuntu", "18.04", "bionic"),
            framework="nccl",
            artefacts={
                "nccl-output.txt": "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on "
                "device\ninclude/shm.h:48 NCCL WARN Error while creating shared memory segment "
                "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)",
                "resolution.txt": "It is the /dev/shm size problem under the docker. By default, the shm size is "
                "limited to 64MB under docker. After I increase the size, everything works.",
            },
            expect=nccl_fail,
        )
    )
    out.append(
        shm_case(
            "nccl-xgboost-multigpu-ci-docker",
            "https://github.com/dmlc/xgboost/issues/5963",
            "XGBoost multi-GPU tests hang/fail in a CI Docker container: NCCL posix_fallocate on /dev/shm",
            "nccl.shm-too-small",
            shm_total=64 * MIB,
            gpus=tuple(("Tesla V100-SXM2-16GB", "7.0") for _ in range(4)),
            distro=("ubuntu", "18.04", "bionic"),
            framework="xgboost",
            artefacts={
                "nccl-output.txt": "7635c25c81cd:41590:41835 [0] NCCL INFO Channel 00 : 3[1c0] -> 2[1b0] via direct "
                "shared memory\n7635c25c81cd:41588:41837 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate "
                "failed : No space left on device\n7635c25c81cd:41588:41837 [0] NCCL INFO include/shm.h:41 -> 2\n"
                "7635c25c81cd:41588:41837 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
                "nccl-shm-recv-6c6b02bad5bfc129-0-1-0 (size 9637888)"
            },
            expect=nccl_fail,
            assumptions=["4 GPUs (ranks 0-3 in the log), V100 16 GB (not shown)"],
        )
    )
    for name, size, ok in (
        ("nccl-video-diffusion-docker-64m", 64 * MIB, False),
        ("nccl-video-diffusion-docker-shm-1g", 1 * GIB, True),
    ):
        out.append(
            shm_case(
                name,
                "https://github.com/fal-ai-community/video-diffusion-speedrun/issues/2",
                "Training in the project's Docker image: NCCL's /dev/shm segment fails until --shm-size=1g"
                + (" (twin)" if ok else ""),
                "nccl.shm-too-small",
                shm_total=size,
                gpus=(("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H100 80GB HBM3", "9.0")),
                distro=("ubuntu", "22.04", "jammy"),
                artefacts={"docker-run.sh": "docker run --gpus all --rm --shm-size=1g -it video-diffusion /bin/bash"}
                if ok
                else {
                    "error.txt": "Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)",
                    "docker-run.sh": "docker run --gpus all --rm -it video-diffusion /bin/bash",
                },
                expect={"status": "ok", "carrier": "dataloader.shm"} if ok else nccl_fail,
                assumptions=["two H100 GPUs (not shown)"],
                twin_of="nccl-video-diffusion-docker-64m" if ok else None,
            )
        )
    out.append(
        shm_case(
            "nccl-ci-runner-pod-4xT4",
            "https://github.com/pytorch/ci-infra/pull/490",
            "PyTorch CI workflow pods on 4×T4 runners: NCCL cannot extend /dev/shm/nccl-* (no tmpfs mount in the pod)",
            "nccl.shm-too-small",
            shm_total=64 * MIB,
            gpus=tuple(("Tesla T4", "7.5") for _ in range(4)),
            container="kubernetes",
            distro=("ubuntu", "22.04", "jammy"),
            artefacts={
                "nccl-output.txt": "[0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to "
                "9637892 bytes, error: No space left on device (28)\n\n[0] misc/shmutils.cc:132 NCCL WARN Error "
                "while creating shared memory segment /dev/shm/nccl-WU88OE (size 9637888), error: No space left on "
                "device (28)\n[0] NCCL INFO transport/shm.cc:551 -> 2"
            },
            expect={**nccl_fail, "keywords": ["NCCL", "emptyDir"], "forbidden": ["docker run --shm-size"]},
            assumptions=["the workflow pod's /dev/shm is the runtime's 64 MB default (the PR adds a tmpfs mount)"],
        )
    )
    out.append(
        shm_case(
            "nccl-docker-4x2080-ipc-host-ok",
            "https://github.com/NVIDIA/nccl/issues/342",
            "The 4×RTX 2080 container restarted with --ipc=host: the host's /dev/shm (16 GB) is used (twin)",
            "nccl.shm-too-small",
            shm_total=16 * GIB,
            gpus=tuple(("GeForce RTX 2080", "7.5") for _ in range(4)),
            distro=("ubuntu", "18.04", "bionic"),
            framework="nccl",
            artefacts={"report.txt": "Twin of nccl-docker-4x2080-nccl27 with a 16 GB /dev/shm."},
            expect={"status": "ok", "carrier": "dataloader.shm"},
            twin_of="nccl-docker-4x2080-nccl27",
        )
    )
    # CPU count vs quota / affinity
    out.append(
        Case(
            "data",
            "cpuset-23-of-208-workers-104",
            "https://github.com/embeddings-benchmark/mteb/issues/1331",
            "num_workers = os.cpu_count() / 2 = 104 on a node where the process may use 23 CPUs: the run freezes",
            "dataloader.cpu-count-overstated",
            facts(cpu=cpu_facts(208, affinity=23, quota_cpus=None)),
            {
                "warning.txt": "/env/lib/conda/gritkto4/lib/python3.10/site-packages/torch/utils/data/dataloader.py:"
                "557: UserWarning: This DataLoader will create 104 worker processes in total. Our suggested max number "
                "of worker in current system is 23, which is smaller than what this DataLoader is going to create. "
                "Please be aware that excessive worker creation might get DataLoader running slow or even freeze, "
                "lower the worker number to avoid potential slowness/freeze if necessary."
            },
            {"status": "warn", "carrier": "dataloader.cpu", "keywords": ["23", "208"]},
            framework="torch",
            platform="slurm",
            assumptions=[
                "os.cpu_count() = 208 (num_workers = floor(cpu_count / 2) = 104); the 23 suggested CPUs are the "
                "process's affinity (cpuset), no CFS quota",
                "a batch-scheduled node (slurm) with a cpuset allocation",
            ],
        )
    )
    out.append(
        Case(
            "data",
            "four-core-host-eight-workers",
            "https://github.com/AILab-CVC/YOLO-World/issues/413",
            "YOLO-World fine-tuning with 8 workers on a 4-core machine: no quota, os.cpu_count() is right",
            "dataloader.cpu-count-overstated",
            facts(cpu=cpu_facts(4, quota_cpus=None)),
            {
                "warning.txt": "/mnt/data/conda_envs/yoloworld/lib/python3.9/site-packages/torch/utils/data/"
                "dataloader.py:554: UserWarning: This DataLoader will create 8 worker processes in total. Our "
                "suggested max number of worker in current system is 4, which is smaller than what this DataLoader is "
                "going to create. Please be aware that excessive worker creation might get DataLoader running slow or "
                "even freeze, lower the worker number to avoid potential slowness/freeze if necessary."
            },
            {"status": "ok", "carrier": "dataloader.cpu", "forbidden": ["cpu.max", "cgroup"]},
            framework="torch",
            platform="host",
            assumptions=["no cgroup CPU limit (a workstation: 'my cpu have only 4 cores')"],
        )
    )
    return out


# --------------------------------------------------------------------------- libraries: torch.compile / Triton

PY_H_MISSING = (
    "/tmp/tmp8rlaiy4j/main.c:5:10: fatal error: Python.h: No such file or directory\n"
    "    5 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated."
)


def compile_case(
    name: str,
    source: str,
    title: str,
    kind: str,
    *,
    torch_version: str,
    cuda: str,
    python: str,
    python_version: str,
    python_h: bool,
    triton: TritonFacts,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    distro: tuple[str, str, str] = ("ubuntu", "22.04", "jammy"),
    container: str | None = None,
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
    gpu_name: tuple[str, str] = ("NVIDIA A100-SXM4-80GB", "8.0"),
    compiler: bool = True,
    include: str | None = None,
) -> Case:
    mm = ".".join(python_version.split(".")[:2])
    prefix = python.rsplit("/bin/", 1)[0]
    site = f"{prefix}/lib/python{mm}/site-packages"
    torch_cuda = f"{site}/torch/lib/libtorch_cuda.so"
    tf = cuda_torch(
        torch_version, cuda, devices=[CudaDevice(0, *gpu_name)], arch=arch("50", "60", "70", "75", "80", "86", "90")
    )
    inc = include or f"/usr/include/python{mm}"
    tc = ToolchainFacts(
        python_h, f"{inc}/Python.h", "/usr/bin/gcc" if compiler else None, "/usr/bin/g++" if compiler else None
    )
    return Case(
        "libraries",
        name,
        source,
        title,
        kind,
        facts(
            nvidia=nvidia_facts("550.54.15", "12.4", [gpu(gpu_name[0], gpu_name[1], memory_mib=81920)]),
            gpu=pci_gpus(1),
            os=os_facts(*distro, in_container=bool(container), kind=container),
            targets=targets(
                target(
                    tprobe(
                        python,
                        tf,
                        python_version=python_version,
                        include_dir=inc,
                        site_packages=(site,),
                        toolchain=tc,
                        triton=triton,
                        libcuda=LibcudaProbe(True, f"{SYSLIB}/libcuda.so.550.54.15", None, 12040),
                    )
                )
            ),
            cuda_libraries=LIB.libs_facts(
                LIB.model(
                    [f"torch:{torch_cuda}"], link_dirs=[LinkDir(SYSLIB, "ld.so cache", True, 64, "libc6,x86-64")]
                ),
                [LIB.fw("torch", "torch", torch_version, int(cuda.split(".")[0]), 9, [torch_cuda])],
            ),
        ),
        artefacts,
        expect,
        framework="torch",
        platform=container or "host",
        distro="-".join(distro[:2]),
        twin_of=twin_of,
        assumptions=["driver 550.54.15 / A100 (not shown; compile failures do not depend on them)", *assumptions],
    )


def compile_cases() -> list[Case]:
    out = []
    ok_triton = TritonFacts(True, "2.3.1", True)
    out.append(
        compile_case(
            "py310-python-h-missing-reduce-overhead",
            "https://github.com/pytorch/pytorch/issues/129351",
            "torch.compile(mode='reduce-overhead') on Python 3.10: Triton's launcher build cannot find Python.h",
            "torch.compile-python-h-missing",
            torch_version="2.3.1+cu121",
            cuda="12.1",
            python="/home/user/.venv/bin/python",
            python_version="3.10.14",
            python_h=False,
            triton=ok_triton,
            artefacts={"trace.txt": PY_H_MISSING},
            expect={
                "status": "fail",
                "carrier": "torch.compile",
                "keywords": ["Python.h", "python3.10-dev"],
                "fine": ["cuda.available"],
            },
            assumptions=["torch 2.3.1+cu121 in a venv on Ubuntu 22.04 without python3.10-dev (not shown)"],
        )
    )
    out.append(
        compile_case(
            "py310-python-h-present-ok",
            "https://github.com/pytorch/pytorch/issues/129351",
            "The same venv after `apt install python3.10-dev`: inductor's prerequisites are met (twin)",
            "torch.compile-python-h-missing",
            torch_version="2.3.1+cu121",
            cuda="12.1",
            python="/home/user/.venv/bin/python",
            python_version="3.10.14",
            python_h=True,
            triton=ok_triton,
            artefacts={"report.txt": "Twin of py310-python-h-missing-reduce-overhead with python3.10-dev installed."},
            expect={"status": "ok", "carrier": "torch.compile"},
            twin_of="py310-python-h-missing-reduce-overhead",
        )
    )
    out.append(
        compile_case(
            "hf-model-python-h-missing-hydra",
            "https://github.com/pytorch/pytorch/issues/97146",
            "A Hugging Face model under torch.compile (Hydra job): every Triton launcher build fails on Python.h",
            "torch.compile-python-h-missing",
            torch_version="2.0.0+cu118",
            cuda="11.8",
            python="/home/user/miniconda3/envs/space/bin/python",
            python_version="3.9.16",
            python_h=False,
            triton=TritonFacts(True, "2.0.0", True),
            distro=("ubuntu", "20.04", "focal"),
            artefacts={
                "trace.txt": "/tmp/tmpn8c04nql/main.c:4:10: fatal error: Python.h: No such file or directory\n"
                "    4 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated.\n"
                "/tmp/tmpm_pufzho/main.c:4:10: fatal error: Python.h: No such file or directory\n"
                "    4 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated."
            },
            expect={"status": "fail", "carrier": "torch.compile", "keywords": ["Python.h"]},
            assumptions=[
                "torch 2.0.0+cu118 (the issue is from March 2023); Python 3.9.16; Ubuntu 20.04; the interpreter's "
                "include directory lacks Python.h"
            ],
        )
    )
    out.append(
        compile_case(
            "sglang-container-python-h-missing",
            "https://github.com/sgl-project/sglang/issues/1117",
            "sglang in its container: CUDA-graph capture compiles a Triton launcher and fails on Python.h",
            "torch.compile-python-h-missing",
            torch_version="2.4.0+cu121",
            cuda="12.1",
            python="/usr/bin/python3",
            python_version="3.10.12",
            python_h=False,
            triton=TritonFacts(True, "3.0.0", True),
            container="docker",
            artefacts={
                "log.txt": "/tmp/tmps1rkq3y3/main.c:5:10: fatal error: Python.h: No such file or directory\n"
                "    5 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated.\n\n"
                "Exception in run_tp_server:\nTraceback (most recent call last):\n"
                '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker.py", line 781, in run_tp_server'
            },
            expect={"status": "fail", "carrier": "torch.compile", "keywords": ["Python.h", "python3.10-dev"]},
            assumptions=["the image is Ubuntu 22.04 with the system Python 3.10 and torch 2.4.0+cu121 (sglang 0.2.x)"],
        )
    )
    out.append(
        compile_case(
            "py312-venv-triton-not-installed",
            "https://github.com/pytorch/pytorch/issues/125093",
            "torch.compile in a Python 3.12 venv: 'Triton installation not found' (no triton wheel for 3.12 then)",
            "torch.compile-triton-missing",
            torch_version="2.3.0+cu121",
            cuda="12.1",
            python="/home/user/.venvs/venv/bin/python",
            python_version="3.12.3",
            python_h=True,
            triton=TritonFacts(False),
            distro=("ubuntu", "24.04", "noble"),
            artefacts={
                "traceback.txt": '  File "/home/user/.venvs/venv/lib/python3.12/site-packages/torch/_inductor/'
                'compile_fx.py", line 1450, in compile_fx\n    return aot_autograd(\n'
                "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nRuntimeError: Cannot find a "
                "working triton installation. More information on installing Triton can be found at "
                "https://github.com/openai/triton"
            },
            expect={"status": "fail", "carrier": "torch.compile", "keywords": ["triton"]},
            assumptions=[
                "torch 2.3.0+cu121 (the wheel's triton requirement excluded Python 3.12); Ubuntu 24.04 (/usr/lib/python3.12)",
                "the exception text is the one torch 2.3 raises for a missing Triton (the excerpt shows the frames)",
            ],
        )
    )
    out.append(
        compile_case(
            "py313-conda-triton-not-installed",
            "https://github.com/pytorch/pytorch/issues/143406",
            "torch.compile under Python 3.13 in conda: the triton package is not installed",
            "torch.compile-triton-missing",
            torch_version="2.6.0+cu124",
            cuda="12.4",
            python="/opt/conda/envs/conda-env/bin/python",
            python_version="3.13.1",
            python_h=True,
            triton=TritonFacts(False),
            artefacts={
                "traceback.txt": '  File "/opt/conda/envs/conda-env/lib/python3.13/site-packages/torch/_inductor/'
                'compile_fx.py", line 1129, in fx_codegen_and_compile\n    return scheme.codegen_and_compile(gm, '
                "example_inputs, inputs_to_check, graph_kwargs)\n"
                '  File "/opt/conda/envs/conda-env/lib/python3.13/site-packages/torch/_inductor/graph.py", line '
                "2027, in compile_to_module\n    return self._compile_to_module()"
            },
            expect={"status": "fail", "carrier": "torch.compile", "keywords": ["triton"]},
            assumptions=["torch 2.6.0 release candidate for CUDA 12.4 (the report is the 2.6 release test)"],
        )
    )
    out.append(
        compile_case(
            "py312-venv-triton-installed-ok",
            "https://github.com/pytorch/pytorch/issues/125093",
            "The Python 3.12 venv with torch 2.4 and its triton 3.0.0 (twin)",
            "torch.compile-triton-missing",
            torch_version="2.4.0+cu121",
            cuda="12.1",
            python="/home/user/.venvs/venv/bin/python",
            python_version="3.12.3",
            python_h=True,
            triton=TritonFacts(True, "3.0.0", True),
            distro=("ubuntu", "24.04", "noble"),
            artefacts={"report.txt": "Twin of py312-venv-triton-not-installed after upgrading to torch 2.4."},
            expect={"status": "ok", "carrier": "torch.compile"},
            twin_of="py312-venv-triton-not-installed",
        )
    )
    return out


# --------------------------------------------------------------------------- notebooks


def kspec(name: str, python: str, display: str) -> KernelSpecFacts:
    argv = (python, "-m", "ipykernel_launcher", "-f", "{connection_file}")
    path = f"/home/user/.local/share/jupyter/kernels/{name}/kernel.json"
    text = json.dumps({"argv": list(argv), "display_name": display, "language": "python"}, indent=1)
    return KernelSpecFacts(
        name=name,
        resource_dir=path.rsplit("/", 1)[0],
        kernel_json=path,
        kernel_json_text=text,
        builtin=False,
        error=None,
        display_name=display,
        language="python",
        argv=argv,
        is_python=True,
        interpreter=KernelInterpreter(python, 0, "absolute", True),
    )


def notebook_cases() -> list[Case]:
    out = []
    py = "/home/user/test_env/bin/python"
    for name, has_ipk in (("vscode-venv-without-ipykernel", False), ("vscode-venv-with-ipykernel-ok", True)):
        tf = cuda_torch("2.3.1+cu121", "12.1", devices=[CudaDevice(0, "NVIDIA GeForce RTX 3080", "8.6")])
        dists = {"torch": "2.3.1+cu121", **({"ipykernel": "6.29.4"} if has_ipk else {})}
        terminal = tprobe(py, tf, python_version="3.12.1", distributions=dists)
        kernel = tprobe(py, tf, python_version="3.12.1", distributions=dists)
        jf = JupyterFacts(
            "/usr/bin/python3",
            "PATH",
            "3.10.12",
            "8.6.2",
            "/home/user/.local/share/jupyter",
            ("/home/user/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels"),
            (kspec("test_env", py, "test_env (Python 3.12.1)"),),
        )
        out.append(
            Case(
                "notebooks",
                name,
                "https://github.com/microsoft/vscode-jupyter/issues/15780",
                "The notebook's kernel is a venv whose torch sees the GPU in the terminal, but that venv has no "
                "ipykernel" + (" (twin: ipykernel installed)" if has_ipk else ""),
                "jupyter.kernel-no-ipykernel",
                facts(
                    jupyter=jf,
                    targets=targets(target(terminal), target(kernel, label="kernel:test_env", kind="kernel")),
                    nvidia=nvidia_facts("550.90.07", "12.4", [gpu("NVIDIA GeForce RTX 3080", "8.6", memory_mib=10240)]),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "22.04", "jammy", kernel="6.5.0-35-generic"),
                ),
                {"report.txt": "Twin of vscode-venv-without-ipykernel after `pip install ipykernel` in test_env."}
                if has_ipk
                else {
                    "report.txt": "NVIDIA-SMI 550.90.07 Driver Version: 550.90.07 CUDA Version: 12.4\n\n"
                    "The problem is that when I run code in the terminal it appears to be able to use the GPU.\n"
                    "x = torch.tensor([1.0, 2.0, 3.0], device='cuda')\n\n"
                    "Tensor operation result on GPU: tensor([5., 7., 9.], device='cuda:0')\n\n"
                    "But when I try to import torch in VScode in a notebook I get this:\n\n"
                    "Running cells with 'test_env (Python 3.12.1)' requires the ipykernel package.\n"
                    "Run the following command to install 'ipykernel' into the Python environment.\n"
                    "Command: '/home/user/test_env/bin/activate -m pip install ipykernel -U --force-reinstall'"
                },
                {"status": "ok", "carrier": "jupyter.kernels"}
                if has_ipk
                else {
                    "status": "fail",
                    "carrier": "jupyter.kernels",
                    "keywords": ["ipykernel", "/home/user/test_env/bin/python -m pip install ipykernel"],
                    "forbidden": ["--force-reinstall"],
                    "fine": ["cuda.available"],
                },
                framework="torch",
                platform="host",
                distro="ubuntu-22.04",
                twin_of="vscode-venv-without-ipykernel" if has_ipk else None,
                assumptions=[
                    "the environment is registered as kernelspec test_env (VS Code shows it as 'test_env (Python "
                    "3.12.1)'); Jupyter server from the system Python",
                    "torch 2.3.1+cu121 and an RTX 3080 (not shown; the terminal test ran on cuda:0)",
                    "Ubuntu 22.04 (kernel 6.5.0-35-generic is an Ubuntu 22.04 HWE kernel)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- gpu: driver vs other frameworks' CUDA


def fw_driver_case(
    name: str,
    source: str,
    title: str,
    *,
    framework: str,
    dist: str,
    version: str,
    cuda_major: int,
    wheels: Sequence[tuple[str, str]],
    driver: tuple[str, str],
    gpu_model: tuple[str, str],
    python: str,
    python_version: str,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    container: str | None = None,
    distro: tuple[str, str, str] = ("ubuntu", "22.04", "jammy"),
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
) -> Case:
    mm = ".".join(python_version.split(".")[:2])
    site = f"{python.rsplit('/bin/', 1)[0]}/lib/python{mm}/site-packages"
    probe = tprobe(
        python,
        torch_facts(installed=False),
        python_version=python_version,
        site_packages=(site,),
        distributions={dist: version, **dict(wheels)},
    )
    return Case(
        "gpu",
        name,
        source,
        title,
        "cuda.driver-too-old-for-framework",
        facts(
            nvidia=nvidia_facts(driver[0], driver[1], [gpu(*gpu_model)]),
            gpu=pci_gpus(1),
            os=os_facts(*distro, in_container=bool(container), kind=container),
            targets=targets(target(probe)),
            cuda_libraries=CudaLibrariesFacts(
                (LIB.model([]),),
                (FrameworkInstall("current", framework, dist, version, cuda_major, None, "field case", ()),),
            ),
            cuda_wheels=CudaWheelsFacts(
                (TargetWheels("current", (site,), tuple(WheelDist(n, v_) for n, v_ in wheels), ()),)
            ),
        ),
        artefacts,
        expect,
        framework=framework,
        platform=container or "host",
        distro="-".join(distro[:2]),
        twin_of=twin_of,
        assumptions=assumptions,
    )


def framework_driver_cases() -> list[Case]:
    out = []
    jax_wheels = [("nvidia-cuda-nvcc-cu12", "12.6.20"), ("nvidia-cuda-runtime-cu12", "12.6.37")]
    for name, driver, ok in (
        ("jax-cuda12-ptxas-126-driver-124", ("550.78", "12.4"), False),
        ("jax-cuda12-driver-560-ok", ("560.35.03", "12.6"), True),
    ):
        out.append(
            fw_driver_case(
                name,
                "https://github.com/jax-ml/jax/issues/20133",
                "jax[cuda12] brings ptxas 12.6 while the driver supports CUDA 12.4: XLA disables parallel compilation"
                + (" (twin: driver 560)" if ok else ""),
                framework="jax",
                dist="jax-cuda12-plugin",
                version="0.4.31",
                cuda_major=12,
                wheels=jax_wheels,
                driver=driver,
                gpu_model=("NVIDIA A100-SXM4-40GB", "8.0"),
                python="/home/user/venv/bin/python",
                python_version="3.11.9",
                artefacts={"report.txt": "Twin of jax-cuda12-ptxas-126-driver-124 with driver 560 (CUDA 12.6)."}
                if ok
                else {
                    "warning.txt": "The NVIDIA driver's CUDA version is 12.4 which is older than the PTX compiler "
                    "version (12.6.20). Because the driver is older than the PTX compiler version, XLA is disabling "
                    "parallel compilation, which may slow down compilation. You should update your NVIDIA driver or "
                    "use the NVIDIA-provided CUDA forward compatibility packages.",
                    "nvidia-smi.txt": "NVIDIA-SMI 550.78                 Driver Version: 550.78         CUDA Version: 12.4",
                    "ld-library-path.txt": "echo $LD_LIBRARY_PATH\n/lib64:/lib:/usr/local/lib:/usr/local/lib64:/usr/lib64:/usr/lib:",
                },
                expect={"status": "ok", "carrier": "cuda.driver", "fine": ["cuda.driver"]}
                if ok
                else {
                    "status": "ok",
                    "carrier": "cuda.driver",
                    "keywords": ["jax-cuda12-plugin", "12.6", "minor-version", "PTX"],
                    "fine": ["nvidia.driver"],
                },
                twin_of="jax-cuda12-ptxas-126-driver-124" if ok else None,
                assumptions=[
                    "pip install jax[cuda12] in a venv: jax-cuda12-plugin 0.4.31 with nvidia-cuda-nvcc-cu12 12.6.20 "
                    "(the PTX compiler version printed) and nvidia-cuda-runtime-cu12 12.6.37",
                    "GPU A100-SXM4-40GB, Python 3.11.9, Ubuntu 22.04 (not shown)",
                ],
            )
        )
    for name, driver, ok in (
        ("cupy-cuda11x-hpc-driver-418", ("418.87.01", "10.1"), False),
        ("cupy-cuda11x-hpc-driver-470-ok", ("470.182.03", "11.4"), True),
    ):
        out.append(
            fw_driver_case(
                name,
                "https://github.com/cupy/cupy/issues/9252",
                "pip install cupy-cuda11x on an HPC node whose driver predates CUDA 11: 'CUDA driver version is "
                "insufficient'" + (" (twin: driver 470)" if ok else ""),
                framework="cupy",
                dist="cupy-cuda11x",
                version="13.4.1",
                cuda_major=11,
                wheels=[],
                driver=driver,
                gpu_model=("Tesla V100-PCIE-32GB", "7.0"),
                python="/home/user/thesis/bin/python",
                python_version="3.10.12",
                distro=("rocky", "8.9", ""),
                artefacts={"report.txt": "Twin of cupy-cuda11x-hpc-driver-418 on a node with driver 470."}
                if ok
                else {
                    "report.txt": "I generally work on a HPC. Whenever I try to load CuPy I am often encountered with "
                    "`CUDA driver version is insufficient for CUDA runtime version`\n\nI have installed CuPy within a "
                    "python environment 'thesis'. I installed it using command 'pip install cupy-cuda11x'"
                },
                expect={"status": "ok", "carrier": "cuda.driver"}
                if ok
                else {
                    "status": "fail",
                    "carrier": "cuda.driver",
                    "keywords": ["cupy-cuda11x", "450.80.02", "418.87.01"],
                    "forbidden": ["--index-url https://download.pytorch.org"],
                    "fine": ["torch.install"],
                },
                twin_of="cupy-cuda11x-hpc-driver-418" if ok else None,
                assumptions=[
                    "driver not shown (a screenshot): 418.87.01 (CUDA 10.1), older than every CUDA 11 runtime as the "
                    "error implies"
                    if not ok
                    else "driver 470.182.03",
                    "cupy-cuda11x 13.4.1 (the release of July 2025); V100; Rocky Linux 8.9 cluster (not shown)",
                ],
            )
        )
    out.append(
        fw_driver_case(
            "onnxruntime-cuda13-build-driver-550",
            "https://github.com/onnxruntime/mobius/issues/316",
            "A CUDA 13 build of onnxruntime-gpu on CI runners whose driver supports CUDA 12: CUDA failure 35",
            framework="onnxruntime-gpu",
            dist="onnxruntime-gpu",
            version="1.24.1",
            cuda_major=13,
            wheels=[("nvidia-cuda-runtime", "13.0.96")],
            driver=("550.163.01", "12.4"),
            gpu_model=("Tesla T4", "7.5"),
            python="/opt/venv/bin/python",
            python_version="3.12.3",
            container="docker",
            distro=("ubuntu", "24.04", "noble"),
            artefacts={
                "ci-log.txt": "*************** EP Error ***************\nEP Error /onnxruntime_src/onnxruntime/core/"
                "providers/cuda/cuda_call.cc:122 ... CUDA failure 35: CUDA driver version is insufficient for CUDA "
                "runtime version ; GPU=-1 ; hostname=c4327188c000000 ; file=/onnxruntime_src/onnxruntime/core/"
                "providers/cuda/cuda_execution_provider.cc ; line=336 ; expr=cudaSetDevice(info_.device_id); ",
                "maintainer-note.txt": "Maybe we should upgrade the cuda driver or use the cuda 12 ort build?",
            },
            expect={
                "status": "fail",
                "carrier": "cuda.driver",
                "keywords": ["onnxruntime-gpu", "580", "CUDA 12"],
                "fine": ["torch.install"],
            },
            assumptions=[
                "the installed onnxruntime-gpu is a CUDA 13 build ('use the cuda 12 ort build'): 1.24.1 with the CUDA 13 "
                "runtime wheel (nvidia-cuda-runtime 13.0.96)",
                "runner driver 550.163.01 (CUDA 12.4), Tesla T4, Ubuntu 24.04 container (not shown)",
            ],
        )
    )
    return out


def quota_case(
    name: str,
    source: str,
    title: str,
    *,
    logical: int,
    quota: float | None,
    affinity: int | None = None,
    platform: str,
    framework: str,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
) -> Case:
    return Case(
        "data",
        name,
        source,
        title,
        "dataloader.cpu-count-overstated",
        facts(cpu=cpu_facts(logical, affinity=affinity, quota_cpus=quota)),
        artefacts,
        expect,
        framework=framework,
        platform=platform,
        twin_of=twin_of,
        assumptions=assumptions,
    )


def data_cases_2() -> list[Case]:
    out = []
    out.append(
        shm_case(
            "jupyterhub-k8s-pod-torch-bus-error",
            "https://github.com/pangeo-data/pangeo-docker-images/issues/258",
            "PyTorch DataLoader workers in a JupyterHub notebook pod (Kubernetes): bus error from the pod's small "
            "/dev/shm",
            "dataloader.shm-too-small",
            shm_total=64 * MIB,
            gpus=(("Tesla T4", "7.5"),),
            container="kubernetes",
            distro=("ubuntu", "20.04", "focal"),
            artefacts={
                "traceback.txt": "ERROR: Unexpected bus error encountered in worker. This might be caused by "
                "insufficient shared memory (shm).\nTraceback (most recent call last):\n"
                '  File "/srv/conda/envs/notebook/lib/python3.8/multiprocessing/queues.py", line 239, in _feed\n'
                "    obj = _ForkingPickler.dumps(obj)\n"
                '  File "/srv/conda/envs/notebook/lib/python3.8/site-packages/torch/multiprocessing/reductions.py",'
                " line 321, in reduce_storage\n    fd, size = storage._share_fd_()\n"
                "RuntimeError: unable to write to file </torch_1394_2747491098>"
            },
            expect={
                "status": "fail",
                "carrier": "dataloader.shm",
                "keywords": ["emptyDir", "medium: Memory"],
                "forbidden": ["docker run --shm-size", "mount -o remount"],
            },
            assumptions=[
                "the hub's user pods have the runtime's default 64 MB /dev/shm (no memory-backed emptyDir), as the "
                "issue concludes ('a small shared memory limit')",
                "a T4 GPU node, the pangeo image (Ubuntu 20.04, /srv/conda)",
            ],
        )
    )
    quota_warn = {"status": "warn", "carrier": "dataloader.cpu"}
    out.append(
        quota_case(
            "k8s-limit-4-of-12-cpu-max",
            "https://github.com/springfall2008/batpred/pull/4771",
            "An ML fine-tune in a pod with a 4-CPU limit on a 12-core node sizes its pool from cpu_count() (12)",
            logical=12,
            quota=4,
            platform="kubernetes",
            framework="torch",
            artefacts={
                "report.txt": "os.cpu_count()          -> 12\nsched_getaffinity        -> 12\n"
                "/sys/fs/cgroup/cpu.max   -> 400000 100000   # i.e. 4 cores"
            },
            expect={**quota_warn, "keywords": ["4", "12", "cpu.max"]},
        )
    )
    out.append(
        quota_case(
            "k8s-limit-4-of-12-twin-no-limit",
            "https://github.com/springfall2008/batpred/pull/4771",
            "The same node without a CPU limit: cpu_count() is right (twin)",
            logical=12,
            quota=None,
            platform="kubernetes",
            framework="torch",
            artefacts={"report.txt": "Twin of k8s-limit-4-of-12-cpu-max: cpu.max reads 'max 100000'."},
            expect={"status": "ok", "carrier": "dataloader.cpu"},
            twin_of="k8s-limit-4-of-12-cpu-max",
        )
    )
    out.append(
        quota_case(
            "compose-cpus-1-torchserve-16-workers",
            "https://github.com/pytorch/serve/issues/3150",
            "TorchServe in docker compose with `cpus: '1'`: os.cpu_count() says 16 and 16 workers start",
            logical=16,
            quota=1,
            platform="docker",
            framework="torchserve",
            artefacts={
                "compose.yaml": "deploy:\n  resources:\n    limits:\n      cpus: '1'\n      memory: 20G",
                "in-container.txt": "os.cpu_count()\n16",
            },
            expect={**quota_warn, "keywords": ["1", "16"]},
            assumptions=["cgroup v2 host (cpu.max 100000 100000 for cpus: '1')"],
        )
    )
    out.append(
        quota_case(
            "kserve-limit-4-of-40-torchscript-threads",
            "https://github.com/kserve/kserve/issues/1031",
            "TorchScript inference in a pod limited to 4 CPUs on a 40-core node: intra-op threads = 40, CFS throttling",
            logical=40,
            quota=4,
            platform="kubernetes",
            framework="torch",
            artefacts={
                "report.txt": "the torchscript library by default spawns number of intra-op threads which is equal "
                "to the number of cores available on the nodes the pod is scheduled to. If there are 40 cores on a "
                "node and cpu limit is set to 4, each thread only gets 4*100(cfs cpu period)/40=10ms to run for a "
                "given period and throttled for the next 90ms(stop the world)."
            },
            expect={**quota_warn, "keywords": ["4", "40"]},
            assumptions=["cgroup v2 node (cpu.max 400000 100000)"],
        )
    )
    out.append(
        quota_case(
            "gha-runner-2-cpus-10-workers",
            "https://github.com/pytorch/ignite/issues/1558",
            "ignite's distributed tests ask for 10 workers on a 2-CPU CI runner: no quota, cpu_count() is right",
            logical=2,
            quota=None,
            platform="host",
            framework="torch",
            artefacts={
                "warning.txt": "/opt/hostedtoolcache/Python/3.6.10/x64/lib/python3.6/site-packages/torch/utils/data/"
                "dataloader.py:477: UserWarning: This DataLoader will create 10 worker processes in total. Our "
                "suggested max number of worker in current system is 2, which is smaller than what this DataLoader is "
                "going to create. Please be aware that excessive worker creation might get DataLoader running slow "
                "or even freeze, lower the worker number to avoid potential slowness/freeze if necessary."
            },
            expect={"status": "ok", "carrier": "dataloader.cpu", "forbidden": ["cpu.max"]},
            assumptions=["a hosted 2-vCPU runner VM without a cgroup CPU limit"],
        )
    )
    return out


def compile_cases_2() -> list[Case]:
    out = []
    cc_fail = {"status": "fail", "carrier": "torch.compile", "keywords": ["gcc"]}
    for name, has_cc in (("pytorch-runtime-image-no-compiler", False), ("pytorch-runtime-image-with-gpp-ok", True)):
        out.append(
            compile_case(
                name,
                "https://github.com/pytorch/pytorch/issues/116696",
                "torch.compile in the official PyTorch CUDA *runtime* image: no C compiler"
                + (" (twin: g++ installed)" if has_cc else ""),
                "torch.compile-no-compiler",
                torch_version="2.10.0.dev20251209+cu129",
                cuda="12.9",
                python="/opt/conda/bin/python",
                python_version="3.11.14",
                python_h=True,
                include="/opt/conda/include/python3.11",
                compiler=has_cc,
                triton=TritonFacts(True, "3.5.1", True),
                container="docker",
                artefacts={"report.txt": "apt-get update -qq && apt-get install -y g++ ... SUCCESS!"}
                if has_cc
                else {
                    "docker-run.sh": "docker run --rm --gpus all ghcr.io/pytorch/pytorch-nightly:2.10.0.dev20251209-"
                    'cuda12.9-cudnn9-runtime bash -c "python -c ..."',
                    "comment.txt": "Installing g++ in the container is enough to fix the issue and adds 187 MB of "
                    "additional disk space.",
                },
                expect={"status": "ok", "carrier": "torch.compile"}
                if has_cc
                else {**cc_fail, "keywords": ["gcc", "RUN apt-get"], "forbidden": ["python3.11-dev", "sudo apt-get"]},
                twin_of="pytorch-runtime-image-no-compiler" if has_cc else None,
                assumptions=[
                    "the image's conda Python 3.11 with its own Python.h under /opt/conda/include; Ubuntu 22.04 base; "
                    "triton 3.5.1 (not shown)"
                ],
            )
        )
    out.append(
        compile_case(
            "olmo-research-image-debian-no-compiler",
            "https://github.com/allenai/OLMo-core/pull/804",
            "A bare Python base image (Debian) runs a training job with compile_model=True: 'Failed to find C "
            "compiler' at the first compiled region",
            "torch.compile-no-compiler",
            torch_version="2.8.0+cu128",
            cuda="12.8",
            python="/usr/local/bin/python",
            python_version="3.12.11",
            python_h=True,
            include="/usr/local/include/python3.12",
            compiler=False,
            triton=TritonFacts(True, "3.4.0", True),
            container="docker",
            distro=("debian", "12", "bookworm"),
            gpu_name=("NVIDIA A10G", "8.6"),
            artefacts={
                "error.txt": "InductorError: RuntimeError: Failed to find C compiler. Please specify via CC\n"
                "environment variable or set triton.knobs.build.impl."
            },
            expect={**cc_fail, "keywords": ["gcc", "RUN apt-get"], "forbidden": ["dnf install", "sudo apt-get"]},
            assumptions=[
                "python:3.12-bookworm style image (Python in /usr/local with its headers), torch 2.8.0+cu128, "
                "triton 3.4.0 (not shown)"
            ],
        )
    )
    out.append(
        compile_case(
            "sglang-runtime-image-no-compiler",
            "https://github.com/sgl-project/sglang/issues/1067",
            "sglang's image moved from a CUDA devel to a runtime base: CUDA-graph capture fails to find a C compiler",
            "torch.compile-no-compiler",
            torch_version="2.4.0+cu121",
            cuda="12.1",
            python="/usr/bin/python3",
            python_version="3.10.12",
            python_h=True,
            compiler=False,
            triton=TritonFacts(True, "3.0.0", True),
            container="docker",
            artefacts={
                "traceback.txt": "Initialization failed. controller_init_state: Traceback (most recent call last):\n"
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 344, in '
                "init_cuda_graphs\n    self.cuda_graph_runner.capture(batch_size_list)\n"
                "RuntimeError: Failed to find C compiler. Please specify via CC environment variable."
            },
            expect=cc_fail,
            assumptions=["Ubuntu 22.04 runtime image with python3.10-dev present; torch 2.4.0+cu121 (not shown)"],
        )
    )
    out.append(
        compile_case(
            "apptainer-pytorch-nightly-no-gpp",
            "https://github.com/pytorch/pytorch/issues/92745",
            "pytorch-nightly image under Singularity: torch.compile finds no C++ compiler (CPU) and no -lcuda (GPU)",
            "torch.compile-no-compiler",
            torch_version="2.0.0.dev20230120+cu117",
            cuda="11.7",
            python="/opt/conda/bin/python",
            python_version="3.10.8",
            python_h=True,
            include="/opt/conda/include/python3.10",
            compiler=False,
            triton=TritonFacts(True, "2.0.0", True),
            container="apptainer",
            distro=("ubuntu", "20.04", "focal"),
            artefacts={
                "run.sh": "singularity run --containall pytorch-nightly_latest.sif python -c \\\n  'import torch; import "
                "torchvision; x=torch.ones(1,3,224,224); model=torchvision.models.resnet50(); "
                "compiled=torch.compile(model); compiled(x)'",
                "report.txt": "on cpu, the error is that a suitable C++ compiler cannot be found. indeed `g++` does "
                "not appear to be installed in the container. on gpu, the error is that `-lcuda` is not found.",
            },
            expect={**cc_fail, "keywords": ["g++", "%post"], "forbidden": ["sudo apt-get"]},
            assumptions=[
                "gcc is missing too (the image ships no toolchain); the -lcuda half of the report is not replayed "
                "here (shared case 35 covers that kind)"
            ],
        )
    )
    return out


# --------------------------------------------------------------------------- libraries: NCCL wheel older than torch pins


def nccl_pin_case(
    name: str,
    source: str,
    title: str,
    *,
    installed: str,
    python: str,
    python_version: str,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    platform: str = "host",
    wsl: bool = False,
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
) -> Case:
    mm = ".".join(python_version.split(".")[:2])
    prefix = python.rsplit("/bin/", 1)[0]
    site = (
        f"/home/user/.local/lib/python{mm}/site-packages"
        if prefix == "/usr"
        else f"{prefix}/lib/python{mm}/site-packages"
    )
    torch_cuda = f"{site}/torch/lib/libtorch_cuda.so"
    pins = ("nvidia-nccl-cu12==2.19.3", "nvidia-cudnn-cu12==8.9.2.26")
    fw = FrameworkInstall(
        "current",
        "torch",
        "torch",
        "2.2.0",
        12,
        8,
        "local version tag",
        (torch_cuda,),
        pins,
        (f"nvidia-nccl-cu12=={installed}", "nvidia-cudnn-cu12==8.9.2.26"),
    )
    import_error = None if installed == "2.19.3" else f"ImportError: {torch_cuda}: undefined symbol: ncclCommRegister"
    tf = (
        torch_facts("2.2.0", import_error=import_error)
        if import_error
        else cuda_torch("2.2.0", "12.1", devices=[CudaDevice(0, "NVIDIA GeForce RTX 4070 Ti SUPER", "8.9")])
    )
    return Case(
        "libraries",
        name,
        source,
        title,
        "cuda.libraries-nccl-older-than-pin",
        facts(
            nvidia=nvidia_facts(
                "550.54.15", "12.4", [gpu("NVIDIA GeForce RTX 4070 Ti SUPER", "8.9", memory_mib=16376)]
            ),
            gpu=pci_gpus(0 if wsl else 1),
            os=os_facts("ubuntu", "22.04", "jammy", wsl=wsl, kernel=WSL_KERNEL if wsl else "6.5.0-26-generic"),
            targets=targets(
                target(
                    tprobe(python, tf, python_version=python_version, site_packages=(site,), is_venv=prefix != "/usr")
                )
            ),
            cuda_libraries=LIB.libs_facts(LIB.model([f"torch:{torch_cuda}"]), [fw], WSL_FILES if wsl else LIB.NO_WSL),
        ),
        artefacts,
        expect,
        framework="torch",
        platform=platform,
        distro="ubuntu-22.04",
        twin_of=twin_of,
        assumptions=[
            "torch 2.2.0 pins nvidia-nccl-cu12==2.19.3 (its Requires-Dist); driver 550.54.15 (not shown)",
            *assumptions,
        ],
    )


def nccl_pin_cases() -> list[Case]:
    fail = {
        "status": "fail",
        "carrier": "cuda.libraries",
        "keywords": ["nvidia-nccl-cu12==2.19.3", "pip check"],
        "forbidden": ["--force-reinstall torch", "LD_LIBRARY_PATH=/usr/local/nccl"],
    }
    return [
        nccl_pin_case(
            "torch22-nccl-wheel-2-18-ms-amp",
            "https://github.com/pytorch/pytorch/issues/119072",
            "import torch 2.2 fails with 'undefined symbol: ncclCommRegister': another package moved "
            "nvidia-nccl-cu12 back to 2.18",
            installed="2.18.1",
            python="/home/user/venv/bin/python",
            python_version="3.10.12",
            artefacts={
                "comment.txt": "From the other issue, it sounds like the likely cause is that you have another package "
                "that also provides the NCCL library, but the versions are incompatible.\n\n Either downgrade to "
                "PyTorch 2.1.2 or remove the conflicting package (possibly https://github.com/Azure/MS-AMP)"
            },
            expect=fail,
            assumptions=["nvidia-nccl-cu12 2.18.1 installed (the version MS-AMP's requirements pulled)"],
        ),
        nccl_pin_case(
            "torch22-user-site-wsl-nccl-2-18",
            "https://github.com/pytorch/pytorch/issues/119932",
            "torch 2.2 in ~/.local under WSL 2: import fails with 'undefined symbol: ncclCommRegister'",
            installed="2.18.1",
            python="/usr/bin/python3",
            python_version="3.10.12",
            platform="wsl",
            wsl=True,
            artefacts={
                "traceback.txt": '>>> import torch\nTraceback (most recent call last):\n  File "<stdin>", line 1, in '
                '<module>\n  File "/home/user/.local/lib/python3.10/site-packages/torch/__init__.py", line 237, in '
                "<module>\n    from torch._C import *  # noqa: F403\nImportError: /home/user/.local/lib/python3.10/"
                "site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister"
            },
            expect=fail,
            assumptions=["nvidia-nccl-cu12 2.18.1 in the user site (not shown)"],
        ),
        nccl_pin_case(
            "torch22-conda-env-nccl-2-18-yolov10",
            "https://github.com/THU-MIG/yolov10/issues/306",
            "yolov10's conda env: libtorch_cuda.so: undefined symbol: ncclCommRegister",
            installed="2.18.3",
            python="/root/.local/conda/envs/yolov10/bin/python",
            python_version="3.9.19",
            artefacts={
                "title.txt": "ImportError: /root/.local/conda/envs/yolov10/lib/python3.9/site-packages/torch/lib/"
                "libtorch_cuda.so: undefined symbol: ncclCommRegister"
            },
            expect=fail,
            assumptions=["torch 2.2.0 with nvidia-nccl-cu12 2.18.3 (the body is a screenshot)"],
        ),
        nccl_pin_case(
            "torch22-nccl-wheel-at-pin-ok",
            "https://github.com/pytorch/pytorch/issues/119072",
            "torch 2.2 with nvidia-nccl-cu12 2.19.3 as pinned (twin)",
            installed="2.19.3",
            python="/home/user/venv/bin/python",
            python_version="3.10.12",
            artefacts={
                "report.txt": "Twin of torch22-nccl-wheel-2-18-ms-amp after `pip install nvidia-nccl-cu12==2.19.3`."
            },
            expect={"status": "ok", "carrier": "cuda.libraries", "fine": ["torch.install"]},
            twin_of="torch22-nccl-wheel-2-18-ms-amp",
        ),
    ]


def kernel_missing_case(
    name: str,
    source: str,
    title: str,
    *,
    kernel_python: str,
    exists: bool,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    kernel_name: str = "python3",
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
    has_ipykernel: bool = True,
    kind: str = "jupyter.kernel-interpreter-missing",
) -> Case:
    terminal_py = "/home/user/venv/bin/python"
    tf = cuda_torch("2.1.2+cu121", "12.1", devices=[CudaDevice(0, "NVIDIA GeForce RTX 3090", "8.6")])
    terminal = tprobe(
        terminal_py, tf, python_version="3.10.12", distributions={"torch": "2.1.2+cu121", "ipykernel": "6.28.0"}
    )
    spec = replace(
        kspec(kernel_name, kernel_python, "Python 3 (ipykernel)"),
        interpreter=KernelInterpreter(kernel_python, 0, "absolute", exists),
    )
    if exists:
        dists = {"torch": "2.1.2+cu121", **({"ipykernel": "6.28.0"} if has_ipykernel else {})}
        kprobe: Any = tprobe(kernel_python, tf, python_version="3.10.12", distributions=dists)
    else:
        kprobe = Unavailable(f"{kernel_python} does not exist")
    jf = JupyterFacts(
        "/usr/bin/python3",
        "PATH",
        "3.10.12",
        "8.6.0",
        "/home/user/.local/share/jupyter",
        ("/home/user/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels"),
        (spec,),
    )
    return Case(
        "notebooks",
        name,
        source,
        title,
        kind,
        facts(
            jupyter=jf,
            targets=targets(
                target(terminal), target(kprobe, label=f"kernel:{kernel_name}", kind="kernel", python=kernel_python)
            ),
            nvidia=nvidia_facts("535.154.05", "12.2", [gpu("NVIDIA GeForce RTX 3090", "8.6")]),
            gpu=pci_gpus(1),
            os=os_facts("ubuntu", "22.04", "jammy"),
        ),
        artefacts,
        expect,
        framework="torch",
        platform="host",
        distro="ubuntu-22.04",
        twin_of=twin_of,
        assumptions=[
            "the terminal's interpreter is /home/user/venv/bin/python with torch 2.1.2+cu121 on an RTX 3090 "
            "(the report is about the kernel only)",
            *assumptions,
        ],
    )


def notebook_cases_2() -> list[Case]:
    out = []
    gone = "/home/user/oldenv/bin/python3"
    out.append(
        kernel_missing_case(
            "kernelspec-points-to-removed-venv",
            "https://github.com/jupyter/jupyter_client/issues/269",
            "launch_kernel fails with FileNotFoundError: the kernelspec still points at a removed virtualenv's python3",
            kernel_python=gone,
            exists=False,
            artefacts={
                "maintainer-reply.txt": "Run `jupyter kernelspec list` - it should show you the location of the "
                "kernelspec, which is probably pointing to the old virtualenv. You can just remove that directory, it "
                "should detect your current Python by default. Or you can install a new kernelspec in its place."
            },
            expect={
                "status": "fail",
                "carrier": "jupyter.kernels",
                "keywords": [gone, "kernel.json"],
                "forbidden": ["pip install --force-reinstall"],
            },
            assumptions=["the removed venv was /home/user/oldenv (the report names no path)"],
        )
    )
    out.append(
        kernel_missing_case(
            "kernelspec-reinstalled-current-venv-ok",
            "https://github.com/jupyter/jupyter_client/issues/269",
            "The same kernelspec re-installed from the current venv (twin)",
            kernel_python="/home/user/venv/bin/python",
            exists=True,
            artefacts={
                "report.txt": "Twin of kernelspec-points-to-removed-venv after `python -m ipykernel install --user`."
            },
            expect={"status": "ok", "carrier": "jupyter.kernels"},
            twin_of="kernelspec-points-to-removed-venv",
        )
    )
    conda_gone = "/home/user/anaconda/envs/pyk3/bin/python"
    out.append(
        kernel_missing_case(
            "kernelspec-points-to-removed-conda-env",
            "https://github.com/anaconda/nb_conda_kernels/issues/55",
            "'Kernel Error' after reinstalling Anaconda: a kernelspec still runs the removed env pyk3",
            kernel_python=conda_gone,
            exists=False,
            kernel_name="pyk3",
            artefacts={
                "kernel-error.txt": "FileNotFoundError: [Errno 2] No such file or directory: "
                "'/home/user/anaconda/envs/pyk3/bin/python'"
            },
            expect={"status": "fail", "carrier": "jupyter.kernels", "keywords": [conda_gone]},
            assumptions=[
                "a Linux home (/home/user) instead of the reporter's macOS /Users/<name>: the mechanism does not "
                "depend on it"
            ],
        )
    )
    out.append(
        kernel_missing_case(
            "kernel-dies-no-module-ipython",
            "https://github.com/jupyter/notebook/issues/3434",
            "The kernel keeps dying: its interpreter has no IPython/ipykernel",
            kernel_python="/home/user/venv/bin/python",
            exists=True,
            has_ipykernel=False,
            kind="jupyter.kernel-no-ipykernel",
            artefacts={
                "maintainer-reply.txt": "It looks like the crucial bit of that is `ModuleNotFoundError: No module "
                "named 'IPython'`. It can't find IPython when it tries to import it. It might be installed on a "
                "different version of Python or in a different environment."
            },
            expect={"status": "fail", "carrier": "jupyter.kernels", "keywords": ["ipykernel", "pip install ipykernel"]},
            assumptions=["the kernel's interpreter is the venv the user works in, without ipykernel"],
        )
    )
    return out


# --------------------------------------------------------------------------- gpu: CUDA_VISIBLE_DEVICES


def cvd_case(
    name: str,
    source: str,
    title: str,
    *,
    cvd: str,
    ngpus: int,
    artefacts: Mapping[str, str],
    expect: Mapping[str, Any],
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
) -> Case:
    devs = [gpu("NVIDIA GeForce RTX 3090", "8.6", index=i) for i in range(ngpus)]
    idx = [int(x) for x in cvd.split(",") if x.strip().isdigit()]
    visible = [i for i in idx if i < ngpus]
    ok = bool(idx) and visible == idx
    tf = cuda_torch(
        "2.1.2+cu121",
        "12.1",
        available=ok,
        devices=[CudaDevice(j, "NVIDIA GeForce RTX 3090", "8.6") for j, _ in enumerate(visible)] if ok else (),
    )
    py = "/home/user/miniconda3/envs/exp/bin/python"
    return Case(
        "gpu",
        name,
        source,
        title,
        "cuda.devices-visible-devices-invalid",
        facts(
            nvidia=nvidia_facts("535.154.05", "12.2", devs),
            gpu=pci_gpus(ngpus),
            os=os_facts("ubuntu", "20.04", "focal"),
            targets=targets(
                target(
                    tprobe(
                        py,
                        tf,
                        env={"PATH": "/home/user/miniconda3/envs/exp/bin:/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": cvd},
                    )
                )
            ),
        ),
        artefacts,
        expect,
        framework="torch",
        platform="host",
        distro="ubuntu-20.04",
        twin_of=twin_of,
        assumptions=[
            "the process sees CUDA_VISIBLE_DEVICES as shown (set by the launch script, or by the code before CUDA "
            "starts; `gpudoctor gate -- <command>` sees the launcher's value)",
            f"{ngpus} RTX 3090 GPU(s), driver 535.154.05, torch 2.1.2+cu121 (not shown)",
            *assumptions,
        ],
    )


def cvd_cases() -> list[Case]:
    fail = {"status": "fail", "carrier": "cuda.devices", "keywords": ["CUDA_VISIBLE_DEVICES"]}
    return [
        cvd_case(
            "cvd-7-on-one-gpu-ptqd",
            "https://github.com/ziplab/PTQD/issues/13",
            "The code sets CUDA_VISIBLE_DEVICES='7' (the authors' GPU): 'No CUDA GPUs are available' on a 1-GPU machine",
            cvd="7",
            ngpus=1,
            artefacts={
                "report.txt": "It is strongly recommended to remove the setting of cuda device ID in the code：\n"
                "`import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '7'\n`\n\nas the error message No CUDA GPUs are "
                "available keeps running"
            },
            expect={**fail, "keywords": ["CUDA_VISIBLE_DEVICES", "7"]},
        ),
        cvd_case(
            "cvd-1-on-one-gpu-comosvc",
            "https://github.com/Grace9994/CoMoSVC/issues/6",
            "train.py sets CUDA_VISIBLE_DEVICES='1': training fails with 'No CUDA GPUs are available' on one GPU",
            cvd="1",
            ngpus=1,
            artefacts={
                "report.txt": "If not comment out the line `os.environ[\"CUDA_VISIBLE_DEVICES\"]='1'` in train.py, "
                "training will encounter an error: `RuntimeError: No CUDA GPUs are available`."
            },
            expect=fail,
        ),
        cvd_case(
            "cvd-3-on-one-gpu-samus",
            "https://github.com/xianlin7/SAMUS/issues/39",
            "The code selects GPU 3 (CUDA_VISIBLE_DEVICES='3'); with one GPU only '0' works",
            cvd="3",
            ngpus=1,
            artefacts={
                "comment.txt": "os.environ[\"CUDA_VISIBLE_DEVICES\"] = '3'   作者在 第四行设置了第三个gpu "
                "多卡跑没问题但是单卡的话必须设置为0",
                "error.txt": "RuntimeError: No CUDA GPUs are available",
            },
            expect=fail,
        ),
        cvd_case(
            "cvd-0-on-one-gpu-ok",
            "https://github.com/KeYang8/WITT/issues/34",
            "CUDA_VISIBLE_DEVICES='0' on a one-GPU machine: the GPU is visible (twin)",
            cvd="0",
            ngpus=1,
            artefacts={"comment.txt": 'Resolved\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"'},
            expect={"status": "ok", "carrier": "cuda.devices", "fine": ["cuda.available"]},
            twin_of="cvd-1-on-one-gpu-comosvc",
        ),
    ]


def tf_kernel_case(
    name: str,
    source: str,
    title: str,
    *,
    tf_version: str,
    python: str,
    python_version: str,
    terminal_ld: str,
    kernel_ld: str,
    held: Mapping[str, Sequence[str]],
    artefacts: Mapping[str, str],
    platform: str = "host",
    distro: str = "ubuntu-22.04",
    assumptions: Sequence[str] = (),
    twin_of: str | None = None,
) -> Case:
    def p(ld: str) -> ProbeFacts:
        env = {"PATH": f"{python.rsplit('/bin/', 1)[0]}/bin:/usr/bin:/bin"}
        if ld:
            env["LD_LIBRARY_PATH"] = ld
        return tprobe(
            python,
            torch_facts(installed=False),
            python_version=python_version,
            env=env,
            distributions={"tensorflow": tf_version, "ipykernel": "6.23.1"},
        )

    jf = JupyterFacts(
        python,
        "PATH",
        python_version,
        "8.3.0",
        "/home/user/.local/share/jupyter",
        ("/home/user/.local/share/jupyter/kernels",),
        (kspec("python3", python, "Python 3 (ipykernel)"),),
    )
    return Case(
        "notebooks",
        name,
        source,
        title,
        "jupyter.kernel-loader-path",
        facts(
            jupyter=jf,
            targets=targets(target(p(terminal_ld)), target(p(kernel_ld), label="kernel:python3", kind="kernel")),
            nvidia=nvidia_facts("530.41.03", "12.1", [gpu("NVIDIA GeForce RTX 2070", "7.5", memory_mib=8192)]),
            gpu=pci_gpus(1),
            os=os_facts(*distro.split("-"), "jammy"),
            loader=LoaderFacts(
                (),
                (),
                (),
                tuple(
                    LibraryDir(d, "LD_LIBRARY_PATH", True, tuple(LibraryFile(n, f"{d.rstrip('/')}/{n}") for n in names))
                    for d, names in held.items()
                ),
            ),
        ),
        artefacts,
        {"status": "ok", "carrier": "jupyter.kernels", "fine": ["torch.install"]}
        if twin_of
        else {
            "status": "fail",
            "carrier": "jupyter.kernels",
            "keywords": ["LD_LIBRARY_PATH", "kernel.json", "tensorflow"],
            "forbidden": ["pip install --force-reinstall"],
            "fine": ["torch.install", "cuda.available"],
        },
        framework="tensorflow",
        platform=platform,
        distro=distro,
        twin_of=twin_of,
        assumptions=["driver 530.41.03 and the GPU model are not shown", *assumptions],
    )


def tf_notebook_cases() -> list[Case]:
    env = "/home/user/miniconda3/envs/tf"
    cudnn = f"{env}/lib/python3.10/site-packages/nvidia/cudnn/lib"
    return [
        tf_kernel_case(
            "tf212-conda-activate-ld-path-not-in-jupyter",
            "https://github.com/tensorflow/tensorflow/issues/60790",
            "TF 2.12 sees the GPU in the terminal (activate.d sets LD_LIBRARY_PATH), not in JupyterLab",
            tf_version="2.12.0",
            python=f"{env}/bin/python",
            python_version="3.10.11",
            terminal_ld=f":{env}/lib/:{cudnn}/lib".lstrip(":"),
            kernel_ld="",
            held={
                f"{env}/lib/": ["libcudart.so.11.0", "libcublas.so.11", "libcufft.so.10"],
                f"{cudnn}/lib": ["libcudnn.so.8"],
            },
            artefacts={
                "report.txt": "TF sees the GPUs on terminal, but not on jupyter lab.\n\nEventually, after hours, I found a "
                "temporary solution in setting the paths each time, before I launch `jupyter lab` :\n\n"
                'CUDNN_PATH=$(dirname $(python -c "import nvidia.cudnn;print(nvidia.cudnn.__file__)"))\n'
                "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CONDA_PREFIX/lib/:$CUDNN_PATH/lib"
            },
            assumptions=[
                "the conda env 'tf' under /home/user/miniconda3; JupyterLab started outside the activated env"
            ],
        ),
        tf_kernel_case(
            "tf29-conda-terminal-ok-notebook-libcudart-missing",
            "https://github.com/tensorflow/tensorflow/issues/56959",
            "TF 2.9.1: the GPU is detected in the terminal but not in a notebook of the same conda env",
            tf_version="2.9.1",
            python=f"{env}/bin/python",
            python_version="3.9.13",
            terminal_ld=f"{env}/lib/",
            kernel_ld="",
            held={f"{env}/lib/": ["libcudart.so.11.0", "libcublas.so.11", "libcudnn.so.8"]},
            artefacts={
                "log.txt": "2022-07-30 14:43:50.994118: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] "
                "Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared "
                "object file: No such file or directory\n2022-07-30 14:43:50.994146: W tensorflow/stream_executor/"
                "platform/default/dso_loader.cc:64] Could not load dynamic library 'libcublas.so.11'; dlerror: "
                "libcublas.so.11: cannot open shared object file: No such file or directory"
            },
            assumptions=[
                "the env follows tensorflow.org's conda instructions of the time (activate.d exports "
                "LD_LIBRARY_PATH=$CONDA_PREFIX/lib/); Kubuntu 22.04 as reported"
            ],
        ),
    ]


def conda_cpu_cases() -> list[Case]:
    out = []
    prefix = "/home/user/anaconda3/envs/env2"
    for name, version, cuda, ok in (
        ("conda-env2-pytorch14-cpuonly", "1.4.0", None, False),
        ("conda-env1-pytorch131-cuda100-ok", "1.3.1", "10.0", True),
    ):
        pre = prefix if not ok else prefix.replace("env2", "env1")
        tf = (
            cuda_torch(
                version,
                cuda,
                devices=[CudaDevice(0, "GeForce GTX 1080 Ti", "6.1")],
                arch=arch("35", "50", "60", "61", "70", "75", ptx="75"),
            )
            if ok
            else torch_facts(version, None, cuda_available=False, device_count=0)
        )
        out.append(
            Case(
                "gpu",
                name,
                "https://github.com/pytorch/pytorch/issues/32369",
                "conda asked for PyTorch 1.4.0 with CUDA 10.1 installs the cpuonly build"
                + (" (twin: env1, pytorch 1.3.1 cuda100)" if ok else ""),
                "torch.install-cpu-build-on-gpu",
                facts(
                    nvidia=nvidia_facts("418.87.00", "10.1", [gpu("GeForce GTX 1080 Ti", "6.1", memory_mib=11178)]),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "16.04", "xenial"),
                    targets=targets(
                        target(tprobe(f"{pre}/bin/python", tf, python_version="3.7.6", is_conda=True, is_venv=False))
                    ),
                ),
                {"report.txt": "Twin: collect_env on env1: pytorch 1.3.1 cuda100py37h53c1284_0, Is CUDA available: Yes"}
                if ok
                else {
                    "collect-env.txt": "# collect_env on Conda env2\nPyTorch version: 1.4.0\nIs debug build: No\n"
                    "CUDA used to build PyTorch: None\n\nOS: Ubuntu 16.04.6 LTS\nPython version: 3.7\n"
                    "Is CUDA available: No\n",
                    "conda-list.txt": "pytorch                   1.4.0               py3.7_cpu_0  [cpuonly]  pytorch",
                },
                {"status": "ok", "carrier": "torch.install", "fine": ["cuda.driver", "cuda.arch"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "torch.install",
                    "keywords": ["CPU-only", "conda list", "cpuonly", "conda install"],
                },
                framework="torch",
                platform="host",
                distro="ubuntu-16.04",
                twin_of="conda-env2-pytorch14-cpuonly" if ok else None,
                assumptions=[
                    "driver 418.87.00 and a GTX 1080 Ti (the GPU lines of collect_env are cut in the excerpt)"
                ],
            )
        )
    pre = "/home/user/miniconda3/envs/hoist"
    out.append(
        Case(
            "gpu",
            "conda-pytorch19-cudatoolkit111-gets-cpu",
            "https://github.com/SupreethN/HOISTFormer/issues/3",
            "conda install pytorch==1.9.0 cudatoolkit=11.1 -c pytorch -c nvidia installs the CPU build",
            "torch.install-cpu-build-on-gpu",
            facts(
                nvidia=nvidia_facts("535.183.01", "12.2", [gpu("NVIDIA GeForce RTX 3090", "8.6")]),
                gpu=pci_gpus(1),
                os=os_facts("ubuntu", "22.04", "jammy"),
                targets=targets(
                    target(
                        tprobe(
                            f"{pre}/bin/python",
                            torch_facts("1.9.0", None, cuda_available=False, device_count=0),
                            python_version="3.8.19",
                            is_conda=True,
                            is_venv=False,
                        )
                    )
                ),
            ),
            {
                "report.txt": "conda install pytorch==1.9.0 torchvision==0.10.0 cudatoolkit=11.1 -c pytorch -c nvidia\n\n"
                "This command installs cpu version instead of cuda.\n\nUsing pip instead, fixees this.\n\n"
                "pip install torch==1.9.0+cu111 torchvision==0.10.0+cu111 torchaudio==0.9.0 -f "
                "https://download.pytorch.org/whl/torch_stable.html"
            },
            {"status": "fail", "carrier": "torch.install", "keywords": ["CPU-only", "conda list", "1.9.0"]},
            framework="torch",
            platform="host",
            distro="ubuntu-22.04",
            assumptions=["Linux host with an RTX 3090 and driver 535.183.01, Python 3.8 (not shown)"],
        )
    )
    return out


def typo_cases() -> list[Case]:
    out = []
    rows = (
        (
            "cluster-sets-cuda-visable-devices",
            "https://github.com/cBio/cbio-cluster/issues/1",
            "The cluster exports CUDA_VISABLE_DEVICES (misspelled): CUDA_VISIBLE_DEVICES is empty, every GPU is visible",
            {"CUDA_VISABLE_DEVICES": "0"},
            4,
            "cluster-shell.txt",
            "-bash-4.1$ echo $CUDA_VISIBLE_DEVICES\n\n-bash-4.1$ echo $CUDA_VISABLE_DEVICES\n0",
            ["CUDA_VISABLE_DEVICES", "CUDA_VISIBLE_DEVICES", "export CUDA_VISIBLE_DEVICES=0"],
            "slurm",
            ("centos", "6", ""),
            ["a 4-GPU node (the scheduler's prolog sets the variable for one GPU; node size not shown)"],
        ),
        (
            "docs-cuda-visible-typo-mmagic",
            "https://github.com/open-mmlab/mmagic/issues/1580",
            "The training docs say `CUDA_VISIBLE=0 python tools/train.py`: the variable does not select a GPU",
            {"CUDA_VISIBLE": "0"},
            2,
            "docs.txt",
            'I find that the environment variable CUDA_VISIBLE in the code "CUDA_VISIBLE=0 python tools/train.py '
            'configs/example_config.py --work-dir work_dirs/example" in mmediting/docs/en/user_guides/train_test.md '
            "can't seem to select GPU devices.",
            ["CUDA_VISIBLE", "CUDA_VISIBLE_DEVICES"],
            "host",
            ("ubuntu", "20.04", "focal"),
            ["a 2-GPU workstation (not shown); the command runs under `gpudoctor gate -- ...`, which sees its env"],
        ),
    )
    for name, src, title, env, n, fname, text, keywords, platform, distro, assumptions in rows:
        devs = [gpu("NVIDIA GeForce RTX 3090", "8.6", index=i) for i in range(n)]
        tf = cuda_torch(
            "1.13.1+cu117",
            "11.7",
            devices=[CudaDevice(i, "NVIDIA GeForce RTX 3090", "8.6", f"0000:{i + 1:02x}:00.0") for i in range(n)],
        )
        out.append(
            Case(
                "gpu",
                name,
                src,
                title,
                "cuda.devices-selection-variable-misspelled",
                facts(
                    nvidia=nvidia_facts("535.154.05", "12.2", devs),
                    gpu=pci_gpus(n),
                    os=os_facts(*distro),
                    targets=targets(
                        target(tprobe("/home/user/venv/bin/python", tf, env={"PATH": "/usr/bin:/bin", **env}))
                    ),
                ),
                {fname: text},
                {"status": "warn", "carrier": "cuda.devices", "keywords": keywords},
                framework="torch",
                platform=platform,
                distro="-".join(x for x in distro[:2] if x),
                assumptions=["torch 1.13.1+cu117, RTX 3090s, driver 535.154.05 (not shown)", *assumptions],
            )
        )
    return out


def tf_mismatch_cases_2() -> list[Case]:
    tf = tf_probe(
        "/usr/bin/python2.7",
        "1.10.0",
        LibcudaProbe(True, f"{SYSLIB}/libcuda.so.352.63", None, None),
        python_version="2.7.6",
    )
    return [
        Case(
            "gpu",
            "tf110-nvidia-smi-352-kernel-384",
            "https://github.com/tensorflow/tensorflow/issues/22718",
            "tensorflow-gpu 1.10: cuInit CUDA_ERROR_UNKNOWN; nvidia-smi prints NVIDIA-SMI 352.63 with Driver Version "
            "384.130",
            "cuda.libcuda-version-mismatch",
            facts(
                nvidia=nvidia_facts(
                    "384.130",
                    source="proc",
                    devices=[gpu("GeForce GTX TITAN X", "5.2", index=i, memory_mib=12206) for i in range(3)],
                ),
                gpu=pci_gpus(3),
                os=os_facts("ubuntu", "14.04", "trusty"),
                targets=targets(target(tf)),
            ),
            {
                "nvidia-smi.txt": "+------------------------------------------------------+                       \n"
                "| NVIDIA-SMI 352.63     Driver Version: 384.130        |                       \n"
                "|-------------------------------+----------------------+----------------------+\n"
                "|   0  GeForce GTX TIT...  Off  | 0000:02:00.0     Off |                  N/A |",
                "error.txt": "tensorflow-gpu-1.10: failed call to cuInit: CUDA_ERROR_UNKNOWN",
            },
            {"status": "fail", "carrier": "cuda.libcuda", "keywords": ["352.63", "384.130", "mismatch"]},
            framework="tensorflow",
            platform="host",
            distro="ubuntu-14.04",
            assumptions=[
                "libcuda comes from the same leftover 352.63 user-space install as nvidia-smi (NVIDIA-SMI 352.63)",
                "three GTX TITAN X shown; Python 2.7 as reported",
            ],
        )
    ]


def more_twins() -> list[Case]:
    """Healthy twins of fault cases that had none: the same machine after the remedy the report or the
    tool names."""
    out = []
    tf = cuda_torch("1.3.0", "10.1", devices=[CudaDevice(0, "GeForce GTX 1080 Ti", "6.1")], driver_api_version=10010)
    out.append(
        Case(
            "gpu",
            "venv-torch130-cu101-driver-418-ok",
            "https://github.com/ivadomed/ivadomed/issues/69",
            "The same venv after a driver upgrade to 418.87 (CUDA 10.1) (twin)",
            "cuda.driver-too-old",
            facts(
                nvidia=nvidia_facts("418.87.00", "10.1", [gpu("GeForce GTX 1080 Ti", "6.1", memory_mib=11178)]),
                gpu=pci_gpus(1, device_id="0x1b06"),
                os=os_facts("ubuntu", "18.04", "bionic"),
                targets=targets(target(tprobe("/home/user/ivadomed/venv/bin/python", tf, python_version="3.6.8"))),
            ),
            {"report.txt": "Twin of venv-torch130-cu101-driver-410 with driver 418.87.00."},
            {"status": "ok", "carrier": "cuda.driver", "fine": ["nvidia.driver", "torch.install"]},
            framework="torch",
            platform="host",
            distro="ubuntu-18.04",
            twin_of="venv-torch130-cu101-driver-410",
        )
    )
    out.append(
        arch_case(
            "rtx5090-docker-torch27-cu128-ok",
            "https://github.com/pBFSLab/DeepPrep/issues/233",
            "The container rebuilt on torch 2.7.0+cu128, whose kernels include sm_120 (twin)",
            "NVIDIA GeForce RTX 5090",
            "12.0",
            "2.7.0+cu128",
            "12.8",
            ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
            ("570.124.06", "12.8"),
            "Twin of rtx5090-docker-torch201-cu118-sm120 with torch 2.7.0+cu128.",
            {"status": "ok", "carrier": "cuda.arch", "fine": ["cuda.driver"]},
            python="/opt/conda/bin/python",
            container="docker",
            memory_mib=32607,
            twin_of="rtx5090-docker-torch201-cu118-sm120",
        )
    )
    out.append(
        Case(
            "gpu",
            "tf-host-libcuda-384-matches-kernel",
            "https://github.com/tensorflow/tensorflow/issues/22525",
            "The laptop after removing the 375 leftovers: libcuda and the kernel module are both 384.130 (twin)",
            "cuda.libcuda-version-mismatch",
            facts(
                nvidia=nvidia_facts("384.130", "9.0", [gpu("GeForce GTX 1060", "6.1")]),
                gpu=pci_gpus(1),
                os=os_facts("ubuntu", "16.04", "xenial"),
                targets=targets(
                    target(
                        tf_probe(
                            "/usr/bin/python3", "1.10.0", LibcudaProbe(True, f"{SYSLIB}/libcuda.so.384.130", None, 9000)
                        )
                    )
                ),
            ),
            {"report.txt": "Twin of tf-host-libcuda-375-kernel-384 after purging the 375 user-space libraries."},
            {"status": "ok", "carrier": "cuda.libcuda", "fine": ["nvidia.driver"]},
            framework="tensorflow",
            platform="host",
            distro="ubuntu-16.04",
            twin_of="tf-host-libcuda-375-kernel-384",
        )
    )
    for name, of, gpus, src, title in (
        (
            "jupyterhub-k8s-pod-emptydir-ok",
            "jupyterhub-k8s-pod-torch-bus-error",
            (("Tesla T4", "7.5"),),
            "https://github.com/pangeo-data/pangeo-docker-images/issues/258",
            "The hub's pods with a memory-backed emptyDir at /dev/shm (8 GiB) (twin)",
        ),
        (
            "nccl-kubeflow-4xT4-emptydir-ok",
            "nccl-kubeflow-4xT4-emptydir",
            tuple(("Tesla T4", "7.5") for _ in range(4)),
            "https://github.com/NVIDIA/nccl/issues/525",
            "The Kubeflow pod with the reporter's emptyDir (medium: Memory) at /dev/shm (twin)",
        ),
    ):
        out.append(
            shm_case(
                name,
                src,
                title,
                "nccl.shm-too-small" if "nccl" in name else "dataloader.shm-too-small",
                shm_total=8 * GIB,
                gpus=gpus,
                container="kubernetes",
                artefacts={"report.txt": f"Twin of {of}: /dev/shm is an 8 GiB emptyDir (medium: Memory)."},
                expect={"status": "ok", "carrier": "dataloader.shm"},
                framework="tensorflow" if "nccl" in name else "torch",
                twin_of=of,
                assumptions=["an emptyDir without sizeLimit on a node with 16 GiB RAM shows 8 GiB in df"],
            )
        )
    out.append(
        compile_case(
            "olmo-research-image-debian-with-gcc-ok",
            "https://github.com/allenai/OLMo-core/pull/804",
            "The research image with gcc and g++ added (the PR's fix) (twin)",
            "torch.compile-no-compiler",
            torch_version="2.8.0+cu128",
            cuda="12.8",
            python="/usr/local/bin/python",
            python_version="3.12.11",
            python_h=True,
            include="/usr/local/include/python3.12",
            compiler=True,
            triton=TritonFacts(True, "3.4.0", True),
            container="docker",
            distro=("debian", "12", "bookworm"),
            gpu_name=("NVIDIA A10G", "8.6"),
            artefacts={"Dockerfile.fragment": "RUN apt-get update && apt-get install -y gcc g++"},
            expect={"status": "ok", "carrier": "torch.compile"},
            twin_of="olmo-research-image-debian-no-compiler",
        )
    )
    out.append(
        kernel_missing_case(
            "kernelspec-conda-env-recreated-ok",
            "https://github.com/anaconda/nb_conda_kernels/issues/55",
            "The kernelspec pyk3 after the env was recreated (twin)",
            kernel_python="/home/user/anaconda/envs/pyk3/bin/python",
            exists=True,
            kernel_name="pyk3",
            artefacts={"report.txt": "Twin of kernelspec-points-to-removed-conda-env with the env recreated."},
            expect={"status": "ok", "carrier": "jupyter.kernels"},
            twin_of="kernelspec-points-to-removed-conda-env",
        )
    )
    env = "/home/user/miniconda3/envs/tf"
    out.append(
        tf_kernel_case(
            "tf29-kernel-json-env-ld-path-ok",
            "https://github.com/tensorflow/tensorflow/issues/56959",
            "The TF kernel with LD_LIBRARY_PATH in kernel.json env, as in the terminal (twin)",
            tf_version="2.9.1",
            python=f"{env}/bin/python",
            python_version="3.9.13",
            terminal_ld=f"{env}/lib/",
            kernel_ld=f"{env}/lib/",
            held={f"{env}/lib/": ["libcudart.so.11.0", "libcublas.so.11", "libcudnn.so.8"]},
            artefacts={
                "report.txt": "Twin of tf29-conda-terminal-ok-notebook-libcudart-missing with the kernel env fixed."
            },
            twin_of="tf29-conda-terminal-ok-notebook-libcudart-missing",
        )
    )
    out.append(
        fw_driver_case(
            "onnxruntime-cuda12-build-driver-550-ok",
            "https://github.com/onnxruntime/mobius/issues/316",
            "The CI on the CUDA 12 build of onnxruntime-gpu (the maintainer's suggestion) (twin)",
            framework="onnxruntime-gpu",
            dist="onnxruntime-gpu",
            version="1.22.0",
            cuda_major=12,
            wheels=[("nvidia-cuda-runtime-cu12", "12.4.127")],
            driver=("550.163.01", "12.4"),
            gpu_model=("Tesla T4", "7.5"),
            python="/opt/venv/bin/python",
            python_version="3.12.3",
            container="docker",
            distro=("ubuntu", "24.04", "noble"),
            artefacts={"report.txt": "Twin of onnxruntime-cuda13-build-driver-550 with a CUDA 12 build."},
            expect={"status": "ok", "carrier": "cuda.driver", "fine": ["torch.install"]},
            twin_of="onnxruntime-cuda13-build-driver-550",
        )
    )
    devs = [gpu("NVIDIA GeForce RTX 3090", "8.6", index=i) for i in range(4)]
    tf4 = cuda_torch("1.13.1+cu117", "11.7", devices=[CudaDevice(0, "NVIDIA GeForce RTX 3090", "8.6", "0000:01:00.0")])
    out.append(
        Case(
            "gpu",
            "cluster-sets-cuda-visible-devices-ok",
            "https://github.com/cBio/cbio-cluster/issues/1",
            "The prolog fixed to export CUDA_VISIBLE_DEVICES=0 (twin)",
            "cuda.devices-selection-variable-misspelled",
            facts(
                nvidia=nvidia_facts("535.154.05", "12.2", devs),
                gpu=pci_gpus(4),
                os=os_facts("centos", "6", ""),
                targets=targets(
                    target(
                        tprobe(
                            "/home/user/venv/bin/python",
                            tf4,
                            env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0"},
                        )
                    )
                ),
            ),
            {"cluster-shell.txt": "-bash-4.1$ echo $CUDA_VISIBLE_DEVICES\n0"},
            {"status": "ok", "carrier": "cuda.devices"},
            framework="torch",
            platform="slurm",
            distro="centos-6",
            twin_of="cluster-sets-cuda-visable-devices",
        )
    )
    return out


def main() -> None:
    cases = []
    for fn in CASE_SETS:
        cases += fn()
    names = [(c.area, c.name) for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    for c in cases:
        write(c)
    print(f"wrote {len(cases)} cases")


CASE_SETS = [
    driver_cases,
    arch_cases,
    libcuda_cases,
    wsl_cases,
    data_cases,
    compile_cases,
    notebook_cases,
    framework_driver_cases,
    data_cases_2,
    compile_cases_2,
    nccl_pin_cases,
    notebook_cases_2,
    cvd_cases,
    tf_notebook_cases,
    conda_cpu_cases,
    typo_cases,
    tf_mismatch_cases_2,
    more_twins,
]

if __name__ == "__main__":
    main()
