"""Facts about the precision a training setup asks for: mixed-precision settings found in
configuration files and the environment (Accelerate, DeepSpeed, Lightning, the Transformers
Trainer and trainers that share its keys), for the ``amp.readiness`` check."""

from __future__ import annotations

from gpudoctor.facts.base import domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class PrecisionRequest:
    """One setting that asks for a precision.

    Attributes:
        precision: ``fp16``, ``bf16``, ``tf32`` or ``fp8``.
        tool: who reads the setting: ``accelerate``, ``deepspeed``, ``lightning``,
            ``transformers`` (TrainingArguments keys, also used by Axolotl-style YAML) or
            ``environment``.
        path: the file as seen inside the inspected root, or ``environment``.
        line: 1-based line of the setting, or 0 when not known.
        setting: the setting as written, e.g. ``mixed_precision: bf16``.
    """

    precision: str
    tool: str
    path: str
    line: int
    setting: str


@domain("precision")
@frozen_dataclass
class PrecisionFacts:
    """Precision requests found (``requests``), the files read, and files that could not be
    parsed (``problems``: ``path: reason``). ``tf32_override`` is ``NVIDIA_TF32_OVERRIDE`` as
    set in the environment, or "" (``0`` turns TF32 off in every CUDA library)."""

    requests: tuple[PrecisionRequest, ...] = ()
    read: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    tf32_override: str = ""
