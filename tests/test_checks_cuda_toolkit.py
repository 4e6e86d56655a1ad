"""cuda.toolkit: toolkit absent / present without a driver / present with a driver."""

from __future__ import annotations

from gpudoctor.checks.cuda_toolkit import CHECK
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.cuda_toolkit import collect
from gpudoctor.facts import Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts
from gpudoctor.model import Status
from gpudoctor.testing import (
    fake_system,
    make_facts,
    no_nvidia,
    nvidia_facts,
    write_tree,
)

TK = CudaToolkitFacts(None, "/usr/local/cuda-13.0", "13.0.48", "/usr/local/cuda-13.0/bin/nvcc", "13.0")


def test_no_toolkit_is_info_and_says_wheels_do_not_need_it():
    none = CudaToolkitFacts(None, None, Unavailable("no CUDA toolkit found"), None, Unavailable("nvcc not found"))
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=none, nvidia=no_nvidia()))
    assert f.status is Status.INFO
    assert "not needed to run PyTorch wheels" in f.summary


def test_toolkit_without_driver_is_info_that_it_cannot_run_code():
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=TK, nvidia=no_nvidia()))
    assert f.status is Status.INFO
    assert "13.0.48" in f.summary and "no NVIDIA driver" in f.summary


def test_toolkit_with_driver_is_ok():
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=TK, nvidia=nvidia_facts("580.65.06", "13.0")))
    assert f.status is Status.OK and "580.65.06" in f.summary


def test_collector_reads_version_json_through_the_root_without_running_nvcc(tmp_path):
    write_tree(
        tmp_path,
        {
            "/opt/cuda-12.4/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}',
            "/opt/cuda-12.4/bin/nvcc": "",
        },
    )
    (tmp_path / "usr/local").mkdir(parents=True)
    (tmp_path / "usr/local/cuda").symlink_to("/opt/cuda-12.4")  # absolute link, resolved inside the root
    system = fake_system(tmp_path)  # scripted runner with nothing scripted: running nvcc would fail the test
    facts = collect(CollectContext(system, CollectOptions()))
    assert facts.default_path == "/opt/cuda-12.4"
    assert facts.version == "12.4.1"
    assert facts.nvcc == "/opt/cuda-12.4/bin/nvcc"
    assert isinstance(facts.nvcc_version, Unavailable) and "--root" in facts.nvcc_version.reason


def _winner(tmp_path, env):
    from gpudoctor.testing import probe_facts, target, targets, torch_facts

    write_tree(
        tmp_path,
        {
            "/usr/local/cuda-11.8/version.json": '{"cuda": {"version": "11.8.0"}}',
            "/usr/local/cuda-11.8/bin/nvcc": "#!/bin/sh\n",
            "/usr/local/cuda-12.1/version.json": '{"cuda": {"version": "12.1.1"}}',
            "/usr/local/cuda-12.1/bin/nvcc": "#!/bin/sh\n",
        },
    )
    (tmp_path / "usr" / "local" / "cuda").symlink_to("/usr/local/cuda-11.8")
    tk = collect(CollectContext(fake_system(tmp_path, env=env), CollectOptions()))
    torch = targets(target(probe_facts(torch=torch_facts("2.5.1+cu121", "12.1"))))
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=tk, nvidia=nvidia_facts("550.54.15", "12.4"), targets=torch))
    return f


def test_the_winning_nvcc_of_another_major_points_at_the_matching_toolkit_already_installed(tmp_path):
    f = _winner(tmp_path, {"PATH": "/usr/bin"})
    assert f.status is Status.WARN and "/usr/local/cuda-11.8 is 11.8.0" in f.summary
    assert "chosen through `/usr/local/cuda`" in f.explanation
    assert "CUDA 12.1.1 toolkit already installed at `/usr/local/cuda-12.1`" in f.explanation
    assert "export CUDA_HOME=/usr/local/cuda-12.1" in f.explanation
    assert "apt-get install cuda-toolkit" not in f.explanation


def test_healthy_twin_cuda_home_names_the_matching_toolkit(tmp_path):
    f = _winner(tmp_path, {"CUDA_HOME": "/usr/local/cuda-12.1", "PATH": "/usr/bin"})
    assert f.status is Status.OK and "nvcc wins through `CUDA_HOME`" in f.summary
    assert f.evidence["toolkits"] == "/usr/local/cuda-11.8 (11.8.0), /usr/local/cuda-12.1 (12.1.1)"


def _wrapper_root(tmp_path, headers_beside=False):
    write_tree(
        tmp_path,
        {
            "/usr/local/cuda-13.0/version.json": '{"cuda": {"version": "13.0.2"}}',
            "/usr/local/cuda-13.0/bin/nvcc": "#!/bin/sh\n",
            "/usr/local/cuda-13.0/include/cuda_runtime_api.h": "",
            "/usr/local/bin/nvcc": '#!/bin/sh\nexec /usr/local/cuda-13.0/bin/nvcc "$@"\n',
            **({"/usr/local/include/cuda_runtime_api.h": ""} if headers_beside else {}),
        },
    )
    (tmp_path / "usr" / "local" / "cuda").symlink_to("/usr/local/cuda-13.0")
    return collect(CollectContext(fake_system(tmp_path, env={"PATH": "/usr/local/bin:/usr/bin"}), CollectOptions()))


def test_an_nvcc_wrapper_first_on_path_gives_a_cuda_home_without_headers(tmp_path):
    tk = _wrapper_root(tmp_path)
    assert tk.nvcc == "/usr/local/bin/nvcc" and tk.nvcc_source == "PATH" and tk.headers is False
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=tk, nvidia=nvidia_facts("580.65.06", "13.0")))
    assert f.status is Status.WARN and "CUDA_HOME=/usr/local, which has no CUDA headers" in f.summary
    assert "export CUDA_HOME=/usr/local/cuda-13.0" in f.explanation
    assert [c.text for c in f.commands] == ["export CUDA_HOME=/usr/local/cuda-13.0"]  # the remedy as data


def test_healthy_twin_the_toolkits_own_bin_on_path(tmp_path):
    _wrapper_root(tmp_path)
    tk = collect(CollectContext(fake_system(tmp_path, env={"PATH": "/usr/local/cuda/bin:/usr/bin"}), CollectOptions()))
    assert tk.nvcc == "/usr/local/cuda-13.0/bin/nvcc" and tk.headers is True
    [f] = CHECK.evaluate(make_facts(cuda_toolkit=tk, nvidia=nvidia_facts("580.65.06", "13.0")))
    assert f.status is Status.OK and "the first `nvcc` on `PATH`" in f.summary


def test_neighbour_distribution_nvcc_in_usr_bin_with_headers_in_usr_include(tmp_path):
    write_tree(tmp_path, {"/usr/bin/nvcc": "#!/bin/sh\n", "/usr/include/cuda_runtime_api.h": ""})
    tk = collect(CollectContext(fake_system(tmp_path, env={"PATH": "/usr/bin"}), CollectOptions()))
    assert tk.nvcc == "/usr/bin/nvcc" and tk.headers is True
