"""jupyter.kernels for frameworks that dlopen CUDA libraries by bare name (TensorFlow's dso_loader):
the terminal's LD_LIBRARY_PATH (set by a conda activate.d script) holds libcudart/libcudnn, the
kernel's lacks it, and no probe can see TensorFlow fail (tensorflow/tensorflow #60790, #56959).
Neighbour: the same directories missing in a torch-only kernel (torch finds its libraries through
RUNPATH) are not a failure; twin: the kernel has them. And torch.install does not ask a TensorFlow
environment to install PyTorch, with or without the cuda_libraries domain."""

from __future__ import annotations

from gpudoctor.checks.jupyter_kernels import CHECK
from gpudoctor.checks.torch_install import CHECK as TORCH_INSTALL
from gpudoctor.facts.jupyter import JupyterFacts, KernelInterpreter, KernelSpecFacts
from gpudoctor.facts.loader import LibraryDir, LibraryFile, LoaderFacts
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, probe_facts, target, targets, torch_facts

ENV = "/home/user/miniconda3/envs/tf"
PY = f"{ENV}/bin/python"
LIB = f"{ENV}/lib"


def spec() -> KernelSpecFacts:
    argv = (PY, "-m", "ipykernel_launcher", "-f", "{connection_file}")
    path = "/home/user/.local/share/jupyter/kernels/python3/kernel.json"
    return KernelSpecFacts(
        name="python3",
        resource_dir=path.rsplit("/", 1)[0],
        kernel_json=path,
        kernel_json_text="{}",
        builtin=False,
        error=None,
        display_name="Python 3",
        language="python",
        argv=argv,
        is_python=True,
        interpreter=KernelInterpreter(PY, 0, "absolute", True),
    )


def probe(ld: str, dists: dict[str, str], torch=None):
    env = {"PATH": f"{ENV}/bin:/usr/bin"}
    if ld:
        env["LD_LIBRARY_PATH"] = ld
    return probe_facts(PY, torch or torch_facts(installed=False), env=env, distributions={"ipykernel": "6.29", **dists})


def facts(kernel_ld: str, dists: dict[str, str], torch=None, loader=True):
    domains = dict(
        jupyter=JupyterFacts(PY, "PATH", "3.10", "8.6", "/d", ("/d/kernels",), (spec(),)),
        targets=targets(
            target(probe(LIB, dists, torch)),
            target(probe(kernel_ld, dists, torch), label="kernel:python3", kind="kernel"),
        ),
    )
    if loader:
        files = tuple(LibraryFile(n, f"{LIB}/{n}") for n in ("libcudart.so.11.0", "libcudnn.so.8"))
        domains["loader"] = LoaderFacts((), (), (), (LibraryDir(LIB, "LD_LIBRARY_PATH", True, files),))
    return make_facts(**domains)


def kernel_finding(f):
    return next(x for x in CHECK.evaluate(f) if x.target == "kernel:python3")


def test_tensorflow_kernel_without_the_terminals_cuda_dirs_fails_with_the_kernel_env_fix():
    f = kernel_finding(facts("", {"tensorflow": "2.12.0"}))
    assert f.status is Status.FAIL
    assert "tensorflow 2.12.0" in f.summary and LIB in f.summary
    assert "libcudart.so.11.0" in f.explanation and "activate.d" in f.explanation
    assert "jupyter.kernel-env" in f.fixes


def test_neighbour_torch_only_kernel_is_not_failed_for_the_same_missing_dirs():
    tf = torch_facts("2.5.1+cu124", "12.4", cuda_available=True, device_count=1)
    f = kernel_finding(facts("", {"torch": "2.5.1+cu124"}, torch=tf))
    assert f.status is Status.OK


def test_twin_kernel_with_the_terminals_ld_library_path_is_ok():
    assert kernel_finding(facts(LIB, {"tensorflow": "2.12.0"})).status is Status.OK


def test_no_loader_facts_no_claim():
    assert kernel_finding(facts("", {"tensorflow": "2.12.0"}, loader=False)).status is Status.OK


def test_torch_install_does_not_ask_a_tensorflow_env_for_torch_even_without_cuda_libraries():
    found = TORCH_INSTALL.evaluate(facts(LIB, {"tensorflow": "2.12.0"}))
    assert {x.status for x in found} == {Status.INFO}
    assert "tensorflow 2.12.0" in found[0].summary
    bare = TORCH_INSTALL.evaluate(facts(LIB, {}))
    assert {x.status for x in bare} == {Status.FAIL}
