"""Collector for the ``compose`` domain: the GPU needs and GPU requests of a Compose file (``--compose FILE``).

The file (a path inside ``--root``; on this machine, as given) is read with
:mod:`gpudoctor.composefile`. Per service: its GPU requests as the Compose
specification spells them (``deploy.resources.reservations.devices``, the
``gpus:`` key of Compose 2.30+, the legacy ``runtime: nvidia``), the
``NVIDIA_VISIBLE_DEVICES``/``CUDA_VISIBLE_DEVICES`` of its ``environment`` (over its ``env_file``),
its ``image:`` tag (CUDA from the tag; GPU images from ``platform.toml``'s
``[[gpu_image]]`` rows) and the Dockerfile of its ``build:`` (``context`` +
``dockerfile``, relative to the Compose file's directory, ``args`` applied),
read like ``--dockerfile``. Values are interpolated as Compose does
(``${VAR:-default}`` from the environment, then the ``.env`` file beside the
Compose file). Nothing is built or started.
"""

from __future__ import annotations

import posixpath
import re
from functools import cache
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.collect.gpu_image import read_image, tag_cuda
from gpudoctor.data import load_table
from gpudoctor.facts import Unavailable
from gpudoctor.facts.compose import ComposeFacts, ComposeService, GpuRequest
from gpudoctor.inputs import InputError


@cache
def _gpu_images() -> tuple[tuple[re.Pattern[str], re.Pattern[str] | None, str], ...]:
    rows = load_table("platform").get("gpu_image", [])
    return tuple((re.compile(r["repo"]), re.compile(r["tag"]) if r.get("tag") else None, r["need"]) for r in rows)


def split_image(ref: str) -> tuple[str, str]:
    """(repository, tag) of an image reference (``ollama/ollama:0.3.12`` -> ``ollama/ollama``, ``0.3.12``)."""
    ref = ref.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :]
    return ref, "latest"


def image_need(ref: str) -> str:
    """``required``/``optional`` when the image runs GPU code (``[[gpu_image]]`` rows), else ""."""
    repo, tag = split_image(ref)
    for repo_re, tag_re, need in _gpu_images():
        if repo_re.search(repo) and (tag_re is None or tag_re.search(tag)):
            return need
    return ""


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return (str(value),) if value not in (None, "") else ()


def _environment(value: Any) -> dict[str, str | None]:
    """``environment:`` as a mapping (list form ``KEY=value`` / ``KEY``, or a mapping)."""
    if isinstance(value, dict):
        return {str(k): (None if v is None else str(v)) for k, v in value.items()}
    out: dict[str, str | None] = {}
    for item in value if isinstance(value, list) else ():
        key, eq, val = str(item).partition("=")
        out[key.strip()] = val if eq else None
    return out


def _request(via: str, where: str, dev: dict[str, Any], driver: str, caps: tuple[str, ...] | None) -> GpuRequest:
    """One device mapping (``count``, ``device_ids``, ``driver``; ``capabilities`` unless ``caps`` is given)."""
    return GpuRequest(
        via,
        where,
        str(dev.get("driver") or driver),
        "" if dev.get("count") is None else str(dev.get("count")),
        _strings(dev.get("device_ids")),
        caps if caps is not None else tuple(c for cs in _strings(dev.get("capabilities")) for c in cs.split(",") if c),
    )


def _requests(svc: dict[str, Any]) -> list[GpuRequest]:
    deploy = svc.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    devices = reservations.get("devices") if isinstance(reservations, dict) else None
    found = [
        _request("devices", f"deploy.resources.reservations.devices[{i}]", dev, "", None)
        for i, dev in enumerate(devices if isinstance(devices, list) else ())
        if isinstance(dev, dict)
    ]
    gpus = svc.get("gpus")
    if gpus is not None:  # `gpus: all` or a list of device mappings (Compose 2.30+)
        for i, dev in enumerate(gpus if isinstance(gpus, list) else [gpus]):
            if isinstance(dev, dict):
                found.append(_request("gpus", f"gpus[{i}]", dev, "nvidia", ("gpu",)))
            else:
                found.append(GpuRequest("gpus", "gpus", "nvidia", str(dev), (), ("gpu",)))
    if str(svc.get("runtime") or "") == "nvidia":
        found.append(GpuRequest("runtime", "runtime: nvidia", "nvidia"))
    return found


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


