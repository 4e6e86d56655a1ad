"""``gpudoctor.audit``: find the module that mixes devices ("Expected all tensors to be on the same device").

This runs in the *user's* process (a training script, a notebook), on the
user's model, so unlike the rest of gpudoctor it works with torch directly;
torch is imported lazily, only when :func:`audit` is called.

How it works: one forward pass under ``torch.no_grad()`` with the model in
eval mode (restored afterwards, so BatchNorm statistics and dropout state are
not touched), with a forward pre-hook on every module. Each hook compares the
devices of the tensors the module is about to use: the inputs it receives and
its *own* parameters, buffers and plain tensor attributes (tensors kept as
``self.x = torch.ones(...)`` instead of ``register_buffer``, which
``model.to(device)`` does not move). Pre-hooks fire in execution order, parent
before child, so the first module reported is where the mix first happens.
An exception raised by the forward (the mix itself usually raises one) is
caught and kept in the report. 0-dimensional CPU tensors are allowed next to
tensors of any device, as PyTorch allows them ("CPU scalars").

Example::

    report = gpudoctor.audit(model, batch["input_ids"].cuda(), attention_mask=mask)
    if report.first_mismatch:
        print(report.first_mismatch.module)   # e.g. "encoder.layers.3.attn"
    rich.print(report)                        # where every parameter and buffer lives
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from gpudoctor.records import frozen_dataclass
from gpudoctor.words import plural

__all__ = ["AuditReport", "Mismatch", "TensorInfo", "audit"]

#: Names listed per device group when rendering; the rest are counted.
MAX_NAMES_PER_GROUP = 12


@frozen_dataclass
class TensorInfo:
    """One tensor the audit looked at.

    Attributes:
        name: qualified name: ``encoder.fc.weight`` (parameter/buffer/attribute),
            ``input[0]`` / ``input['mask']`` for a module's inputs.
        kind: ``parameter``, ``buffer``, ``attribute`` (a plain tensor attribute) or ``input``.
        shape: the tensor's shape.
        device: ``cpu``, ``cuda:0``, ``meta``, ...
        dtype: e.g. ``torch.float32``.
    """

    name: str
    kind: str
    shape: tuple[int, ...]
    device: str
    dtype: str = ""


@frozen_dataclass
class Mismatch:
    """The first module whose tensors sit on more than one device.

    Attributes:
        module: its qualified name from ``model.named_modules()`` ("" for the model itself).
        module_type: its class name, e.g. ``Linear``.
        devices: the devices found, sorted.
        tensors: every tensor the module was about to use (inputs, its own
            parameters, buffers and plain attributes), with name, shape and device.
        offending: the tensors on the minority device(s): the ones to move.
    """

    module: str
    module_type: str
    devices: tuple[str, ...]
    tensors: tuple[TensorInfo, ...]
    offending: tuple[TensorInfo, ...]


@frozen_dataclass
class AuditReport:
    """The outcome of :func:`audit`.

    Attributes:
        first_mismatch: None for a model whose tensors all agree, else the first mixing module.
        placements: every parameter, buffer and plain tensor attribute of the model, with its device.
        error: the exception the forward raised, as ``Type: message``, or None.
        model_type: the model's class name.
    """

    first_mismatch: Mismatch | None
    placements: tuple[TensorInfo, ...]
    error: str | None = None
    model_type: str = ""

    @property
    def ok(self) -> bool:
        """No mismatch and the forward ran."""
        return self.first_mismatch is None and self.error is None

    def by_device(self) -> OrderedDict[str, list[TensorInfo]]:
        """Placements grouped by device (devices sorted by name)."""
        groups: dict[str, list[TensorInfo]] = {}
        for t in self.placements:
            groups.setdefault(t.device, []).append(t)
        return OrderedDict(sorted(groups.items()))

    def summary(self) -> str:
        """One line: the verdict."""
        m = self.first_mismatch
        if m is not None:
            moved = ", ".join(f"{t.name} ({t.device})" for t in m.offending[:4])
            return f"module {_show(m.module)} ({m.module_type}) mixes devices {' and '.join(m.devices)}: {moved}"
        if self.error:
            return f"no device mix found, but the forward raised {self.error}"
        devices = list(self.by_device())
        return f"all tensors on {' and '.join(devices) if devices else 'no device'}: no device mix"

    def _advice(self) -> str:
        m = self.first_mismatch
        if m is None:
            return ""
        rest = [t.device for t in m.tensors if t not in m.offending and _counts(t)]
        target = rest[0] if rest else _majority(m.tensors)
        attrs = [t for t in m.offending if t.kind == "attribute"]
        lines = [f"Move the offending tensors to {target}."]
        if attrs:
            lines.append(
                "Plain tensor attributes are not moved by model.to(): register them with "
                "self.register_buffer(name, tensor) (persistent=False to keep them out of the state dict)."
            )
        if any(t.kind in ("parameter", "buffer") for t in m.offending):
            lines.append(
                f"model.to({target!r}) moves every parameter and registered buffer; a tensor created "
                f"later in __init__ or in a hook must be created on that device too."
            )
        if any(t.kind == "input" for t in m.offending):
            lines.append(f"Inputs must be on the model's device: x = x.to({target!r}).")
        return " ".join(lines)

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        parts: list[Any] = []
        style = "bold green" if self.ok else "bold red"
        parts.append(Text(f"gpudoctor.audit({self.model_type}): {self.summary()}", style=style))
        m = self.first_mismatch
        if m is not None:
            table = Table(title=f"tensors used by {_show(m.module)} ({m.module_type})", title_justify="left")
            for col in ("name", "kind", "shape", "device", ""):
                table.add_column(col)
            for t in m.tensors:
                table.add_row(t.name, t.kind, _shape(t.shape), t.device, "← move" if t in m.offending else "")
            parts.append(table)
            parts.append(Text(self._advice()))
        if self.error:
            parts.append(Text(f"forward raised: {self.error}", style="yellow"))
        where = Table(title="where parameters and buffers live", title_justify="left")
        for col in ("device", "parameters", "buffers", "attributes", "MiB", "names"):
            where.add_column(col)
        for device, items in self.by_device().items():
            where.add_row(
                device,
                *(str(sum(1 for t in items if t.kind == k)) for k in ("parameter", "buffer", "attribute")),
                f"{_mib(items):.1f}",
                _names(items),
            )
        parts.append(where)
        return Group(*parts)

    def __str__(self) -> str:
        lines = [f"gpudoctor.audit({self.model_type}): {self.summary()}"]
        m = self.first_mismatch
        if m is not None:
            lines.append(f"tensors used by {_show(m.module)} ({m.module_type}):")
            for t in m.tensors:
                mark = "   <- move" if t in m.offending else ""
                lines.append(f"  {t.name:40} {t.kind:9} {_shape(t.shape):>16} {t.device}{mark}")
            lines.append(self._advice())
        if self.error:
            lines.append(f"forward raised: {self.error}")
        lines.append("where parameters and buffers live:")
        for device, items in self.by_device().items():
            lines.append(f"  {device}: {plural(len(items), 'tensor')}, {_mib(items):.1f} MiB: {_names(items)}")
        return "\n".join(lines)


def _show(module: str) -> str:
    return repr(module) if module else "<model>"


def _shape(shape: tuple[int, ...]) -> str:
    return str(tuple(shape))


def _mib(items: list[TensorInfo]) -> float:
    sizes = {
        "torch.float64": 8,
        "torch.int64": 8,
        "torch.complex64": 8,
        "torch.float16": 2,
        "torch.bfloat16": 2,
        "torch.int16": 2,
        "torch.int8": 1,
        "torch.uint8": 1,
        "torch.bool": 1,
    }
    total = 0
    for t in items:
        n = 1
        for s in t.shape:
            n *= s
        total += n * sizes.get(t.dtype, 4)
    return total / (1024 * 1024)


def _names(items: list[TensorInfo]) -> str:
    """Names grouped by top-level submodule: ``scale, embed.* (2), blocks.* (8)``."""
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for t in items:
        top = t.name.split(".", 1)[0]
        groups.setdefault(top, []).append(t.name)
    shown = [names[0] if len(names) == 1 else f"{top}.* ({len(names)})" for top, names in groups.items()]
    more = len(shown) - MAX_NAMES_PER_GROUP
    return ", ".join(shown[:MAX_NAMES_PER_GROUP]) + (f" … and {more} more" if more > 0 else "")


def _majority(tensors: tuple[TensorInfo, ...]) -> str:
    counts: dict[str, int] = {}
    for t in tensors:
        if t.kind != "input":  # the module's own tensors decide where it lives
            counts[t.device] = counts.get(t.device, 0) + 1
    if not counts:
        for t in tensors:
            counts[t.device] = counts.get(t.device, 0) + 1
    return max(sorted(counts), key=lambda d: counts[d])


def _info(torch: Any, name: str, kind: str, t: Any) -> TensorInfo:
    return TensorInfo(name, kind, tuple(int(s) for s in t.shape), str(t.device), str(t.dtype))


def _own_tensors(torch: Any, prefix: str, module: Any) -> Iterator[TensorInfo]:
    """A module's direct parameters, buffers and plain tensor attributes (not its children's)."""
    dot = f"{prefix}." if prefix else ""
    for name, p in module.named_parameters(recurse=False):
        yield _info(torch, dot + name, "parameter", p)
    for name, b in module.named_buffers(recurse=False):
        if b is not None:
            yield _info(torch, dot + name, "buffer", b)
    registered = set(module._parameters) | set(module._buffers)
    for name, value in vars(module).items():
        if name not in registered and isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            yield _info(torch, dot + name, "attribute", value)


def _flatten(torch: Any, value: Any, name: str, depth: int = 0) -> Iterator[TensorInfo]:
    """Tensors in an input value (nested lists, tuples, dicts), named by their path."""
    if isinstance(value, torch.Tensor):
        yield _info(torch, name, "input", value)
    elif depth < 6 and isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _flatten(torch, v, f"{name}[{i}]", depth + 1)
    elif depth < 6 and isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(torch, v, f"{name}[{k!r}]", depth + 1)


def _counts(t: TensorInfo) -> bool:
    """Whether ``t`` takes part in the device comparison (0-dim CPU tensors mix with any device)."""
    return not (t.device == "cpu" and t.shape == ())


def _home_device(placements: tuple[TensorInfo, ...]) -> str | None:
    """Where most of the model lives: the device holding the most parameter and buffer elements."""
    elements: dict[str, int] = {}
    for t in placements:
        if t.kind in ("parameter", "buffer"):
            n = 1
            for s in t.shape:
                n *= s
            elements[t.device] = elements.get(t.device, 0) + n
    return max(sorted(elements), key=lambda d: elements[d]) if elements else None


def _mismatch(module: str, module_type: str, tensors: list[TensorInfo], home: str | None = None) -> Mismatch | None:
    """A Mismatch when ``tensors`` span devices; the offenders are those off the model's
    ``home`` device (or off the module's own majority when home is not among them)."""
    considered = [t for t in tensors if _counts(t)]
    devices = sorted({t.device for t in considered})
    if len(devices) < 2:
        return None
    majority = home if home in devices else _majority(tuple(considered))
    offending = tuple(t for t in considered if t.device != majority)
    return Mismatch(module, module_type, tuple(devices), tuple(tensors), offending)


def audit(model: Any, *example_inputs: Any, **example_kwargs: Any) -> AuditReport:
    """Run ``model(*example_inputs, **example_kwargs)`` once and report where devices mix.

    Args:
        model: a ``torch.nn.Module``.
        example_inputs, example_kwargs: what the model's forward receives (a real batch).

    Returns:
        An :class:`AuditReport`: ``first_mismatch`` is None for a model whose
        inputs, parameters, buffers and plain tensor attributes agree in every
        module the forward reaches; otherwise the first mixing module in
        execution order (modules the forward never reaches are checked after it,
        in ``named_modules()`` order). An exception raised by the forward is
        kept in ``error``, never re-raised.

    Raises:
        TypeError: ``model`` is not a ``torch.nn.Module``.
        ImportError: torch is not installed.
    """
    import torch  # lazily: gpudoctor itself never imports torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"gpudoctor.audit needs a torch.nn.Module, got {type(model).__name__}")
    modules = list(model.named_modules())
    placements = tuple(t for name, mod in modules for t in _own_tensors(torch, name, mod))
    home = _home_device(placements)
    found: list[Mismatch] = []
    reached: set = set()
    handles = []

    def make_hook(name: str):
        def hook(mod: Any, args: Any, kwargs: Any) -> None:
            reached.add(name)
            if found:
                return
            tensors = list(_flatten(torch, list(args), "input"))
            for k, v in (kwargs or {}).items():
                tensors.extend(_flatten(torch, v, f"input[{k!r}]"))
            tensors.extend(_own_tensors(torch, name, mod))
            m = _mismatch(name, type(mod).__name__, tensors, home)
            if m is not None:
                found.append(m)

        return hook

    training = {name: mod.training for name, mod in modules}
    error: str | None = None
    try:
        for name, mod in modules:
            handles.append(mod.register_forward_pre_hook(make_hook(name), with_kwargs=True))
        model.eval()
        with torch.no_grad():
            model(*example_inputs, **example_kwargs)
    except Exception as exc:  # the device mix itself, or any other fault of the forward: kept in the report
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}".rstrip(": ")
    finally:
        for h in handles:
            h.remove()
        for name, mod in modules:
            mod.training = training[name]
    if not found:  # modules the forward did not reach (it raised first, or they are unused)
        for name, mod in modules:
            if name not in reached:
                m = _mismatch(name, type(mod).__name__, list(_own_tensors(torch, name, mod)), home)
                if m is not None:
                    found.append(m)
                    break
    return AuditReport(found[0] if found else None, placements, error, type(model).__name__)
