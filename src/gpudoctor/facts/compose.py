"""Facts of the ``compose`` domain: what a Compose file (``--compose FILE``) asks for the GPU."""

from __future__ import annotations

from gpudoctor.facts.base import domain
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class GpuRequest:
    """One way a service asks Docker for GPUs.

    Attributes:
        via: ``devices`` (``deploy.resources.reservations.devices[N]``), ``gpus`` (the service's
            ``gpus:`` key, Compose 2.30+), ``runtime`` (legacy ``runtime: nvidia``).
        where: the setting as written, e.g. ``deploy.resources.reservations.devices[0]``.
        driver: ``driver:`` ("" when not set).
        count: ``count:`` as written (``all``, ``1``; "" when not set).
        device_ids: ``device_ids:``.
        capabilities: ``capabilities:`` (Docker needs ``gpu`` among them to pick the NVIDIA driver).
    """

    via: str
    where: str
    driver: str = ""
    count: str = ""
    device_ids: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()


@frozen_dataclass
class ComposeService:
    """One service of the Compose file.

    Attributes:
        name: the service name.
        line: the line its definition starts on.
        image: ``image:`` ("" when it is only built).
        image_cuda: the CUDA ``X.Y`` the image tag names (``nvidia/cuda:12.4.1-...``,
            ``pytorch/pytorch:...-cuda12.1-...``, ``vllm/vllm-openai`` has none), "".
        gpu_signs: why the service runs GPU code (``image ollama/ollama``, ``Dockerfile FROM
            nvidia/cuda:...``, ``environment NVIDIA_VISIBLE_DEVICES=all``); empty: no sign.
        requests: its GPU requests, in file order.
        nvidia_visible_devices: ``NVIDIA_VISIBLE_DEVICES`` from ``environment`` or, below it, the
            ``env_file`` files (None: not set).
        cuda_visible_devices: ``CUDA_VISIBLE_DEVICES``, the same way (None: not set).
        build: the service's Dockerfile, read like ``--dockerfile`` (None: no ``build:``, or not read).
        build_problem: why the Dockerfile named by ``build:`` could not be read ("" when it was).
        extends: the ``extends:`` it inherits from (``FILE service`` or ``service``), not followed
            by gpudoctor: what it inherits was not judged ("" when none).
    """

    name: str
    line: int = 0
    image: str = ""
    image_cuda: str = ""
    gpu_signs: tuple[str, ...] = ()
    requests: tuple[GpuRequest, ...] = ()
    nvidia_visible_devices: str | None = None
    cuda_visible_devices: str | None = None
    build: GpuImageFacts | None = None
    build_problem: str = ""
    extends: str = ""


@domain("compose")
@frozen_dataclass
class ComposeFacts:
    """A Compose file's services, as their GPU needs and requests are written (nothing is started).

    Attributes:
        file: the Compose file's path.
        services: every service, in file order.
        includes: the files its top-level ``include:`` names, not followed by gpudoctor (their
            services were not judged).
    """

    file: str
    services: tuple[ComposeService, ...] = ()
    includes: tuple[str, ...] = ()
