"""``platform.compose-gpu`` and ``--compose FILE`` (issue 25): a Compose file's GPU needs and requests, read
from real files by the real collector, each kind with a neighbour and the healthy twin; bad files are one
line and exit 2."""

from __future__ import annotations

import textwrap

import pytest

from _foundation import env_with, run_gpudoctor
from gpudoctor.checks.platform_compose_gpu import CHECK
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.compose import collect_compose, image_need, split_image
from gpudoctor.composefile import load
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.platform import ContainerHostFacts, DockerInfo
from gpudoctor.inputs import InputError
from gpudoctor.model import Status
from gpudoctor.testing import fake_system, make_facts, no_nvidia, nvidia_facts, write_tree

GPU = """\
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: {count}
              capabilities: [{caps}]
"""


def compose(tmp_path, text: str, extra: dict[str, str] | None = None):
    write_tree(tmp_path, {"/srv/app/docker-compose.yml": textwrap.dedent(text), **(extra or {})})
    ctx = CollectContext(fake_system(tmp_path), CollectOptions(extra={"compose": "/srv/app/docker-compose.yml"}))
    return collect_compose(ctx)


def judge(tmp_path, text: str, host=None, docker=None, extra=None):
    facts = make_facts(
        compose=compose(tmp_path, text, extra),
        nvidia=host or no_nvidia(),
        container_host=ContainerHostFacts(engines=("docker",), docker=docker or Unavailable("not run")),
    )
    return evaluate([CHECK], facts)


def one(findings):
    (f,) = findings
    return f


OLLAMA = "services:\n  ollama:\n    image: ollama/ollama:0.3.12\n    ports: ['11434:11434']\n"
VLLM = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.6.3\n    command: --model facebook/opt-125m\n"


def test_a_cuda_image_without_a_reservation_fails_and_shows_the_reservation(tmp_path):
    f = one(judge(tmp_path, VLLM))
    assert f.status is Status.FAIL and f.summary == "service 'vllm': runs GPU code but requests no GPU"
    assert "image vllm/vllm-openai:v0.6.3" in f.explanation and "docker run --gpus all" in f.explanation
    assert "capabilities: [gpu]" in f.explanation and "/srv/app/docker-compose.yml:2" in f.explanation
    assert f.commands[-1].text == "docker compose -f /srv/app/docker-compose.yml config vllm"


def test_neighbour_an_image_with_a_cpu_fallback_warns(tmp_path):
    f = one(judge(tmp_path, OLLAMA))
    assert f.status is Status.WARN and "it will run on the CPU" in f.summary


def test_healthy_twin_the_same_services_with_the_reservation(tmp_path):
    f = one(judge(tmp_path, VLLM + GPU.format(count="all", caps="gpu")))
    assert f.status is Status.OK and "GPU reserved for vllm" in f.summary
    g = one(judge(tmp_path, OLLAMA + "    gpus: all\n"))
    assert g.status is Status.OK, g.summary


def test_a_service_built_from_a_cuda_dockerfile_needs_a_gpu_and_its_build_args_apply(tmp_path):
    text = "services:\n  train:\n    build:\n      context: ./trainer\n      args:\n        CUDA: 12.4.1\n"
    dockerfile = {"/srv/app/trainer/Dockerfile": "ARG CUDA=11.8.0\nFROM nvidia/cuda:${CUDA}-runtime-ubuntu22.04\n"}
    facts = compose(tmp_path, text, dockerfile)
    (svc,) = facts.services
    assert svc.build is not None and svc.build.base == "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    assert svc.gpu_signs == ("Dockerfile FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04 (CUDA 12.4)",)
    assert one(judge(tmp_path, text, extra=dockerfile)).status is Status.FAIL


def test_the_build_dockerfile_is_judged_like_dockerfile(tmp_path):
    dockerfile = {
        "/srv/app/Dockerfile.gpu": "FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\nRUN pip install flash-attn "
        "--no-build-isolation\n"
    }
    text = "services:\n  app:\n    build:\n      context: .\n      dockerfile: Dockerfile.gpu\n" + GPU.format(
        count=1, caps="gpu"
    )
    f = one(judge(tmp_path, text, extra=dockerfile))
    assert f.status is Status.FAIL and "a runtime image without nvcc" in f.summary
    assert f.summary.startswith("service 'app': Dockerfile.gpu compiles")
    twin = {"/srv/app/Dockerfile.gpu": dockerfile["/srv/app/Dockerfile.gpu"].replace("runtime", "devel")}
    assert one(judge(tmp_path, text, extra=twin)).status is Status.OK


