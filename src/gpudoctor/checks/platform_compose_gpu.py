"""Check ``platform.compose-gpu``: does each service of a Compose file get the GPU it needs?

Evidence: the ``compose`` domain (``--compose FILE``): each service's GPU
needs (a CUDA/GPU image, a Dockerfile on a CUDA base or with a CUDA torch
wheel, ``NVIDIA_VISIBLE_DEVICES`` in its environment) and its GPU requests;
the host's Docker runtimes (``container_host``) and driver (``nvidia``) when
gpudoctor runs on the host that will run it.

Per service, the first of (Docker docs, "Enable GPU access with Docker
Compose"; NVIDIA Container Toolkit docs, "Specialized configurations"):

1. a device request without ``capabilities`` -> ``fail`` (Compose requires them, and
   Docker picks the device driver by them); one that lists NVIDIA driver capabilities
   (``utility``, ``video``...) but not ``compute`` -> ``fail`` (``warn`` when nothing shows the service runs
   CUDA: a monitoring container needs only ``utility``): Docker passes them on as
   ``NVIDIA_DRIVER_CAPABILITIES`` and the container gets ``nvidia-smi`` but no ``libcuda``
   (docker/compose#8583);
2. ``count`` and ``device_ids`` in one request -> ``fail``: Compose documents them
   as mutually exclusive;
3. ``runtime: nvidia`` where ``docker info`` lists no ``nvidia`` runtime -> ``fail``
   (``unknown or invalid runtime name: nvidia``);
4. ``NVIDIA_VISIBLE_DEVICES`` ``void``/``none``/empty on a service that wants a GPU
   -> ``fail``: the NVIDIA runtime then gives the container no GPU;
5. GPU needs and no GPU request -> ``fail`` (an image that needs CUDA) or ``warn``
   (one that falls back to the CPU): the classic "works with ``docker run --gpus
   all``, not in Compose";
6. ``CUDA_VISIBLE_DEVICES`` that names no device CUDA can use (``all``, a hiding word)
   or an index the container does not have (it numbers the GPUs it gets from 0)
   -> ``fail``; ``device_ids`` that are no GPU index or UUID (an interpolation
   missing its ``$``) -> ``fail``;
7. the image tag's CUDA newer than the host driver, or the ``build:`` Dockerfile's
   faults as ``platform.image-gpu`` judges them -> ``fail``;
8. a ``build:`` Dockerfile that cannot be read -> ``warn`` (not judged).

No fault -> one ``ok``; no ``--compose`` -> ``skip``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import driver_install_commands
from gpudoctor.checks._gpu import driver_max_cuda
from gpudoctor.checks._image import verdict
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.compose import ComposeFacts, ComposeService, GpuRequest
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.facts.platform import ContainerHostFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.visibility import Entry, parse_visible

DOCS = "https://docs.docker.com/compose/how-tos/gpu-support/"

#: NVIDIA driver capabilities (NVIDIA Container Toolkit docs, "Driver capabilities"); Docker's nvidia
#: device driver accepts them in a request and passes them on as NVIDIA_DRIVER_CAPABILITIES
NVIDIA_CAPS = ("compute", "compat32", "graphics", "utility", "video", "display")

#: the reservation Docker's docs give, indented to sit under a service
RESERVATION = (
    "    deploy:\n"
    "      resources:\n"
    "        reservations:\n"
    "          devices:\n"
    "            - driver: nvidia\n"
    "              count: all\n"
    "              capabilities: [gpu]\n"
)


def _granted(requests: tuple[GpuRequest, ...]) -> int | None:
    """How many GPUs the requests give the container (None: all of them, or not known)."""
    total = 0
    for r in requests:
        if any(d.endswith("=all") for d in r.device_ids):  # a CDI name for every GPU
            return None
        if r.device_ids:
            total += len(r.device_ids)
        elif r.count.isdigit():
            total += int(r.count)
        else:
            return None
    return total or None


def _named(device: str) -> tuple[Entry, ...]:
    """The one entry a device id that names a GPU parses to (an index or a UUID), else ()."""
    entries = parse_visible(device).entries
    return entries[:1] if entries and entries[0].form in ("index", "gpu-uuid", "mig-uuid") else ()


def _docker_runtimes(facts: Facts) -> tuple[str, ...] | None:
    host = facts.of(ContainerHostFacts)
    if isinstance(host, Unavailable) or isinstance(host.docker, Unavailable):
        return None
    return host.docker.runtimes


def _fault(svc: ComposeService, file: str, facts: Facts) -> Finding | None:
    where = f"{file}:{svc.line}" if svc.line else file
    evidence: dict[str, object] = {
        "service": svc.name,
        "where": where,
        "image": svc.image,
        "gpu_signs": list(svc.gpu_signs),
        "requests": [r.where for r in svc.requests],
    }

    def fail(
        status: Status, summary: str, explanation: str, commands: tuple[Command, ...] = (), **extra: object
    ) -> Finding:
        return CHECK.finding(
            status,
            f"service {svc.name!r}: {summary}",
            explanation,
            evidence={**evidence, **extra},
            doc_url=DOCS,
            commands=commands
            + (Command(f"docker compose -f {file} config {svc.name}", "show the service as Compose reads it"),),
        )

    for r in svc.requests:
        if r.driver == "cdi":  # CDI device names (nvidia.com/gpu=all) need no capabilities (Docker 25+, Compose 2.24+)
            continue
        if r.via == "devices" and not r.capabilities:
            return fail(
                Status.FAIL,
                f"its GPU reservation has no `capabilities` ({r.where})",
                f"Compose requires `capabilities` in a device reservation, and Docker picks the device driver by "
                f"them: without `gpu` no driver is selected and the service does not start. In `{where}`:\n\n"
                f"```yaml\n{RESERVATION}```",
            )
        driver_caps = [c for c in r.capabilities if c in NVIDIA_CAPS]
        if r.via == "devices" and driver_caps and "compute" not in driver_caps:
            return fail(
                Status.FAIL if svc.gpu_signs else Status.WARN,
                f"its GPU reservation's capabilities [{', '.join(r.capabilities)}] leave out `compute`: "
                f"the container gets no CUDA library",
                f"Docker passes the NVIDIA driver capabilities among a reservation's `capabilities` "
                f"({', '.join(driver_caps)}) to the NVIDIA runtime as `NVIDIA_DRIVER_CAPABILITIES={','.join(driver_caps)}`, "
                f"and the runtime mounts only the driver libraries of those capabilities: `nvidia-smi` works "
                f"(`utility`), but `libcuda.so` (`compute`) is not there, so CUDA, PyTorch, TensorFlow and JAX see no "
                f"GPU. Use `capabilities: [gpu]` (the image's own `NVIDIA_DRIVER_CAPABILITIES` then applies), or "
                f"add `compute`: `capabilities: [gpu, compute, utility]`, in `{where}` ({r.where}).",
                capabilities=list(r.capabilities),
            )
        if r.via == "devices" and r.count and r.device_ids:
            return fail(
                Status.FAIL,
                f"its GPU reservation sets both `count` ({r.count}) and `device_ids` ({', '.join(r.device_ids)})",
                f"Compose documents `count` and `device_ids` as mutually exclusive: set one. To pin GPUs, keep "
                f"`device_ids: [{', '.join(repr(d) for d in r.device_ids)}]` and delete `count: {r.count}` in "
                f"`{where}` ({r.where}).",
            )
        bad_ids = [d for d in r.device_ids if "$" not in d and parse_visible(d).entries[:1] != _named(d)]
        if bad_ids:
            return fail(
                Status.FAIL,
                f"its GPU reservation names device {bad_ids[0]!r}, which is no GPU index or UUID",
                f"`device_ids` take GPU indices (`'0'`) or UUIDs (`GPU-...`, as `nvidia-smi -L` prints them); the "
                f"NVIDIA runtime refuses anything else and the container does not start (`nvidia-container-cli: "
                f"device error: {bad_ids[0]}: unknown device`)."
                + (
                    " A variable needs its `$` to be interpolated by Compose: "
                    f"`${bad_ids[0][bad_ids[0].index('{') :]}`."
                    if bad_ids[0].startswith("{")
                    else ""
                )
                + f" Fix `{r.where}` in `{where}`.",
                device_ids=list(r.device_ids),
            )
    runtimes = _docker_runtimes(facts)
    if any(r.via == "runtime" for r in svc.requests) and runtimes is not None and "nvidia" not in runtimes:
        return fail(
            Status.FAIL,
            "`runtime: nvidia`, but this Docker daemon has no `nvidia` runtime",
            f"`docker info` lists the runtimes {', '.join(runtimes) or 'none'}; the service cannot start "
            f"(`Error response from daemon: unknown or invalid runtime name: nvidia`). Either register the runtime "
            f"(`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`) or, "
            f"better, drop `runtime: nvidia` and reserve the GPU the way Compose documents it:\n\n"
            f"```yaml\n{RESERVATION}```",
            commands=(
                Command(
                    "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
                    "register the nvidia runtime with Docker (NVIDIA Container Toolkit installed)",
                    "root",
                ),
            ),
            docker_runtimes=list(runtimes),
        )
    wants = bool(svc.gpu_signs or svc.requests)
    nvd = svc.nvidia_visible_devices
    if wants and nvd is not None and nvd.strip().lower() in ("void", "none", ""):
        return fail(
            Status.FAIL,
            f"NVIDIA_VISIBLE_DEVICES={nvd or '(empty)'} in its environment hides every GPU",
            f"The NVIDIA Container Toolkit reads `NVIDIA_VISIBLE_DEVICES` from the container's environment: "
            f"`none` mounts the driver but no GPU, `void` or an empty value makes the runtime behave like plain "
            f"`runc` (no driver, no GPU), whatever the service reserves. Delete the variable from the service's "
            f"`environment` in `{where}` (the reservation decides which GPUs it gets), or set it to `all`.",
            NVIDIA_VISIBLE_DEVICES=nvd,
        )
    if svc.gpu_signs and not svc.requests:
        required = any("CPU" not in s for s in svc.gpu_signs)
        return fail(
            Status.FAIL if required else Status.WARN,
            "runs GPU code but requests no GPU" + ("" if required else ": it will run on the CPU"),
            f"{'; '.join(svc.gpu_signs)}. `docker run --gpus all` asks Docker for the GPUs on the command line; "
            f"Compose does not: a service gets a GPU only through a device reservation (or the `gpus:` key of "
            f"Compose 2.30+), and without one the container starts with no `/dev/nvidia*` and no driver "
            f"libraries, so CUDA reports no device"
            + ("" if required else " and the program silently falls back to the CPU")
            + f". Add under the service in `{where}`:\n\n```yaml\n{RESERVATION}```",
        )
    granted = _granted(svc.requests)
    cvd = svc.cuda_visible_devices
    visible = parse_visible(cvd) if cvd is not None and "$" not in cvd and wants else None
    if visible is not None and visible.hides_all:
        return fail(
            Status.FAIL,
            f"CUDA_VISIBLE_DEVICES={cvd or '(empty)'} in its environment hides every GPU from CUDA",
            f"CUDA reads `CUDA_VISIBLE_DEVICES` as a list of device indices or `GPU-`/`MIG-` UUIDs and stops at the "
            f"first entry it cannot use; `{cvd}` names none, so CUDA sees no device (`RuntimeError: No CUDA GPUs "
            f"are available`, `no CUDA-capable device is detected`) even though the container has the GPUs "
            f"(`nvidia-smi` shows them)."
            + (
                " `all` is a word of `NVIDIA_VISIBLE_DEVICES`, not of CUDA."
                if (cvd or "").strip().lower() == "all"
                else ""
            )
            + f" Delete `CUDA_VISIBLE_DEVICES` from the service's `environment` in `{where}` (the reservation "
            f"decides which GPUs it gets), or list indices from 0.",
            CUDA_VISIBLE_DEVICES=cvd,
        )
    if visible is not None and granted is not None:
        indices = [int(e.text) for e in visible.entries if e.form == "index"]
        if indices and max(indices) >= granted:
            pinned = [i for r in svc.requests for i in r.device_ids]
            return fail(
                Status.FAIL,
                f"CUDA_VISIBLE_DEVICES={cvd} names a GPU the container does not have (it gets {granted})",
                "Inside the container the GPUs it was given are numbered from 0"
                + (f" (device_ids {', '.join(pinned)} become 0..{granted - 1})" if pinned else "")
                + f", so `CUDA_VISIBLE_DEVICES={cvd}` leaves CUDA no device (`no CUDA-capable device is detected`). "
                f"Pick the host GPUs with the reservation's `device_ids` and delete `CUDA_VISIBLE_DEVICES` from the "
                f"service's `environment` in `{where}` (or number them from 0).",
                CUDA_VISIBLE_DEVICES=cvd,
                granted=granted,
            )
    host = driver_max_cuda(facts)
    driver = driver_install_commands(facts)
    if svc.image_cuda:  # the pulled image is judged like a Dockerfile's FROM (its tag's CUDA vs the host driver)
        fault = verdict(GpuImageFacts(file=where, base=svc.image, base_cuda=svc.image_cuda), host, driver)
        if fault is not None:
            return fail(fault.status, fault.summary, fault.explanation, fault.commands, **fault.evidence)
    if svc.build is not None:
        fault = verdict(svc.build, host, driver)
        if fault is not None:
            return fail(fault.status, fault.summary, fault.explanation, fault.commands, **fault.evidence)
    if svc.build_problem:
        return fail(
            Status.WARN,
            f"its Dockerfile was not read ({svc.build_problem})",
            f"The service's `build:` names a Dockerfile that could not be read, so the image it builds was not "
            f"judged for the GPU ({svc.build_problem}). `docker compose build {svc.name}` stops on the same file.",
        )
    if svc.extends:
        return fail(
            Status.WARN,
            f"it extends {svc.extends}, which was not judged",
            f"The service inherits from `extends: {svc.extends}`; gpudoctor does not follow `extends:`, so what it "
            f"inherits (image, `deploy.resources`, `environment`) was not judged for the GPU. See the merged "
            f"service, as Compose will run it, and judge that:\n\n```\ndocker compose -f {file} config > merged.yml\n"
            f"gpudoctor check --offline --compose merged.yml\n```",
        )
    return None


def evaluate(facts: Facts) -> list[Finding]:
    compose = require(facts, ComposeFacts)
    faults = [f for svc in compose.services if (f := _fault(svc, compose.file, facts)) is not None]
    if compose.includes:
        faults.append(
            CHECK.finding(
                Status.WARN,
                f"{compose.file}: its include: ({', '.join(compose.includes)}) was not judged",
                "The file's top-level `include:` brings in services from other Compose files; gpudoctor does not "
                "follow `include:`, so those services were not judged for the GPU. Judge the merged project:\n\n"
                f"```\ndocker compose -f {compose.file} config > merged.yml\ngpudoctor check --offline --compose "
                "merged.yml\n```",
                evidence={"file": compose.file, "includes": list(compose.includes)},
                doc_url=DOCS,
                commands=(
                    Command(f"docker compose -f {compose.file} config > merged.yml", "the project as Compose reads it"),
                    Command("gpudoctor check --offline --compose merged.yml", "judge every service of it"),
                ),
            )
        )
    if faults:
        return faults
    gpu = [s.name for s in compose.services if s.requests]
    return [
        CHECK.finding(
            Status.OK,
            f"{compose.file}: "
            + (f"GPU reserved for {', '.join(gpu)}" if gpu else "no service runs GPU code")
            + "; every service gets the GPU it needs",
            evidence={"file": compose.file, "services": [s.name for s in compose.services], "gpu_services": gpu},
        )
    ]


CHECK = Check(
    id="platform.compose-gpu",
    title="each Compose service that runs GPU code reserves a GPU the way Docker Compose reads it",
    needs=("compose", "container_host", "nvidia"),
    evaluate=evaluate,
)
