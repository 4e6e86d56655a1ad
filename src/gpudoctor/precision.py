"""What a GPU computes natively and fast, and which precision to train in on it.

The table is ``data/precision.toml`` (a source per row): flags by compute capability,
overridden for boards whose capability promises Tensor Cores they lack (GTX 16xx, MX450,
T400-T2000 report 7.5 like a T4), and datasheet peak TFLOP/s for ``--deep`` to compare a
measured matmul with. Pure functions, no I/O beyond reading the shipped table.
"""

from __future__ import annotations

import functools
import re
from dataclasses import field
from typing import Any

from gpudoctor.data import load_table
from gpudoctor.records import frozen_dataclass

__all__ = ["Capabilities", "TOOL_SETTINGS", "capabilities", "datasheet", "recommend"]

PRECISIONS = ("fp16", "bf16", "tf32", "fp8")


@frozen_dataclass
class Capabilities:
    """Native, fast precisions of one GPU model (see data/precision.toml for each flag)."""

    name: str
    cc: str
    arch: str
    fp16_tc: bool = False
    fp16_fast: bool = False
    bf16: bool = False
    tf32: bool = False
    fp8: bool = False
    fp4: bool = False
    int8_tc: bool = False
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())

    def supports(self, precision: str) -> bool:
        """``fp16`` counts as supported when it is fast (Tensor Cores or a full-rate fp16 path)."""
        return {
            "fp16": self.fp16_tc or self.fp16_fast,
            "bf16": self.bf16,
            "tf32": self.tf32,
            "fp8": self.fp8,
        }.get(precision, True)


#: The minimum architecture each precision needs, for the explanation.
NEEDS = {
    "bf16": "Ampere (compute capability 8.0) or newer",
    "tf32": "Ampere (compute capability 8.0) or newer",
    "fp8": "Ada Lovelace (8.9) or Hopper (9.0) or newer",
    "fp16": "Volta (7.0) or newer with Tensor Cores",
}

#: How to ask for each precision, per tool: the setting a user changes.
TOOL_SETTINGS: dict[str, dict[str, str]] = {
    "accelerate": {
        "fp16": "mixed_precision: fp16",
        "bf16": "mixed_precision: bf16",
        "fp8": "mixed_precision: fp8",
        "fp32": "mixed_precision: 'no'",
    },
    "environment": {
        "fp16": "ACCELERATE_MIXED_PRECISION=fp16",
        "bf16": "ACCELERATE_MIXED_PRECISION=bf16",
        "fp8": "ACCELERATE_MIXED_PRECISION=fp8",
        "fp32": "ACCELERATE_MIXED_PRECISION=no",
    },
    "deepspeed": {
        "fp16": '"fp16": {"enabled": true} and "bf16": {"enabled": false}',
        "bf16": '"bf16": {"enabled": true} and "fp16": {"enabled": false}',
        "fp32": '"fp16": {"enabled": false} and "bf16": {"enabled": false}',
    },
    "lightning": {
        "fp16": "precision: 16-mixed",
        "bf16": "precision: bf16-mixed",
        "fp8": "precision: transformer-engine",
        "fp32": "precision: 32-true",
    },
    "transformers": {
        "fp16": "fp16: true (--fp16) and bf16: false",
        "bf16": "bf16: true (--bf16) and fp16: false",
        "tf32": "tf32: true (--tf32)",
        "fp32": "fp16: false and bf16: false (no --fp16/--bf16)",
    },
}

#: The code for plain PyTorch, per precision.
TORCH_CODE = {
    "bf16": 'with torch.autocast("cuda", dtype=torch.bfloat16): ...  (no GradScaler needed)',
    "fp16": 'with torch.autocast("cuda", dtype=torch.float16): ...  with torch.amp.GradScaler("cuda")',
    "tf32": 'torch.backends.cuda.matmul.allow_tf32 = True  (or torch.set_float32_matmul_precision("high"))',
    "fp8": "Transformer Engine (te.fp8_autocast) or torchao's float8 training, on a CUDA >= 12.1 build",
    "fp32": "no autocast (plain float32)",
}


def _cc_key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


@functools.cache
def _table() -> dict[str, Any]:
    return load_table("precision")


def capabilities(name: str, cc: str) -> Capabilities | None:
    """The capabilities of a GPU called ``name`` with compute capability ``cc`` (``8.6``),
    or None for a capability the table does not know (older than Maxwell, or newer than it)."""
    try:
        key = _cc_key(cc)
    except ValueError:
        return None
    rows = [r for r in _table()["arch"] if _cc_key(r["cc"]) == key]
    if not rows:
        return None
    row = dict(rows[0])
    notes = [row["notes"]] if row.get("notes") else []
    sources = [row["source"]]
    for model in _table().get("model", []):
        if model["cc"] == row["cc"] and re.search(model["pattern"], name, re.IGNORECASE):
            row.update({k: v for k, v in model.items() if k in ("fp16_tc", "int8_tc", "fp16_fast", "bf16", "tf32")})
            notes.append(model["notes"])
            sources.append(model["source"])
    flags = {k: bool(row[k]) for k in ("fp16_tc", "fp16_fast", "bf16", "tf32", "fp8", "fp4", "int8_tc")}
    return Capabilities(name, row["cc"], row["arch"], notes=tuple(notes), sources=tuple(sources), **flags)


def datasheet(name: str) -> dict[str, float]:
    """Dense peak TFLOP/s by precision (``fp32``, ``tf32``, ``fp16``, ``bf16``) of the board
    called ``name`` with the datasheet it comes from under ``source``; {} when not listed."""
    for row in _table().get("datasheet", []):
        if re.search(row["pattern"], name, re.IGNORECASE):
            return {k: v for k, v in row.items() if k != "pattern"}
    return {}


def recommend(caps: Capabilities) -> tuple[str, tuple[str, ...]]:
    """(the precision to train in, the precisions to avoid) on ``caps``."""
    if caps.bf16:
        return "bf16", ()
    if caps.fp16_tc:
        return "fp16", ("bf16", "tf32")
    if caps.fp16_fast:
        return "fp32", ("bf16", "tf32")  # fp16 is fast but without Tensor Cores AMP gains little
    return "fp32", ("fp16", "bf16", "tf32")