_INLINE_COMMENT = re.compile(r"\s#")


def _dotenv_value(value: str) -> str:
    """A value as Compose's env-file syntax reads it: a quoted one up to its closing quote (what
    follows, an inline comment, is dropped; an escaped quote is the quote), an unquoted one up to
    an inline comment (``#`` after a space: ``VAL# x`` keeps it)."""
    value = value.strip()
    if value[:1] in ("'", '"'):
        quote, i = value[0], 1
        while i < len(value):
            if value[i] == "\\":
                i += 2
                continue
            if value[i] == quote:
                return value[1:i].replace("\\" + quote, quote)
            i += 1
        return value  # no closing quote: as written
    comment = _INLINE_COMMENT.search(value)
    return value[: comment.start()].rstrip() if comment else value


def _dotenv(text: str, raw: bool = False) -> dict[str, str]:
    """``KEY=value`` lines of a Compose ``.env`` or ``env_file`` (comments, inline comments,
    ``export`` and quotes handled, as in Compose's env-file syntax; an ``env_file`` with
    ``format: raw`` keeps each value as written)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if raw:
            key, _, value = line.partition("=")
            out[key.strip()] = value
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        out[key.strip()] = _dotenv_value(value)
    return out


def _env_file(ctx: CollectContext, base_dir: str, spec: Any) -> dict[str, str | None]:
    """The variables of a service's ``env_file:`` (a path, or a list of paths or ``{path,
    required, format}`` mappings; relative to the Compose file), later files winning, as Compose
    reads them before ``environment:``. A file that cannot be read adds nothing (Compose itself
    stops on a missing required one)."""
    out: dict[str, str | None] = {}
    for item in spec if isinstance(spec, list) else [spec]:
        path = item if isinstance(item, str) else str(item.get("path") or "") if isinstance(item, dict) else ""
        if not path:
            continue
        raw = isinstance(item, dict) and str(item.get("format") or "") == "raw"
        try:
            out.update(_dotenv(_read(ctx, posixpath.normpath(posixpath.join(base_dir, path))), raw))
        except (InputError, OSError, UnicodeDecodeError):
            continue
    return out


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """``value`` with Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:+alt}``,
    ``$VAR`` and ``$$`` applied to every string in it (``${VAR:?err}`` unset: left as written)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str) or "$" not in value:
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2) or "", m.group(3) or ""
        val = env.get(name)
        if op in (":-", "-"):
            return arg if val is None or (op == ":-" and val == "") else val
        if op in (":+", "+"):
            return arg if val is not None and (op == "+" or val != "") else ""
        if op in (":?", "?") and (val is None or (op == ":?" and val == "")):
            return m.group(0)
        return val or ""

    return _VAR.sub(sub, value)


def _read(ctx: CollectContext, path: str) -> str:
    from gpudoctor.composefile import MAX_BYTES

    files = ctx.system.files
    if not files.is_file(path):
        raise InputError(f"{path}: no such file")
    data = files.read_bytes(path, limit=MAX_BYTES)  # a huge file is refused, not read whole
    if len(data) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES} bytes, not read")
    return data.decode("utf-8", errors="replace")


