"""Write the field cases "one step aside" (``python tests/field/make_cases_aside.py``).

Public reports of faults gpudoctor already handles, met under another framework, platform,
tool or version than the cases it was built on (JAX instead of TensorFlow, Kaggle instead of
a workstation, cuda-python instead of torch, PaddlePaddle instead of torch, a Kubernetes pod
instead of Docker, an NVML mismatch from two installs instead of an upgrade). Same format and
builders as ``make_cases_fieldcases.py``; every value the artefacts do not show is an
assumption written in the case. The script only writes files; tests/field/test_cases.py judges.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_cases_fieldcases as base

from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, SourceAttempt
from gpudoctor.facts.targets import LibcudaProbe
from gpudoctor.testing import nvidia_facts, os_facts, pci_gpus, target, targets, torch_facts

Case = base.Case
WSL = base.WSL


# --------------------------------------------------------------------------- gpu: the image's compat libcuda (JAX)

JAX_15961 = (
    'I installed jax like pip install --upgrade "jax[cuda11_pip]" -f '
    "https://storage.googleapis.com/jax-releases/jax_cuda_releases.html\n"
    "my Driver Version is 470.182.03 (>= 450.80.02 for CUDA 11 on Linux).\n"
    "2023-05-11 05:14:42.079662: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to "
    "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n"
    "2023-05-11 05:14:42.079796: E external/xla/xla/stream_executor/cuda/cuda_diagnostics.cc:312] kernel version "
    "470.182.3 does not match DSO version 520.61.5 -- cannot find working devices in this configuration\n"
    "No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n"
    "jax==0.4.9 jaxlib==0.4.9+cuda11.cudnn86\nTesla K80\n"
    "docker image nvidia/cuda:11.8.0-cudnn8-devel-ubuntu18.04\n"
    "| NVIDIA-SMI 470.182.03   Driver Version: 470.182.03   CUDA Version: 11.8     |"
)


def jax_compat_cases() -> list[Case]:
    out = []
    for name, libcuda, ok in (
        ("jax-15961-k80-image-compat-libcuda-520", "/usr/local/cuda-11.8/compat/libcuda.so.520.61.05", False),
        ("jax-15961-twin-host-libcuda-470", "/usr/lib/x86_64-linux-gnu/libcuda.so.470.182.03", True),
    ):
        probe = base.tprobe(
            "/usr/bin/python3",
            torch_facts(installed=False),
            python_version="3.8.10",
            libcuda=LibcudaProbe(True, libcuda, None, 11040 if ok else None),
            distributions={"jax": "0.4.9", "jaxlib": "0.4.9+cuda11.cudnn86"},
        )
        out.append(
            Case(
                "gpu",
                name,
                "https://github.com/jax-ml/jax/issues/15961",
                "jaxlib cuda11 in nvidia/cuda:11.8 on a Tesla K80 host with driver 470: the image's forward-compat "
                "libcuda 520.61.05 is loaded" + (" (twin: the host's libcuda)" if ok else ""),
                "cuda.libcuda-forward-compat-unsupported",
                base.facts(
                    nvidia=nvidia_facts("470.182.03", source="proc", devices=[base.gpu("Tesla K80", "3.7")])
                    if not ok
                    else nvidia_facts("470.182.03", "11.4", [base.gpu("Tesla K80", "3.7", memory_mib=11441)]),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "18.04", "bionic", in_container=True, kind="docker"),
                    targets=targets(target(probe)),
                ),
                {"report.txt": JAX_15961}
                if not ok
                else {
                    "report.txt": "Twin of jax-15961-k80-image-compat-libcuda-520: the container loads the "
                    "libcuda.so.470.182.03 the NVIDIA runtime mounts from the host (no compat directory on the "
                    "loader path)."
                },
                {"status": "ok", "carrier": "cuda.libcuda", "fine": ["nvidia.driver"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "cuda.libcuda",
                    "keywords": ["470.182.03", "520.61.05", "compat"],
                    "forbidden": ["sudo reboot"],
                },
                framework="jax",
                platform="docker",
                distro="ubuntu-18.04",
                twin_of="jax-15961-k80-image-compat-libcuda-520" if ok else None,
                assumptions=[
                    "the loaded libcuda is the image's /usr/local/cuda-11.8/compat/libcuda.so.520.61.05 (the report "
                    "shows 'DSO version 520.61.5' inside nvidia/cuda:11.8.0-cudnn8-devel-ubuntu18.04, whose "
                    "cuda-compat-11-8 package is 520.61.05)",
                    "Python 3.8 of the image (not shown)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- gpu: Kaggle's P100 and a cu128 torch

SM70_120 = "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"


def kaggle_arch_cases() -> list[Case]:
    out = []
    warn = base._warn("Tesla P100-PCIE-16GB", "sm_60", SM70_120)
    for name, gname, cc, ok in (
        ("kaggle-docker-python-1546-p100-torch-cu128", "Tesla P100-PCIE-16GB", "6.0", False),
        ("kaggle-docker-python-1546-twin-t4", "Tesla T4", "7.5", True),
    ):
        case = base.arch_case(
            name,
            "https://github.com/Kaggle/docker-python/issues/1546",
            "Kaggle notebook on a P100 (sm_60) with the image's torch built for CUDA 12.8 (sm_70 and newer)"
            + (" (twin: the T4 accelerator)" if ok else ""),
            gname,
            cc,
            "2.8.0+cu128",
            "12.8",
            SM70_120.split() + ["compute_120"],
            ("570.172.08", "12.8"),
            "Twin of kaggle-docker-python-1546-p100-torch-cu128 on Kaggle's T4 accelerator."
            if ok
            else "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:435: UserWarning: \n" + warn,
            {"status": "ok", "carrier": "cuda.arch", "fine": ["cuda.driver"]}
            if ok
            else {
                "status": "fail",
                "carrier": "cuda.arch",
                "keywords": ["sm_60", "P100"],
                "forbidden": ["upgrade the nvidia driver"],
                "fine": ["cuda.driver", "nvidia.driver"],
            },
            python="/usr/bin/python3",
            python_version="3.12.11",
            container="docker",
            memory_mib=16384 if not ok else 15360,
            twin_of="kaggle-docker-python-1546-p100-torch-cu128" if ok else None,
            assumptions=[
                "torch 2.8.0+cu128 (the warning's arch list sm_70..sm_120 is a cu128 build's; version not shown)",
                "Kaggle's driver 570.172.08 / CUDA 12.8 (not shown)",
                "Kaggle runs the notebook in its Docker image (/usr/local/lib/python3.12/dist-packages)",
            ],
        )
        out.append(replace(case, platform="kaggle", distro="ubuntu-22.04"))
    return out


# --------------------------------------------------------------------------- libraries: WSL, without torch


def _wsl_no_torch(resolvable: tuple[str, ...], dist: dict[str, str]) -> Any:
    """WSL facts of an environment whose library (cuda-python, TensorFlow) dlopens libcuda itself."""
    py = "/home/user/miniconda3/envs/dev/bin/python"
    lookups = [
        base.LIB.res(
            "dlopen",
            f"{WSL}/{n}" if n in resolvable else None,
            "ld.so cache" if n in resolvable else "not found",
            needed=n,
        )
        for n in ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1")
    ]
    libcuda = (
        LibcudaProbe(True, f"{WSL}/libcuda.so.1.1", None, 11060)
        if "libcuda.so.1" in resolvable
        else LibcudaProbe(False, None, "libcuda.so.1: cannot open shared object file: No such file or directory")
    )
    return base.facts(
        os=os_facts("ubuntu", "20.04", "focal", wsl=True, kernel="5.10.102.1-microsoft-standard-WSL2"),
        nvidia=nvidia_facts("511.65", "11.6", [base.gpu("NVIDIA GeForce RTX 3090", "8.6")]),
        gpu=pci_gpus(0),
        targets=targets(
            target(
                base.tprobe(
                    py,
                    torch_facts(installed=False),
                    python_version="3.8.12",
                    libcuda=libcuda,
                    distributions=dist,
                    site_packages=("/home/user/miniconda3/envs/dev/lib/python3.8/site-packages",),
                )
            )
        ),
        cuda_libraries=base.LIB.libs_facts(base.LIB.model([], lookups=lookups), [], base.WSL_FILES),
    )


CUDA_PYTHON_17 = (
    "RuntimeError                              Traceback (most recent call last)\n"
    "----> 1 cuda.cuInit(0)\n"
    "File ~/miniconda3/envs/dev/lib/python3.8/site-packages/cuda/_cuda/ccuda.pyx:424, in "
    "cuda._cuda.ccuda.cuPythonInit()\n"
    "RuntimeError: Failed to dlopen libcuda.so\n\n"
    "This is because in a WSL environment `libcuda.so` lives in `/usr/lib/wsl/lib` which is not in the default "
    "search path of dlopen. [...] in the `ldconfig` cache it looks like others load `libcuda.so.1` so only that "
    "entry is cached"
)


def wsl_aside_cases() -> list[Case]:
    out = []
    for name, resolvable, ok in (
        ("cuda-python-17-wsl-dlopen-libcuda-so", ("libcuda.so.1", "libnvidia-ml.so.1"), False),
        ("cuda-python-17-twin-libcuda-so-cached", ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1"), True),
    ):
        out.append(
            Case(
                "libraries",
                name,
                "https://github.com/NVIDIA/cuda-python/issues/17",
                "cuda-python 11.6 in WSL 2: cuInit fails, 'Failed to dlopen libcuda.so' (only libcuda.so.1 is in "
                "the ld.so cache)" + (" (twin: /usr/lib/wsl/lib fully cached)" if ok else ""),
                "cuda.wsl-libcuda-unresolvable",
                _wsl_no_torch(resolvable, {"cuda-python": "11.6.0"}),
                {
                    "report.txt": "Twin of cuda-python-17-wsl-dlopen-libcuda-so after `sudo ldconfig` cached "
                    "/usr/lib/wsl/lib/libcuda.so."
                }
                if ok
                else {"traceback.txt": CUDA_PYTHON_17},
                {"status": "ok", "carrier": "cuda.wsl", "fine": ["cuda.libcuda"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "cuda.wsl",
                    "keywords": ["libcuda.so", "/usr/lib/wsl/lib", "ldconfig"],
                    "forbidden": ["apt-get install nvidia-driver", "ubuntu-drivers install"],
                },
                framework="cuda-python",
                platform="wsl",
                distro="ubuntu-20.04",
                twin_of="cuda-python-17-wsl-dlopen-libcuda-so" if ok else None,
                assumptions=[
                    "cuda-python 11.6.0 (Feb 2022 release), Python 3.8 in a miniconda env 'dev' (the path is shown)",
                    "Windows driver 511.65 / RTX 3090, Ubuntu 20.04 in WSL 2 (not shown)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- data: /dev/shm under Paddle and in a pod


def shm_aside_cases() -> list[Case]:
    out = []
    paddle_err = (
        "ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by insufficient shared "
        "memory (shm), please check whether use_shared_memory is set and storage space in /dev/shm is enough"
    )
    out.append(
        base.shm_case(
            "paddlespeech-790-docker-paddle-dataloader-64m",
            "https://github.com/PaddlePaddle/PaddleSpeech/issues/790",
            "PaddleSpeech training in Docker: Paddle's DataLoader workers die with a BUS error (/dev/shm 64 MiB)",
            "dataloader.shm-too-small",
            shm_total=64 * base.MIB,
            shm_free=0,
            gpus=(("GeForce RTX 2080 Ti", "7.5"),),
            framework="paddle",
            artefacts={
                "report.txt": "在Docker下训练一段时间报错：\n" + paddle_err + "\n - OS: Ubuntu 20.04, Docker version "
                "19.03.9\n - PaddlePaddle Version: 2.1.2\n - GPU/DRIVER Informationo: NVIDIA-SMI 460.91.03"
            },
            expect={"status": "fail", "carrier": "dataloader.shm", "keywords": ["/dev/shm", "--shm-size"]},
            assumptions=[
                "/dev/shm is Docker's default 64 MiB, full (the container was started without --shm-size "
                "or --ipc=host, which the maintainer's answer adds)",
                "GPU model not shown",
            ],
        )
    )
    out.append(
        base.shm_case(
            "paddlespeech-790-twin-ipc-host",
            "https://github.com/PaddlePaddle/PaddleSpeech/issues/790",
            "The same PaddleSpeech container started with --ipc=host as the maintainer suggests (twin)",
            "dataloader.shm-too-small",
            shm_total=32 * base.GIB,
            gpus=(("GeForce RTX 2080 Ti", "7.5"),),
            framework="paddle",
            artefacts={"report.txt": "nvidia-docker run --net=host --ipc=host -it --rm -v $PWD:/workspace ..."},
            expect={"status": "ok", "carrier": "dataloader.shm"},
            twin_of="paddlespeech-790-docker-paddle-dataloader-64m",
            assumptions=["with --ipc=host the container sees the host's /dev/shm (32 GiB assumed)"],
        )
    )
    k8s_tb = (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
        "RuntimeError: DataLoader worker (pid 125) is killed by signal: Bus error."
    )
    out.append(
        base.shm_case(
            "pytorch-16979-k8s-pod-dataloader-bus-error",
            "https://github.com/pytorch/pytorch/issues/16979",
            "PyTorch DataLoader in a Kubernetes pod: workers killed by SIGBUS (the pod's /dev/shm is 64 MiB)",
            "dataloader.shm-too-small",
            shm_total=64 * base.MIB,
            shm_free=0,
            container="kubernetes",
            distro=("ubuntu", "16.04", "xenial"),
            artefacts={"traceback.txt": k8s_tb},
            expect={
                "status": "fail",
                "carrier": "dataloader.shm",
                "keywords": ["/dev/shm", "emptyDir"],
                "forbidden": ["--shm-size"],
            },
            assumptions=[
                "the container runtime's default 64 MiB /dev/shm, full (no emptyDir medium: Memory)",
                "GPU not shown; Python 2.7 image (dist-packages paths)",
            ],
        )
    )
    out.append(
        base.shm_case(
            "pytorch-16979-twin-emptydir-memory",
            "https://github.com/pytorch/pytorch/issues/16979",
            "The same pod with an emptyDir (medium: Memory) mounted at /dev/shm (twin)",
            "dataloader.shm-too-small",
            shm_total=8 * base.GIB,
            container="kubernetes",
            distro=("ubuntu", "16.04", "xenial"),
            artefacts={"report.txt": "volumes: [{name: dshm, emptyDir: {medium: Memory}}] mounted at /dev/shm"},
            expect={"status": "ok", "carrier": "dataloader.shm"},
            twin_of="pytorch-16979-k8s-pod-dataloader-bus-error",
            assumptions=["the memory-backed emptyDir is sized by the pod's memory limit (8 GiB assumed)"],
        )
    )
    return [replace(c, platform="k8s") if "pytorch-16979" in c.name else c for c in out]


# --------------------------------------------------------------------------- devices: NVML mismatch from two installs


def _mismatch_nvidia(kernel: str) -> NvidiaDriverFacts:
    reason = "nvmlInit failed: Driver/library version mismatch"
    return NvidiaDriverFacts(
        kernel,
        "proc",
        Unavailable("NVML is needed: " + reason),
        Unavailable(reason),
        (),
        (SourceAttempt("nvml", False, reason), SourceAttempt("proc", True, f"read {kernel}")),
    )


def nvml_mismatch_cases() -> list[Case]:
    out = []
    report = (
        "bash ./NVIDIA-Linux-x86_64-570.124.04.run --no-kernel-modules\n"
        "cd /data/open-gpu-kernel-modules-570.124.06-p2p/\n./install.sh\nreboot\n\n"
        "nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124"
    )
    for name, nv, ok in (
        ("ogkm-tinygrad-47-p2p-module-570-124-06-userspace-04", _mismatch_nvidia("570.124.06"), False),
        ("ogkm-tinygrad-47-twin-userspace-570-124-06", None, True),
    ):
        out.append(
            Case(
                "devices",
                name,
                "https://github.com/tinygrad/open-gpu-kernel-modules/issues/47",
                "P2P open kernel modules 570.124.06 built from source next to the 570.124.04 user-space driver: NVML "
                "'Driver/library version mismatch' survives the reboot"
                + (" (twin: matching user space)" if ok else ""),
                "devices.nvml-version-mismatch",
                base.facts(
                    nvidia=nv
                    if nv is not None
                    else nvidia_facts("570.124.06", "12.8", [base.gpu("NVIDIA GeForce RTX 4090", "8.9")]),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "22.04", "jammy", kernel="5.15.0-157-generic"),
                ),
                {"report.txt": "Twin: NVIDIA-Linux-x86_64-570.124.06.run --no-kernel-modules, the module's version."}
                if ok
                else {"report.txt": report},
                {"status": "ok", "carrier": "nvidia.driver"}
                if ok
                else {
                    "status": "fail",
                    "carrier": "nvidia.driver",
                    "keywords": ["570.124.06", "mismatch", "--no-kernel-modules"],
                },
                platform="host",
                distro="ubuntu-22.04",
                twin_of="ogkm-tinygrad-47-p2p-module-570-124-06-userspace-04" if ok else None,
                assumptions=["GPU not shown: GeForce RTX 4090 (the P2P module's target)"],
            )
        )
    return out


# --------------------------------------------------------------------------- notebooks: a kernel venv made by uv

UV_254093 = (
    "18:37:22.851 [warn] Kernel Error, context = start Error: The kernel died. Error: ~/code/tsq/.venv/bin/python: "
    "No module named ipykernel_launcher... View Jupyter [log](command:jupyter.viewOutput) for further details.\n"
    "    > Interpreter Id = ~/code/tsq/.venv/bin/python\n"
    "    > stdErr = ~/code/tsq/.venv/bin/python: No module named ipykernel_launcher\n"
    "18:37:22.852 [info] Process Execution: ~/code/tsq/.venv/bin/python -c \"import ipykernel;print('6af208d0')\"\n"
    "18:37:22.884 [info] Check & install missing Kernel dependencies for ~/code/tsq/.venv/bin/python"
)


def uv_kernel_cases() -> list[Case]:
    out = []
    py = "/home/user/code/tsq/.venv/bin/python"
    for name, has_ipk in (
        ("vscode-254093-uv-venv-kernel-without-ipykernel", False),
        ("vscode-254093-twin-ipykernel", True),
    ):
        tf = base.cuda_torch("2.7.1+cu128", "12.8", devices=[base.CudaDevice(0, "NVIDIA GeForce RTX 4090", "8.9")])
        dists = {"torch": "2.7.1+cu128", **({"ipykernel": "6.29.5"} if has_ipk else {})}
        probe = base.tprobe(py, tf, python_version="3.12.11", distributions=dists)
        jf = base.JupyterFacts(
            "/usr/bin/python3",
            "PATH",
            "3.10.12",
            "8.6.2",
            "/home/user/.local/share/jupyter",
            ("/home/user/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels"),
            (base.kspec("tsq", py, ".venv (Python 3.12.11)"),),
        )
        out.append(
            Case(
                "notebooks",
                name,
                "https://github.com/microsoft/vscode/issues/254093",
                "A notebook kernel on a venv made by `uv venv`: no ipykernel, and no pip to install it with"
                + (" (twin: `uv pip install ipykernel`)" if has_ipk else ""),
                "jupyter.kernel-no-ipykernel",
                base.facts(
                    jupyter=jf,
                    targets=targets(target(probe), target(probe, label="kernel:tsq", kind="kernel")),
                    nvidia=nvidia_facts("570.133.07", "12.8", [base.gpu("NVIDIA GeForce RTX 4090", "8.9")]),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "24.04", "noble"),
                ),
                {"report.txt": "Twin: `uv pip install --python .venv/bin/python ipykernel` run in the project."}
                if has_ipk
                else {"jupyter-log.txt": UV_254093},
                {"status": "ok", "carrier": "jupyter.kernels"}
                if has_ipk
                else {
                    "status": "fail",
                    "carrier": "jupyter.kernels",
                    "keywords": ["ipykernel", "uv pip install"],
                    "forbidden": ["/home/user/code/tsq/.venv/bin/python -m pip install ipykernel"],
                },
                framework="torch",
                platform="vscode",
                distro="ubuntu-24.04",
                twin_of="vscode-254093-uv-venv-kernel-without-ipykernel" if has_ipk else None,
                xfail=None
                if has_ipk
                else "a venv made by `uv venv` has no pip, so the remedy `python -m pip install ipykernel` fails "
                "there; the probe does not report whether pip is installed, so jupyter.kernels cannot offer "
                "`uv pip install` instead",
                assumptions=[
                    "a Linux home instead of the reporter's macOS one; torch 2.7.1+cu128 on an RTX 4090 in the "
                    "venv (not shown: the report is about the kernel)",
                    "the venv is registered as kernelspec 'tsq' (VS Code starts it by interpreter path)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- gpu: a CPU torch in a Slurm job (Mila docs)

MILA_213 = (
    "[=== Module anaconda/3 loaded ===]\nPyTorch built with CUDA:         False\n"
    "PyTorch detects CUDA available:  False\nPyTorch-detected #GPUs:          0\n"
    "    No GPU detected, not printing devices' names.\n\n======== GPU REPORT ========\n"
    "Driver Version                            : 535.86.10\nCUDA Version                              : 12.2\n"
    "Attached GPUs                             : 1\nGPU 00000000:3A:00.0"
)


def slurm_cpu_torch_cases() -> list[Case]:
    out = []
    pre = "/home/user/.conda/envs/pytorch"
    for name, ok in (("mila-docs-213-slurm-job-cpu-torch-build", False), ("mila-docs-213-twin-cuda-torch-build", True)):
        tf = (
            base.cuda_torch("2.0.1+cu118", "11.8", devices=[base.CudaDevice(0, "NVIDIA A100-SXM4-80GB", "8.0")])
            if ok
            else torch_facts("2.0.1", None, cuda_available=False, device_count=0)
        )
        out.append(
            Case(
                "gpu",
                name,
                "https://github.com/mila-iqia/mila-docs/issues/213",
                "The cluster docs' pytorch_setup example in a Slurm job with one GPU allocated: 'PyTorch built with "
                "CUDA: False'" + (" (twin: a CUDA build)" if ok else ""),
                "torch.install-cpu-build-on-gpu",
                base.facts(
                    nvidia=nvidia_facts(
                        "535.86.10", "12.2", [base.gpu("NVIDIA A100-SXM4-80GB", "8.0", memory_mib=81920)]
                    ),
                    gpu=pci_gpus(1),
                    os=os_facts("ubuntu", "22.04", "jammy"),
                    targets=targets(
                        target(
                            base.tprobe(f"{pre}/bin/python", tf, python_version="3.9.16", is_conda=True, is_venv=False)
                        )
                    ),
                ),
                {"report.txt": "Twin of mila-docs-213-slurm-job-cpu-torch-build with a CUDA 11.8 build of torch."}
                if ok
                else {"slurm-out.txt": MILA_213},
                {"status": "ok", "carrier": "torch.install", "fine": ["cuda.driver"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "torch.install",
                    "keywords": ["CPU-only"],
                    "forbidden": ["--gres", "apt-get install nvidia-driver"],
                    "fine": ["nvidia.driver"],
                },
                framework="torch",
                platform="slurm",
                distro="ubuntu-22.04",
                twin_of="mila-docs-213-slurm-job-cpu-torch-build" if ok else None,
                assumptions=[
                    "torch 2.0.1 (CPU) in a conda env made with the cluster's anaconda/3 module (version and env "
                    "path not shown)",
                    "GPU model not shown: an A100 (the node cn-a006); the job has it (nvidia-smi in the job lists 1 GPU)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- gpu: A100 with a torch 1.6 build

SM37_75 = "sm_37 sm_50 sm_60 sm_70 sm_75"


def a100_old_torch_cases() -> list[Case]:
    out = []
    for name, tv, cu, arch_list, ok in (
        ("torchal-4-a100-torch160-sm37-75", "1.6.0", "10.2", SM37_75.split(), False),
        ("torchal-4-twin-torch171-cu110", "1.7.1+cu110", "11.0", [*SM37_75.split(), "sm_80"], True),
    ):
        out.append(
            base.arch_case(
                name,
                "https://github.com/PrateekMunjal/TorchAL/issues/4",
                "An A100 (sm_80) with the torch 1.6.0 the project pins (CUDA 10.2 build: sm_37 to sm_75)"
                + (" (twin: torch 1.7.1+cu110)" if ok else ""),
                "NVIDIA A100-PCIE-40GB",
                "8.0",
                tv,
                cu,
                arch_list,
                ("450.80.02", "11.0"),
                "Twin of torchal-4-a100-torch160-sm37-75 with torch 1.7.1+cu110, the first build with sm_80."
                if ok
                else base._warn("NVIDIA A100-PCIE-40GB", "sm_80", SM37_75)
                + "\nTrial 0 failed because of the following error: RuntimeError('CUDA error: no kernel image is "
                "available for execution on the device')",
                {"status": "ok", "carrier": "cuda.arch", "fine": ["cuda.driver"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "cuda.arch",
                    "keywords": ["sm_80", "A100"],
                    "forbidden": ["upgrade the nvidia driver"],
                    "fine": ["cuda.driver", "nvidia.driver"],
                },
                memory_mib=40960,
                python="/home/user/anaconda3/envs/torchal/bin/python",
                python_version="3.7.10",
                twin_of="torchal-4-a100-torch160-sm37-75" if ok else None,
                assumptions=[
                    "torch 1.6.0 from the project's environment (its CUDA 10.2 wheel; the arch list the warning "
                    "prints is that build's)",
                    "driver 450.80.02 (CUDA 11.0; not shown), Ubuntu 22.04 host, conda env path assumed",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- libraries: TensorFlow on WSL 2


DIRECTML_80 = (
    ">>> import tensorflow.compat.v1 as tf\n"
    "2021-02-15 00:26:30.774305: W tensorflow/stream_executor/platform/default/dso_loader.cc:60] Could not load "
    "dynamic library 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared object file: No such file or "
    "directory\n2021-02-15 00:26:30.774405: W tensorflow/stream_executor/cuda/cuda_driver.cc:326] failed call to "
    "cuInit: UNKNOWN ERROR (303)"
)


def wsl_tf_cases() -> list[Case]:
    out = []
    for name, resolvable, ok in (
        ("directml-80-wsl2-tensorflow-libcuda-so-1-not-found", ("libnvidia-ml.so.1",), False),
        ("directml-80-twin-wsl-lib-cached", ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1"), True),
    ):
        out.append(
            Case(
                "libraries",
                name,
                "https://github.com/microsoft/DirectML/issues/80",
                "pip TensorFlow 2.4 in WSL 2: 'Could not load dynamic library libcuda.so.1' (the WSL driver "
                "directory is not on the loader's path)" + (" (twin: /usr/lib/wsl/lib cached)" if ok else ""),
                "cuda.wsl-libcuda-unresolvable",
                _wsl_no_torch(resolvable, {"tensorflow": "2.4.1"}),
                {
                    "report.txt": "Twin of directml-80-wsl2-tensorflow-libcuda-so-1-not-found with /usr/lib/wsl/lib in "
                    "the ld.so cache."
                }
                if ok
                else {"python-session.txt": DIRECTML_80},
                {"status": "ok", "carrier": "cuda.wsl", "fine": ["cuda.libcuda"]}
                if ok
                else {
                    "status": "fail",
                    "carrier": "cuda.wsl",
                    "keywords": ["libcuda.so.1", "/usr/lib/wsl/lib", "ldconfig"],
                    "forbidden": ["apt-get install nvidia-driver", "ubuntu-drivers install"],
                },
                framework="tensorflow",
                platform="wsl",
                distro="ubuntu-20.04",
                twin_of="directml-80-wsl2-tensorflow-libcuda-so-1-not-found" if ok else None,
                assumptions=[
                    "tensorflow 2.4.1 from pip (the report says 'pip install tensorflow' in Feb 2021)",
                    "the Windows driver's files are in /usr/lib/wsl/lib but not in the ld.so cache (the error says "
                    "libcuda.so.1 is not found); Windows driver 511.65 / RTX 3090 (not shown)",
                    "Python 3.6 env of the report modelled as the helper's conda env 'dev'",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- devices: exclusive compute mode, GPU taken

JADE_73 = """I too encounter this problem. This happened to me on `dgj210` [...]
As I requested 8 GPUs (and on the `big` partition), there shouldn't be anyone else sharing the node with me.
`nvidia-smi` returns the following:
| NVIDIA-SMI 384.145                Driver Version: 384.145                   |
|   0  Tesla V100-SXM2...  On   | 00000000:06:00.0 Off |                    0 |
| N/A   39C    P0    72W / 300W |   1092MiB / 16152MiB |      0%   E. Process |
|   1  Tesla V100-SXM2...  On   | 00000000:07:00.0 Off |                    0 |
| N/A   38C    P0    44W / 300W |     10MiB / 16152MiB |      0%   E. Process |"""


def exclusive_mode_cases() -> list[Case]:
    from gpudoctor.facts.gpu_health import GpuProcess
    from gpudoctor.testing import gpu_health, nvml_device

    out = []
    for name, held in (
        ("jade-hpc-73-exclusive-process-gpu-held", True),
        ("jade-hpc-73-twin-exclusive-gpus-free", False),
    ):
        devs = []
        for i in range(8):
            procs = (GpuProcess(28211, 1092, "compute", True, "python3"),) if held and i == 0 else ()
            devs.append(
                nvml_device(
                    i,
                    "Tesla V100-SXM2-16GB",
                    "7.0",
                    memory_mib=16152,
                    health=gpu_health(compute_mode="exclusive_process", processes=procs, persistence_mode=True),
                )
            )
        out.append(
            Case(
                "devices",
                name,
                "https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/73",
                "A Slurm node whose GPUs are in Exclusive_Process mode: GPU 0 already holds a process, so the job's "
                "CUDA init says 'CUDA devices busy or unavailable'" + (" (twin: all GPUs free)" if not held else ""),
                "cuda.devices-unavailable",
                base.facts(
                    nvidia=nvidia_facts("384.145", "9.0", devs),
                    gpu=pci_gpus(8),
                    os=os_facts("ubuntu", "16.04", "xenial"),
                ),
                {"nvidia-smi.txt": JADE_73}
                if held
                else {"report.txt": "Twin of jade-hpc-73-exclusive-process-gpu-held once GPU 0's process has exited."},
                {
                    "status": "warn",
                    "carrier": "devices.persistence",
                    "keywords": ["exclusive_process", "PID 28211", "busy or unavailable"],
                    "forbidden": ["reinstall", "apt-get install nvidia-driver"],
                }
                if held
                else {"status": "ok", "carrier": "devices.persistence"},
                platform="slurm",
                distro="ubuntu-16.04",
                twin_of="jade-hpc-73-exclusive-process-gpu-held" if not held else None,
                checks=["devices.persistence", "devices.processes", "nvidia.driver"],
                assumptions=[
                    "the process on GPU 0 (1092 MiB) is not the reporter's job: PID and name not shown (28211, python3)",
                    "all 8 GPUs in Exclusive_Process mode (the table shows 'E. Process' on those listed)",
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- data: a Slurm task bound to one CPU

DDW_25 = (
    "#SBATCH --ntasks-per-node=2    # Number of tasks per node\n#SBATCH --cpus-per-task=20     # Number of CPUs per "
    "task\n#SBATCH --gres=gpu:gtx1080:2   # Request 2 GTX 1080 GPUs\n\nddw fit-model --config ./config.yaml\n\n"
    "UserWarning: This DataLoader will create 10 worker processes in total. Our suggested max number of worker in "
    "current system is 1, which is smaller than what this DataLoader is going to create."
)


def slurm_affinity_cases() -> list[Case]:
    from gpudoctor.testing import cpu_facts

    out = []
    # no healthy twin: with the task's 20 CPUs usable of 40, os.cpu_count() still overstates them (a warning
    # the check rightly keeps, as it cannot see num_workers)
    for name, affinity, ok in (("deepdewedge-25-slurm-task-bound-to-one-cpu", 1, False),):
        out.append(
            Case(
                "data",
                name,
                "https://github.com/MLI-lab/DeepDeWedge/issues/25",
                "ddw fit-model in a Slurm job asking --cpus-per-task=20: the process may run on 1 CPU of the node's 40, "
                "so 10 DataLoader workers share it" + (" (twin: the task's 20 CPUs)" if ok else ""),
                "dataloader.cpu-count-overstated",
                base.facts(cpu=cpu_facts(40, affinity=affinity, quota_cpus=None)),
                {
                    "report.txt": "Twin of deepdewedge-25-slurm-task-bound-to-one-cpu run through srun, which binds the "
                    "task to its 20 CPUs."
                }
                if ok
                else {"report.txt": DDW_25},
                {"status": "ok", "carrier": "dataloader.cpu"}
                if ok
                else {"status": "warn", "carrier": "dataloader.cpu", "keywords": ["40", "1 "]},
                framework="torch",
                platform="slurm",
                twin_of="deepdewedge-25-slurm-task-bound-to-one-cpu" if ok else None,
                assumptions=[
                    "os.cpu_count() = 40 ('each of the nodes in the cluster have around 40 CPUs'); the affinity of 1 "
                    "CPU is the 'suggested max number of worker' torch printed (it counts sched_getaffinity)",
                    "no CFS quota (Slurm confines CPUs with a cpuset)",
                ],
            )
        )
    return out


CASE_SETS = [
    jax_compat_cases,
    kaggle_arch_cases,
    wsl_aside_cases,
    shm_aside_cases,
    nvml_mismatch_cases,
    uv_kernel_cases,
    slurm_cpu_torch_cases,
    a100_old_torch_cases,
    wsl_tf_cases,
    exclusive_mode_cases,
    slurm_affinity_cases,
]


def main() -> None:
    cases = [c for make in CASE_SETS for c in make()]
    names = [(c.area, c.name) for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    for c in cases:
        base.write(c)
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
