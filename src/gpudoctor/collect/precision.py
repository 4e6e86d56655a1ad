"""Collector for the ``precision`` domain: which precision the training setup asks for.

Reads, through the System (so ``--root`` inspects an image):
- Accelerate's default config, ``$HF_HOME/accelerate/default_config.yaml`` (``HF_HOME``
  defaults to ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``; Accelerate
  docs, "accelerate config"), or ``$ACCELERATE_CONFIG_FILE`` when set;
- ``ACCELERATE_MIXED_PRECISION`` and ``NVIDIA_TF32_OVERRIDE`` in the environment;
- every file given with ``gpudoctor check --train-config FILE``: DeepSpeed JSON
  (``bf16.enabled``, ``fp16.enabled``), Lightning YAML (``trainer.precision``), Accelerate YAML
  (``mixed_precision``), Transformers/Axolotl-style keys (``bf16``, ``fp16``, ``tf32``).
Each setting is recorded with its file and line. Nothing is written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts.precision import PrecisionFacts, PrecisionRequest

#: Largest configuration file read, bytes.
MAX_BYTES = 1024 * 1024

#: Lightning/Accelerate/Trainer spellings -> precision (None: full precision or "decide for me").
_PRECISION_WORDS = {
    "bf16": "bf16",
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "16": "fp16",
    "16-mixed": "fp16",
    "16-true": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "fp8": "fp8",
    "transformer-engine": "fp8",
    "transformer-engine-float16": "fp8",
}


def precision_word(value: Any) -> str | None:
    """``bf16-mixed`` -> ``bf16``, ``16`` -> ``fp16``, ``no``/``32``/``auto`` -> None."""
    if isinstance(value, bool) or value is None:
        return None
    return _PRECISION_WORDS.get(str(value).strip().strip("'\"").lower())


def _enabled(value: Any) -> bool:
    """``true``, or a section ``{"enabled": true}`` (DeepSpeed); ``"auto"`` is not a request."""
    if isinstance(value, dict):
        value = value.get("enabled")
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _line_of(text: str, key: str) -> int:
    pattern = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*[:=]", re.MULTILINE)
    m = pattern.search(text)
    if m is None:  # JSON written on one line, or the key after other keys on its line
        m = re.search(r"[\"']" + re.escape(key) + r"[\"']\s*:", text)
    return text.count("\n", 0, m.start()) + 1 if m else 0


def requests_in(doc: Any, text: str, path: str) -> Iterator[PrecisionRequest]:
    """The precision requests of one parsed configuration document."""
    if not isinstance(doc, dict):
        return
    deepspeed = any(k in doc for k in ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"))
    mp = doc.get("mixed_precision")
    if precision_word(mp):
        yield PrecisionRequest(
            precision_word(mp) or "", "accelerate", path, _line_of(text, "mixed_precision"), f"mixed_precision: {mp}"
        )
    trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else None
    for section, tool in ((trainer, "lightning"), (doc, "lightning")):
        if section is not None and "precision" in section and precision_word(section["precision"]):
            value = section["precision"]
            word = precision_word(value) or ""
            yield PrecisionRequest(word, tool, path, _line_of(text, "precision"), f"precision: {value}")
            break
    for key in ("bf16", "fp16", "tf32", "fp8"):
        if key in doc and _enabled(doc[key]):
            tool = "deepspeed" if deepspeed or isinstance(doc[key], dict) else "transformers"
            setting = f'"{key}": {{"enabled": true}}' if isinstance(doc[key], dict) else f"{key}: true"
            yield PrecisionRequest(key, tool, path, _line_of(text, key), setting)


def _parse(text: str, path: str) -> Any:
    if path.endswith(".json") or text.lstrip().startswith("{"):
        return json.loads(text)
    import yaml

    return yaml.safe_load(text)


def _accelerate_default(ctx: CollectContext) -> str:
    env = ctx.system.env
    if env.get("ACCELERATE_CONFIG_FILE"):
        return env["ACCELERATE_CONFIG_FILE"]
    hf_home = env.get("HF_HOME") or (
        f"{env['XDG_CACHE_HOME']}/huggingface" if env.get("XDG_CACHE_HOME") else f"{ctx.system.home}/.cache/huggingface"
    )
    return f"{hf_home}/accelerate/default_config.yaml"


def collect_precision(ctx: CollectContext) -> PrecisionFacts:
    files = ctx.system.files
    env = ctx.system.env
    requests: list[PrecisionRequest] = []
    read: list[str] = []
    problems: list[str] = []
    given = [str(p) for p in ctx.options.extra.get("train_configs", ())]
    default = _accelerate_default(ctx)
    for path in given + ([default] if default not in given else []):
        try:
            if not files.exists(path):
                if path in given:
                    problems.append(f"{path}: no such file")
                continue
            if os.stat(files.host_path(path)).st_size > MAX_BYTES:  # before reading it whole
                problems.append(f"{path}: larger than {MAX_BYTES} bytes, not read")
                continue
            text = files.read_text(path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if len(text) > MAX_BYTES:
            problems.append(f"{path}: larger than {MAX_BYTES} bytes, not read")
            continue
        read.append(path)
        try:
            doc = _parse(text, path)
        except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError: the file's fault
            problems.append(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}: {str(exc)[:200]}")
            continue
        requests.extend(requests_in(doc, text, path))
    value = env.get("ACCELERATE_MIXED_PRECISION", "")
    if precision_word(value):
        requests.append(
            PrecisionRequest(
                precision_word(value) or "", "environment", "environment", 0, f"ACCELERATE_MIXED_PRECISION={value}"
            )
        )
    return PrecisionFacts(tuple(requests), tuple(read), tuple(problems), env.get("NVIDIA_TF32_OVERRIDE", ""))


COLLECTOR = Collector(domain="precision", collect=collect_precision, timeout_s=5.0)