def test_a_missing_build_dockerfile_warns_that_it_was_not_judged(tmp_path):
    text = "services:\n  app:\n    build: ./gone\n" + GPU.format(count=1, caps="gpu")
    f = one(judge(tmp_path, text))
    assert f.status is Status.WARN and "/srv/app/gone/Dockerfile: no such file" in f.summary


@pytest.mark.parametrize(
    ("caps", "status"),
    [("gpu, utility", Status.FAIL), ("utility", Status.FAIL), ("gpu", Status.OK), ("gpu, compute, utility", Status.OK)],
)
def test_driver_capabilities_without_compute_leave_cuda_out(tmp_path, caps, status):
    f = one(judge(tmp_path, VLLM + GPU.format(count=1, caps=caps)))
    assert f.status is status, f.summary
    if status is Status.FAIL:
        assert "NVIDIA_DRIVER_CAPABILITIES=utility" in f.explanation and "leave out `compute`" in f.summary


def test_a_monitoring_service_with_utility_only_is_a_warning(tmp_path):
    text = "services:\n  smi:\n    image: busybox\n" + GPU.format(count=1, caps="gpu, utility")
    assert one(judge(tmp_path, text)).status is Status.WARN


def test_a_reservation_without_capabilities_fails(tmp_path):
    text = (
        VLLM
        + "    deploy:\n      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n"
    )
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and "no `capabilities`" in f.summary


def test_count_and_device_ids_together_fail(tmp_path):
    text = VLLM + GPU.format(count=1, caps="gpu") + "              device_ids: ['0', '1']\n"
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and "both `count` (1) and `device_ids` (0, 1)" in f.summary


@pytest.mark.parametrize("value", ["void", "none", ""])
def test_nvidia_visible_devices_void_or_none_hides_the_gpu(tmp_path, value):
    text = VLLM + GPU.format(count="all", caps="gpu") + f"    environment:\n      - NVIDIA_VISIBLE_DEVICES={value}\n"
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and "hides every GPU" in f.summary
    twin = text.replace(f"NVIDIA_VISIBLE_DEVICES={value}", "NVIDIA_VISIBLE_DEVICES=all")
    assert one(judge(tmp_path, twin)).status is Status.OK


def test_cuda_visible_devices_names_an_index_the_container_lacks(tmp_path):
    base = VLLM + "    environment:\n      CUDA_VISIBLE_DEVICES: '{cvd}'\n    deploy:\n      resources:\n"
    base += "        reservations:\n          devices:\n            - driver: nvidia\n"
    base += "              device_ids: ['1']\n              capabilities: [gpu]\n"
    f = one(judge(tmp_path, base.format(cvd="1")))
    assert f.status is Status.FAIL and "CUDA_VISIBLE_DEVICES=1 names a GPU the container does not have" in f.summary
    assert "device_ids 1 become 0..0" in f.explanation
    assert one(judge(tmp_path, base.format(cvd="0"))).status is Status.OK


def test_runtime_nvidia_on_a_daemon_without_that_runtime(tmp_path):
    text = VLLM + "    runtime: nvidia\n"
    runc = DockerInfo("27.3.1", ("io.containerd.runc.v2", "runc"), "runc")
    f = one(judge(tmp_path, text, docker=runc))
    assert f.status is Status.FAIL and "unknown or invalid runtime name: nvidia" in f.explanation
    assert any(c.safety == "root" and "nvidia-ctk runtime configure" in c.text for c in f.commands)
    twin = DockerInfo("27.3.1", ("io.containerd.runc.v2", "nvidia", "runc"), "runc")
    assert one(judge(tmp_path, text, docker=twin)).status is Status.OK
    # docker info not known (another host's file): the runtime is taken as a GPU request
    assert one(judge(tmp_path, text)).status is Status.OK