def _service(ctx: CollectContext, base_dir: str, name: str, svc: dict[str, Any], line: int) -> ComposeService:
    image = str(svc.get("image") or "")
    signs: list[str] = []
    need = image_need(image) if image else ""
    if need:
        signs.append(f"image {image}" + (" (runs on the CPU without a GPU, slowly)" if need == "optional" else ""))
    cuda = tag_cuda(image)[0] if image else None
    build = None
    problem = ""
    spec = svc.get("build")
    if spec is not None:
        context = spec if isinstance(spec, str) else str((spec or {}).get("context") or ".")
        dockerfile = "Dockerfile" if isinstance(spec, str) else str((spec or {}).get("dockerfile") or "Dockerfile")
        args = {} if isinstance(spec, str) else _environment((spec or {}).get("args") or {})
        if "://" in context or context.startswith("git@"):
            problem = f"build context {context} is remote; not read"
        else:
            path = posixpath.normpath(posixpath.join(base_dir, context, dockerfile))
            try:
                build = read_image(
                    posixpath.relpath(path, base_dir),
                    _read(ctx, path),
                    {k: v for k, v in args.items() if v is not None},
                )
            except (InputError, OSError, UnicodeDecodeError, ValueError) as exc:
                problem = str(exc)
        if build is not None:
            if build.base_cuda:
                signs.append(f"Dockerfile FROM {build.base} (CUDA {build.base_cuda})")
            elif build.base and image_need(build.base) == "required":
                signs.append(f"Dockerfile FROM {build.base}")
            if build.wheel_cuda:
                signs.append(f"Dockerfile installs a CUDA {build.wheel_cuda} torch ({build.wheel_origin})")
    env = {**_env_file(ctx, base_dir, svc.get("env_file")), **_environment(svc.get("environment"))}
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd and nvd.strip().lower() not in ("void", "none", ""):
        signs.append(f"environment NVIDIA_VISIBLE_DEVICES={nvd}")
    return ComposeService(
        name=name,
        line=line,
        image=image,
        image_cuda=cuda or "",
        gpu_signs=tuple(signs),
        requests=tuple(_requests(svc)),
        nvidia_visible_devices=nvd if "NVIDIA_VISIBLE_DEVICES" in env else None,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES") if "CUDA_VISIBLE_DEVICES" in env else None,
        build=build,
        build_problem=problem,
        extends=_extends(svc.get("extends")),
    )


def _extends(spec: Any) -> str:
    """``extends:`` in words: ``FILE service`` or ``service`` ("" when absent)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict):
        return " ".join(str(spec[k]) for k in ("file", "service") if spec.get(k))
    return ""


def _includes(spec: Any) -> tuple[str, ...]:
    """The files a top-level ``include:`` names (short form: a path; long form: ``path:``)."""
    out: list[str] = []
    for item in spec if isinstance(spec, list) else []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            path = item.get("path")
            out.extend(str(p) for p in (path if isinstance(path, list) else [path]) if p)
    return tuple(out)


def collect_compose(ctx: CollectContext) -> ComposeFacts | Unavailable:
    path = ctx.options.extra.get("compose")
    if not path:
        return Unavailable("no Compose file given (--compose FILE)")
    # the parser (PyYAML) only when a file is given: every `check` runs this collector
    from gpudoctor.composefile import load, service_lines

    path = str(path)
    try:
        text = _read(ctx, path)
        doc = load(text, path)
    except (InputError, OSError, UnicodeDecodeError) as exc:
        return Unavailable(str(exc))
    lines = service_lines(text)
    base_dir = posixpath.dirname(path) or "."
    # Compose interpolates from the shell's environment, then the project's .env file
    try:  # a .env over the size limit (or a directory, a FIFO) adds nothing, as an unreadable env_file
        dotenv = _dotenv(_read(ctx, posixpath.join(base_dir, ".env")))
    except (InputError, OSError):
        dotenv = {}
    env = {**dotenv, **ctx.system.env}
    services = tuple(
        _service(ctx, base_dir, str(name), interpolate(svc, env), lines.get(str(name), 0))
        for name, svc in doc["services"].items()
    )
    return ComposeFacts(file=path, services=services, includes=_includes(doc.get("include")))


COLLECTOR = Collector(domain="compose", collect=collect_compose, timeout_s=10.0)
