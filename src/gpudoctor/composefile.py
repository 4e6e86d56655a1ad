"""Reading a Compose file (``docker-compose.yml``, ``compose.yaml``; ``--compose FILE``).

One parser for the CLI (which refuses a bad file with one line before anything is collected)
and the ``compose`` collector (which reads it through the System's root). YAML is read with
PyYAML's safe loader (MIT), extended to refuse what ``docker compose`` itself refuses: a key
given twice in one mapping (compose-go reads with yaml.v3, which stops with "mapping key
... already defined"); PyYAML alone keeps the last value silently, and a GPU reservation
written under a second ``deploy:`` would be judged from the wrong one. Merge keys (``<<:
*anchor``) and their overrides are not duplicates.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpudoctor.inputs import InputError

__all__ = ["MAX_BYTES", "load", "service_lines"]

#: largest Compose file read (a large one is a few hundred lines)
MAX_BYTES = 4 * 1024 * 1024

_MERGE = "tag:yaml.org,2002:merge"

#: most values a document may expand to through aliases (yaml.v3, which ``docker compose``
#: reads with, stops at a similar size with "document contains excessive aliasing")
MAX_EXPANDED = 1_000_000


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing a key repeated in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode) and not getattr(node, "_checked", False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice (lines {seen[key]} and {line})", key_node.start_mark
                    )
                seen[key] = line
            node._checked = True  # type: ignore[attr-defined]  # merged copies are checked once
        return super().construct_mapping(node, deep=deep)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:  # the problem, not its context
        mark = exc.problem_mark
        return f"{exc.problem}" + (f" (line {mark.line + 1})" if mark is not None and "line" not in exc.problem else "")
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


def _walk(value: Any, on_path: set[int], seen: set[int], count: list[int]) -> None:
    """Count the values ``value`` expands to (``count[0]``; ``count[1]``: visits of a container
    already seen, i.e. reached through an alias); ValueError on a container that holds itself
    or when aliases expand the document past :data:`MAX_EXPANDED` values."""
    count[0] += 1
    if not isinstance(value, (dict, list)):
        return
    ident = id(value)
    if ident in on_path:
        raise ValueError("an anchor holds an alias to itself (a recursive document)")
    if ident in seen:
        count[1] += 1
    seen.add(ident)
    if count[1] and count[0] > MAX_EXPANDED:
        raise ValueError(f"its anchors and aliases expand to more than {MAX_EXPANDED:,} values (excessive aliasing)")
    on_path.add(ident)
    for item in value.values() if isinstance(value, dict) else value:
        _walk(item, on_path, seen, count)
    on_path.discard(ident)


def load(text: str, name: str) -> dict[str, Any]:
    """The Compose document in ``text``; :class:`InputError` (one line naming ``name``) when it is not
    YAML, repeats a key, is not a mapping, or has no ``services`` mapping."""
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise InputError(f"{name}: not valid YAML ({_first_line(exc)})") from None
    try:  # what interpolation and the checks walk: refused here rather than hanging or crashing there
        _walk(doc, set(), set(), [0, 0])
    except ValueError as exc:
        raise InputError(f"{name}: not a usable Compose file: {exc}") from None
    except RecursionError:
        raise InputError(f"{name}: not a usable Compose file: its aliases nest too deeply") from None
    if not isinstance(doc, dict):
        what = "an empty file" if doc is None else f"a {type(doc).__name__}"
        raise InputError(f"{name}: not a Compose file (a YAML mapping with `services:`), but {what}")
    services = doc.get("services")
    if not isinstance(services, dict) or not services:
        raise InputError(f"{name}: not a Compose file: no `services:` mapping")
    bad = [str(k) for k, v in services.items() if not isinstance(v, dict)]
    if bad:
        raise InputError(f"{name}: service {bad[0]!r} is not a mapping of settings")
    return doc


def service_lines(text: str) -> dict[str, int]:
    """Service name -> the line its definition starts on (1-based); {} when the file does not compose."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "services" and isinstance(value, yaml.MappingNode):
            return {str(k.value): k.start_mark.line + 1 for k, _ in value.value if isinstance(k, yaml.ScalarNode)}
    return {}