def test_image_cuda_newer_than_the_host_driver(tmp_path):
    text = "services:\n  app:\n    image: nvidia/cuda:12.6.2-base-ubuntu24.04\n" + GPU.format(count=1, caps="gpu")
    f = one(judge(tmp_path, text, host=nvidia_facts("535.183.01", "12.2")))
    assert f.status is Status.FAIL and "needs CUDA 12.6; this host's driver supports CUDA 12.2" in f.summary
    assert one(judge(tmp_path, text, host=nvidia_facts("560.35.03", "12.6"))).status is Status.OK


def test_one_finding_per_faulty_service_and_cpu_services_are_left_alone(tmp_path):
    text = OLLAMA + "  vllm:\n    image: vllm/vllm-openai:v0.6.3\n  redis:\n    image: redis:7\n"
    findings = judge(tmp_path, text)
    assert [f.summary.split(":")[0] for f in findings] == ["service 'ollama'", "service 'vllm'"]


def test_no_compose_file_skips(tmp_path):
    facts = make_facts(compose=Unavailable("no Compose file given (--compose FILE)"), nvidia=no_nvidia())
    assert one(evaluate([CHECK], facts)).status is Status.SKIP


@pytest.mark.parametrize(
    ("ref", "repo", "tag", "need"),
    [
        ("ollama/ollama", "ollama/ollama", "latest", "optional"),
        ("ollama/ollama:rocm", "ollama/ollama", "rocm", ""),
        ("localhost:5000/team/app:cu121", "localhost:5000/team/app", "cu121", "required"),
        ("ghcr.io/ggerganov/llama.cpp:server-cuda", "ghcr.io/ggerganov/llama.cpp", "server-cuda", "required"),
        ("tensorflow/tensorflow:2.15.0-gpu", "tensorflow/tensorflow", "2.15.0-gpu", "required"),
        ("tensorflow/tensorflow:2.15.0", "tensorflow/tensorflow", "2.15.0", ""),
        ("postgres:16@sha256:abc", "postgres", "16", ""),
    ],
)
def test_gpu_images_from_the_data_table(ref, repo, tag, need):
    assert split_image(ref) == (repo, tag) and image_need(ref) == need


# --- the file itself: duplicate keys, merge keys, line numbers ---


def test_a_key_given_twice_is_refused_not_merged():
    text = "services:\n  app:\n    image: a\n    deploy: {}\n    deploy:\n      resources: {}\n"
    with pytest.raises(InputError, match=r"key 'deploy' given twice \(lines 4 and 5\)"):
        load(text, "docker-compose.yml")


def test_merge_keys_and_their_overrides_are_not_duplicates():
    text = textwrap.dedent(
        """\
        x-gpu: &gpu
          image: vllm/vllm-openai:v0.6.3
          deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}
        services:
          a:
            <<: *gpu
            image: vllm/vllm-openai:v0.6.4
          b:
            <<: *gpu
        """
    )
    doc = load(text, "compose.yaml")
    assert doc["services"]["a"]["image"] == "vllm/vllm-openai:v0.6.4" and "deploy" in doc["services"]["b"]


def _laughs(levels: int = 10) -> bytes:
    """The "billion laughs" document: each anchor lists the one before ten times (10**levels values)."""
    rows = ["x-a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [f"x-a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    rows += ["services:", "  s:", "    image: pytorch/pytorch", f"    command: *a{levels - 1}"]
    return ("\n".join(rows) + "\n").encode()


def _bad_files():
    return {
        "laughs.yml": (_laughs(), "expand to more than 1,000,000 values (excessive aliasing)"),
        "recursive.yml": (b"x-a: &a [*a]\nservices:\n  s:\n    image: x\n    labels: *a\n", "alias to itself"),
        "missing.yml": (None, "No such file or directory"),
        "binary.yml": (b"services:\x00\n", "binary file"),
        "broken.yml": (b"services: [unclosed\n", "not valid YAML"),
        "dup.yml": (b"services:\n  a:\n    image: x\n  a:\n    image: y\n", "key 'a' given twice (lines 2 and 4)"),
        "list.yml": (b"- a\n- b\n", "not a Compose file"),
        "tabs.yml": (
            b"services:\n\tapp:\n\t\timage: x\n",
            "found character '\\t' that cannot start any token (line 2)",
        ),
        "empty.yml": (b"", "an empty file"),
        "noservices.yml": (b"version: '3'\n", "no `services:` mapping"),
        "tagged.yml": (b'services: !!python/object/apply:os.system ["true"]\n', "not valid YAML"),
        "scalar-service.yml": (b"services:\n  a: 1\n", "service 'a' is not a mapping"),
    }


@pytest.mark.parametrize("name", sorted(_bad_files()))
def test_a_bad_compose_file_is_one_line_and_exit_2(tmp_path, name):
    content, text = _bad_files()[name]
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    proc = run_gpudoctor("check", "platform.compose-gpu", "--offline", "--compose", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stderr and f"--compose {path}" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_aliases_that_expand_without_bound_are_refused_and_reused_anchors_are_not():
    with pytest.raises(InputError, match="excessive aliasing"):
        load(_laughs().decode(), "compose.yaml")
    doc = load(_laughs(4).decode(), "compose.yaml")  # 10**4 values: an ordinary use of anchors
    assert len(doc["services"]["s"]["command"]) == 10


def test_the_collector_refuses_an_alias_bomb_instead_of_timing_out(tmp_path):
    (tmp_path / "compose.yaml").write_bytes(_laughs())
    facts = collect_compose(CollectContext(fake_system(tmp_path), CollectOptions(extra={"compose": "/compose.yaml"})))
    assert isinstance(facts, Unavailable) and "excessive aliasing" in str(facts)


def test_the_cli_judges_a_compose_file_relative_to_the_working_directory(tmp_path):
    (tmp_path / "docker-compose.yml").write_text(VLLM)
    proc = run_gpudoctor(
        "check",
        "platform.compose-gpu",
        "--offline",
        "--format",
        "json",
        "--compose",
        "docker-compose.yml",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert "service 'vllm': runs GPU code but requests no GPU" in proc.stdout
    env_proc = run_gpudoctor(
        "check",
        "platform.compose-gpu",
        "--offline",
        "--format",
        "json",
        cwd=tmp_path,
        env=env_with(GPUDOCTOR_COMPOSE="docker-compose.yml"),
    )
    assert env_proc.returncode == 1 and "requests no GPU" in env_proc.stdout


def test_compose_with_facts_is_a_usage_error(tmp_path):
    (tmp_path / "c.yml").write_text(VLLM)
    proc = run_gpudoctor("check", "--facts", str(tmp_path / "nope.json"), "--compose", str(tmp_path / "c.yml"))
    assert proc.returncode == 2 and "--compose" in proc.stderr


def test_cuda_visible_devices_all_hides_every_gpu_from_cuda(tmp_path):
    text = VLLM + GPU.format(count="all", caps="gpu") + "    environment:\n      CUDA_VISIBLE_DEVICES: all\n"
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and "CUDA_VISIBLE_DEVICES=all in its environment hides every GPU" in f.summary
    assert "`all` is a word of `NVIDIA_VISIBLE_DEVICES`" in f.explanation
    twin = text.replace("CUDA_VISIBLE_DEVICES: all", "NVIDIA_VISIBLE_DEVICES: all")
    assert one(judge(tmp_path, twin)).status is Status.OK


@pytest.mark.parametrize(("ids", "bad"), [("'{GPU_ID:-0}'", "{GPU_ID:-0}"), ("'first'", "first")])
def test_device_ids_that_are_no_gpu_fail(tmp_path, ids, bad):
    text = VLLM + "    deploy:\n      resources:\n        reservations:\n          devices:\n"
    text += f"            - driver: nvidia\n              device_ids: [{ids}]\n              capabilities: [gpu]\n"
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and f"names device {bad!r}" in f.summary
    assert f"device error: {bad}: unknown device" in f.explanation
    assert ("`${GPU_ID:-0}`" in f.explanation) == bad.startswith("{")


def test_variables_are_interpolated_from_the_env_file_like_compose(tmp_path):
    text = VLLM + "    deploy:\n      resources:\n        reservations:\n          devices:\n"
    text += (
        "            - driver: nvidia\n              device_ids: ['${GPU_ID:-0}']\n              capabilities: [gpu]\n"
    )
    text += "    environment:\n      CUDA_VISIBLE_DEVICES: ${CUDA_DEV}\n"
    facts = compose(tmp_path, text, {"/srv/app/.env": "# pinned\nGPU_ID=3\nexport CUDA_DEV='1'\n"})
    (svc,) = facts.services
    assert svc.requests[0].device_ids == ("3",) and svc.cuda_visible_devices == "1"
    f = one(judge(tmp_path, text, extra={"/srv/app/.env": "GPU_ID=3\nCUDA_DEV=1\n"}))
    assert "CUDA_VISIBLE_DEVICES=1 names a GPU the container does not have" in f.summary
    twin = one(judge(tmp_path, text, extra={"/srv/app/.env": "GPU_ID=3\nCUDA_DEV=0\n"}))
    assert twin.status is Status.OK


def test_a_cdi_reservation_needs_no_capabilities_and_names_cdi_devices(tmp_path):
    """Compose 2.24+ with Docker's CDI support: `driver: cdi` and `device_ids: [nvidia.com/gpu=all]` is a GPU
    request of its own form, not a reservation lacking capabilities or naming a bad device."""
    text = VLLM + "    deploy:\n      resources:\n        reservations:\n          devices:\n"
    text += "            - driver: cdi\n              device_ids: ['nvidia.com/gpu=all']\n"
    f = one(judge(tmp_path, text))
    assert f.status is Status.OK, f.summary


def test_cuda_visible_devices_with_a_cdi_request_for_every_gpu_is_not_judged_by_count(tmp_path):
    text = VLLM + "    environment:\n      CUDA_VISIBLE_DEVICES: '1'\n    deploy:\n      resources:\n"
    text += "        reservations:\n          devices:\n            - driver: cdi\n"
    text += "              device_ids: ['nvidia.com/gpu=all']\n"
    assert one(judge(tmp_path, text)).status is Status.OK


def test_the_compose_file_can_come_from_a_config_file(tmp_path):
    (tmp_path / "compose.yaml").write_text(VLLM)
    (tmp_path / "gpudoctor.toml").write_text('[check]\ncompose = "compose.yaml"\n')
    proc = run_gpudoctor(
        "check",
        "platform.compose-gpu",
        "--offline",
        "--format",
        "json",
        cwd=tmp_path,
        env=env_with(GPUDOCTOR_CONFIG=str(tmp_path / "gpudoctor.toml")),
    )
    assert proc.returncode == 1 and "service 'vllm': runs GPU code but requests no GPU" in proc.stdout


def test_the_gpus_key_in_its_list_form_is_a_request_with_its_count(tmp_path):
    text = (
        VLLM
        + "    gpus:\n      - driver: nvidia\n        count: 1\n    environment:\n      CUDA_VISIBLE_DEVICES: '1'\n"
    )
    (svc,) = compose(tmp_path, text).services
    assert [(r.via, r.where, r.count, r.capabilities) for r in svc.requests] == [("gpus", "gpus[0]", "1", ("gpu",))]
    f = one(judge(tmp_path, text))
    assert f.status is Status.FAIL and "(it gets 1)" in f.summary


@pytest.mark.parametrize("name", ["missing.yml", "dup.yml", "escape.yml"])
def test_a_bad_compose_file_inside_root_is_one_line_and_exit_2(tmp_path, name):
    root = write_tree(
        tmp_path / "r", {"/etc/os-release": "ID=debian\n", "/app/dup.yml": "services:\n  a: {}\n  a: {}\n"}
    )
    outside = tmp_path / "compose.yaml"  # a good file, outside the root
    outside.write_text(VLLM)
    (root / "app/escape.yml").symlink_to(f"/../../../..{outside}")  # resolved inside the root: not found
    proc = run_gpudoctor("check", "platform.compose-gpu", "--offline", "--root", str(root), "--compose", f"/app/{name}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--compose /app/{name} (in --root {root}): " in proc.stderr
    assert ("given twice" if name == "dup.yml" else "No such file") in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_good_compose_file_inside_root_is_judged(tmp_path):
    root = write_tree(tmp_path / "r", {"/etc/os-release": "ID=debian\n", "/app/compose.yaml": VLLM})
    proc = run_gpudoctor(
        "check", "platform.compose-gpu", "--offline", "--root", str(root), "--compose", "/app/compose.yaml"
    )
    assert "platform.compose-gpu" in proc.stdout and proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "not applicable" not in proc.stdout


def test_a_service_that_extends_another_file_says_what_was_not_judged(tmp_path):
    text = "services:\n  train:\n    extends:\n      file: ../common.yml\n      service: base\n    command: python train.py\n"
    f = one(judge(tmp_path, text))
    assert (
        f.status is Status.WARN and f.summary == "service 'train': it extends ../common.yml base, which was not judged"
    )
    assert "docker compose -f /srv/app/docker-compose.yml config > merged.yml" in f.explanation


def test_neighbour_include_at_the_top_level_is_named_not_judged(tmp_path):
    text = "include:\n  - gpu.yml\n  - path: [infra/db.yml]\n" + VLLM + GPU.format(count="all", caps="gpu")
    f = one(judge(tmp_path, text))
    assert f.status is Status.WARN and "include: (gpu.yml, infra/db.yml) was not judged" in f.summary
    assert [c.text for c in f.commands][-1] == "gpudoctor check --offline --compose merged.yml"


def test_twin_without_extends_or_include_nothing_is_said_about_them(tmp_path):
    f = one(judge(tmp_path, VLLM + GPU.format(count="all", caps="gpu")))
    assert f.status is Status.OK and "not judged" not in f.summary


def test_env_file_values_count_and_environment_overrides_them(tmp_path):
    """`env_file:` is read before `environment:` (Compose specification): NVIDIA_VISIBLE_DEVICES=void in
    the file hides the GPU as it would in `environment:`; the list and `{path, required}` forms, later
    files winning. Twin: `environment:` sets it back to all."""
    base = VLLM + GPU.format(count="all", caps="gpu")
    files = {
        "/srv/app/gpu.env": "# GPUs\nNVIDIA_VISIBLE_DEVICES=void\n",
        "/srv/app/all.env": "NVIDIA_VISIBLE_DEVICES=all\n",
    }
    f = one(judge(tmp_path, base + "    env_file: gpu.env\n", extra=files))
    assert f.status is Status.FAIL and "hides every GPU" in f.summary
    listed = base + "    env_file:\n      - all.env\n      - path: ./gpu.env\n        required: false\n"
    assert "hides every GPU" in one(judge(tmp_path, listed, extra=files)).summary
    later_wins = base + "    env_file: [gpu.env, all.env]\n"
    assert one(judge(tmp_path, later_wins, extra=files)).status is Status.OK
    overridden = base + "    env_file: gpu.env\n    environment:\n      - NVIDIA_VISIBLE_DEVICES=all\n"
    assert one(judge(tmp_path, overridden, extra=files)).status is Status.OK
    missing = base + "    env_file: nowhere.env\n"
    assert one(judge(tmp_path, missing, extra=files)).status is Status.OK


@pytest.mark.parametrize("kind", ["directory", "fifo", "huge", "outside-root", "absolute-outside-root"])
def test_an_env_file_that_cannot_be_used_adds_nothing(tmp_path, kind):
    """A directory, a FIFO (never opened for a blocking read), a file over the Compose limit (refused
    after MAX_BYTES + 1 bytes, not read whole) and paths that leave the --root (resolved inside it,
    where nothing is) add no variable; a later readable file still counts. Twin: the same file inside
    the root hides the GPU."""
    import os

    from gpudoctor.composefile import MAX_BYTES

    root = tmp_path / "root"
    outside = tmp_path / f"outside-{kind}.env"
    outside.write_text("NVIDIA_VISIBLE_DEVICES=void\n")
    app = root / "srv" / "app"
    app.mkdir(parents=True)
    name = {"outside-root": f"../../../../{outside.name}", "absolute-outside-root": str(outside)}.get(kind, "x.env")
    if kind == "directory":
        (app / "x.env").mkdir()
    elif kind == "fifo":
        os.mkfifo(app / "x.env")
    elif kind == "huge":
        with open(app / "x.env", "wb") as fh:
            fh.write(b"NVIDIA_VISIBLE_DEVICES=void\n")
            fh.truncate(MAX_BYTES * 64)  # sparse
    base = VLLM + GPU.format(count="all", caps="gpu")
    assert one(judge(root, base + f"    env_file: ['{name}']\n")).status is Status.OK
    then_void = {"/srv/app/void.env": "NVIDIA_VISIBLE_DEVICES=void\n"}
    f = one(judge(root, base + f"    env_file: ['{name}', void.env]\n", extra=then_void))
    assert f.status is Status.FAIL and "hides every GPU" in f.summary


def test_read_bytes_with_a_limit_reads_one_byte_past_it(tmp_path):
    write_tree(tmp_path, {"/f": "x" * 100})
    files = fake_system(tmp_path).files
    assert files.read_bytes("/f", limit=10) == b"x" * 11
    assert files.read_bytes("/f", limit=100) == b"x" * 100
    assert files.read_bytes("/f") == b"x" * 100


@pytest.mark.parametrize(
    ("line", "hidden"),
    [
        ("NVIDIA_VISIBLE_DEVICES=void # no GPU for the web tier", True),
        ('NVIDIA_VISIBLE_DEVICES="void" # quoted, then a comment', True),
        ("NVIDIA_VISIBLE_DEVICES='none'\t# tab before the comment", True),
        ("NVIDIA_VISIBLE_DEVICES=void#not-a-comment", False),  # no space before '#': part of the value
        ('NVIDIA_VISIBLE_DEVICES="all # inside the quotes"', False),
    ],
)
def test_env_file_inline_comments_as_compose_reads_them(tmp_path, line, hidden):
    """Compose's env-file syntax: an unquoted value ends at `` #``, a quoted one at its closing quote
    (docs.docker.com/compose/env-file). Twins: '#' without a space, '#' inside quotes."""
    base = VLLM + GPU.format(count="all", caps="gpu")
    f = one(judge(tmp_path, base + "    env_file: gpu.env\n", extra={"/srv/app/gpu.env": line + "\n"}))
    assert ("hides every GPU" in f.summary) is hidden, f.summary


def test_a_dot_env_over_the_limit_or_a_fifo_adds_nothing(tmp_path):
    """The project's .env is read like an env_file: a FIFO is never opened for a blocking read, a
    file over MAX_BYTES is refused without reading it whole. Twin: a small .env interpolates."""
    import os

    from gpudoctor.composefile import MAX_BYTES

    text = VLLM + "    environment:\n      CUDA_VISIBLE_DEVICES: ${CUDA_DEV:-0}\n"
    (svc,) = compose(tmp_path, text, {"/srv/app/.env": "CUDA_DEV=1 # the second GPU\n"}).services
    assert svc.cuda_visible_devices == "1"
    with open(tmp_path / "srv" / "app" / ".env", "ab") as fh:
        fh.truncate(MAX_BYTES * 64)  # sparse
    (svc,) = compose(tmp_path, text).services
    assert svc.cuda_visible_devices == "0"
    os.remove(tmp_path / "srv" / "app" / ".env")
    os.mkfifo(tmp_path / "srv" / "app" / ".env")
    (svc,) = compose(tmp_path, text).services
    assert svc.cuda_visible_devices == "0"


def test_an_env_file_in_raw_format_keeps_values_as_written(tmp_path):
    """`format: raw` (Compose specification): no quote or comment handling, so `void # x` is not
    `void` and the GPU stays. Twin: the same file in the default format hides it."""
    base = VLLM + GPU.format(count="all", caps="gpu")
    files = {"/srv/app/gpu.env": "NVIDIA_VISIBLE_DEVICES=void # hide\n"}
    raw = one(judge(tmp_path, base + "    env_file:\n      - path: gpu.env\n        format: raw\n", extra=files))
    assert raw.status is Status.OK
    assert "hides every GPU" in one(judge(tmp_path, base + "    env_file: [{path: gpu.env}]\n", extra=files)).summary
