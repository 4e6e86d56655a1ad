"""Check ``amp.readiness``: which precision to train in on these GPUs, and whether the setup
asks for one they lack.

Per visible GPU model (NVML's list, else the devices the target's torch enumerated), the
precisions it runs natively and fast (``data/precision.toml``: fp16 Tensor Cores, bf16, TF32,
FP8, by compute capability and by board where the capability says more than the silicon):

- ``fail``: a setting (Accelerate, DeepSpeed, Lightning, Trainer keys, or
  ``ACCELERATE_MIXED_PRECISION``) asks for bf16 or TF32 on a GPU older than Ampere, or FP8 on
  one older than Ada/Hopper (the Trainer, vLLM, Triton and Transformer Engine refuse these; torch
  emulates bf16 slowly), naming the file, the line and the GPU, with the setting to use instead;
- ``warn``: fp16 mixed precision on a GPU without fp16 Tensor Cores (GTX 16xx, Pascal GTX 10xx:
  no speed-up, and NaN/black images are reported on GTX 16xx); FP8 on Ada with a torch built
  for CUDA < 12.1; TF32 asked for while ``NVIDIA_TF32_OVERRIDE=0`` turns it off; with ``--deep``,
  a measured matmul below a fifth of the datasheet figure;
- ``ok``: the best precision for each GPU model, the code or flag to use it and the one to avoid;
- ``skip``: no NVIDIA GPU (said once).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.facts.precision import PrecisionFacts, PrecisionRequest
from gpudoctor.facts.targets import ProbeFacts, SmokeFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.precision import NEEDS, TOOL_SETTINGS, TORCH_CODE, Capabilities, capabilities, datasheet, recommend
from gpudoctor.versions import major_minor

from . import SkipCheck

#: A measured matmul below this share of the datasheet's dense peak warns (throttled GPU, or a
#: build without Tensor Core kernels). Small matmuls reach 50-80 % of peak on healthy GPUs.
MIN_DATASHEET_SHARE = 0.2


def _gpus(facts: Facts) -> list[tuple[str, str]]:
    """(name, compute capability) of every GPU, NVML first, else the target's torch devices."""
    nv = facts.of(NvidiaDriverFacts)
    if not isinstance(nv, Unavailable) and nv.devices:
        return [(d.name, d.compute_capability) for d in nv.devices if isinstance(d.compute_capability, str)]
    targets = facts.of(TargetsFacts)
    if not isinstance(targets, Unavailable):
        for t in targets.targets:
            if isinstance(t.probe, ProbeFacts) and t.probe.torch.devices:
                return [(d.name, d.capability) for d in t.probe.torch.devices]
    return []


def _torch_cuda(facts: Facts) -> str | None:
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return None
    for t in targets.targets:
        if isinstance(t.probe, ProbeFacts) and t.probe.torch.cuda:
            return t.probe.torch.cuda
    return None


def _where(req: PrecisionRequest) -> str:
    if req.path == "environment":
        return f"the environment ({req.setting})"
    return f"{req.path}" + (f", line {req.line}" if req.line else "") + f" (`{req.setting}`)"


def _instead(req: PrecisionRequest, caps: Capabilities) -> str:
    best, _ = recommend(caps)
    settings = TOOL_SETTINGS.get(req.tool, TOOL_SETTINGS["transformers"])
    setting = settings.get(best) or settings["fp32"]
    return f"use `{setting}` instead ({best}); in plain PyTorch: `{TORCH_CODE[best]}`"


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _label(caps: Capabilities, count: int) -> str:
    return f"{count}x {caps.name}" if count > 1 else caps.name


def _measured(facts: Facts) -> dict[str, dict[str, float]]:
    """``cuda:N`` -> precision -> TFLOP/s from the ``--deep`` smoke test, when it ran."""
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return {}
    for t in targets.targets:
        if isinstance(t.probe, ProbeFacts) and isinstance(t.probe.smoke, SmokeFacts):
            return {
                d.device: dict(d.matmul_tflops)
                for d in t.probe.smoke.devices
                if not isinstance(d.matmul_tflops, Unavailable)
            }
    return {}


def evaluate(facts: Facts) -> list[Finding]:
    gpus = _gpus(facts)
    prec = facts.of(PrecisionFacts)
    if not gpus:
        problems = () if isinstance(prec, Unavailable) else prec.problems
        if problems:  # a configuration the user named could not be read: said even without a GPU
            return [
                CHECK.finding(
                    Status.WARN,
                    f"could not read the training configuration {problems[0].split(': ', 1)[0]}",
                    "\n".join(f"- could not read {p}" for p in problems),
                    evidence={"problems": list(problems)},
                )
            ]
        nv = facts.of(NvidiaDriverFacts)
        if isinstance(nv, Unavailable) and isinstance(facts.of(TargetsFacts), Unavailable):
            raise SkipCheck(f"the GPUs are not known: {nv.reason}")
        raise SkipCheck("no NVIDIA GPU: mixed precision does not apply (CPU training runs in fp32/bf16 on the CPU)")
    models: dict[tuple[str, str], int] = defaultdict(int)
    for name, cc in gpus:
        models[(name, cc)] += 1
    known: list[tuple[Capabilities, int]] = []
    unknown = []
    for (name, cc), count in models.items():
        caps = capabilities(name, cc)
        if caps is None:
            unknown.append(f"{name} (compute capability {cc})")
        else:
            known.append((caps, count))
    requests = () if isinstance(prec, Unavailable) else prec.requests
    torch_cuda = _torch_cuda(facts)
    #: (short summary, full sentence) of each problem
    fails: list[tuple[str, str]] = []
    warns: list[tuple[str, str]] = []
    commands: list[Command] = []  # the problems whose remedy is a command (most are a setting in the code)
    for req in requests:
        where = _where(req)
        for caps, count in known:
            gpu = f"{_label(caps, count)} ({caps.arch}, compute capability {caps.cc})"
            if req.precision in ("bf16", "tf32", "fp8") and not caps.supports(req.precision):
                fails.append(
                    (
                        f"{req.precision} is asked for ({req.setting}) but the {caps.name} has no {req.precision} "
                        "Tensor Cores",
                        f"{where} asks for {req.precision}, but the {gpu} has no {req.precision} Tensor Cores: "
                        f"{req.precision} needs {NEEDS[req.precision]}. {_upper_first(_instead(req, caps))}.",
                    )
                )
            elif req.precision == "fp16" and not caps.fp16_tc:
                why = "; ".join(caps.notes) or "no Tensor Cores"
                warns.append(
                    (
                        f"fp16 mixed precision ({req.setting}) on the {caps.name}, which has no fp16 Tensor Cores: "
                        "no speed-up",
                        f"{where} asks for fp16 mixed precision, but the {gpu} has no fp16 Tensor Cores ({why}): "
                        f"it saves memory but gives no speed-up. {_upper_first(_instead(req, caps))} "
                        "unless you need the memory.",
                    )
                )
            elif req.precision == "fp8" and caps.cc == "8.9" and (major_minor(torch_cuda) or (99, 0)) < (12, 1):
                warns.append(
                    (
                        f"FP8 on the {caps.name} needs a CUDA >= 12.1 build; this torch is built for CUDA {torch_cuda}",
                        f"{where} asks for FP8 on the {gpu}: Ada's FP8 matmuls need a CUDA >= 12.1 build, and this "
                        f"torch is built for CUDA {torch_cuda}: install a cu121-or-newer wheel.",
                    )
                )
                commands.append(
                    Command(
                        "python -m pip install torch --index-url https://download.pytorch.org/whl/cu121",
                        "a torch built for CUDA 12.1, whose FP8 matmuls run on Ada",
                        "changes",
                    )
                )
            elif req.precision == "tf32" and not isinstance(prec, Unavailable) and prec.tf32_override == "0":
                warns.append(
                    (
                        f"TF32 is asked for ({req.setting}) but NVIDIA_TF32_OVERRIDE=0 turns it off",
                        f"{where} asks for TF32, but NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32 off in "
                        "every CUDA library: unset it.",
                    )
                )
                commands.append(Command("unset NVIDIA_TF32_OVERRIDE", "let the CUDA libraries use TF32"))
    if not isinstance(prec, Unavailable):
        warns.extend(
            (f"could not read the training configuration {p.split(': ', 1)[0]}", f"could not read {p}")
            for p in prec.problems
        )
    lines = []
    evidence: dict[str, Any] = {"gpus": {}, "requests": [f"{r.precision}: {_where(r)}" for r in requests]}
    measured = _measured(facts)
    for caps, count in known:
        best, avoid = recommend(caps)
        native = [p for p in ("fp16", "bf16", "tf32", "fp8") if caps.supports(p) and (p != "fp16" or caps.fp16_tc)]
        line = f"{_label(caps, count)} ({caps.arch}, {caps.cc}): train in {best}"
        if avoid:
            line += f"; avoid {', '.join(avoid)}"
        lines.append(line)
        evidence["gpus"][caps.name] = {
            "compute_capability": caps.cc,
            "architecture": caps.arch,
            "tensor_core_precisions": native + (["fp4"] if caps.fp4 else []) + (["int8"] if caps.int8_tc else []),
            "best": best,
            "avoid": list(avoid),
            "sources": list(caps.sources),
        }
    if unknown:
        lines.append("not in the precision table: " + ", ".join(unknown))
    peak_by_device = _deep_comparison(facts, measured, warns, evidence)
    if peak_by_device:
        lines.append("measured: " + "; ".join(peak_by_device))
    code = "\n".join(
        f"- {caps.name}: `{TORCH_CODE[recommend(caps)[0]]}`"
        + ("; FP8 is available too: " + TORCH_CODE["fp8"] if caps.fp8 else "")
        + (
            "; bf16 is emulated here even where `torch.cuda.is_bf16_supported()` says True (it counts emulation)"
            if "bf16" in recommend(caps)[1]
            else ""
        )
        for caps, _ in known
    )
    body = "Precision these GPUs run natively and fast (data/precision.toml, NVIDIA whitepapers):\n\n" + "\n".join(
        f"- {x}" for x in lines
    )
    if fails or warns:
        status = Status.FAIL if fails else Status.WARN
        summary = (fails or warns)[0][0]
        more = len(fails) + len(warns) - 1
        if more:
            summary += f" (+{more} more)"
        explanation = "\n".join(f"- {long}" for _, long in fails + warns) + "\n\n" + body + "\n\nIn code:\n\n" + code
        return [CHECK.finding(status, summary, explanation, evidence=evidence, commands=tuple(dict.fromkeys(commands)))]
    summary = "; ".join(lines[:3]) + (f" (+{len(lines) - 3} more)" if len(lines) > 3 else "")
    return [CHECK.finding(Status.OK, summary, body + "\n\nIn code:\n\n" + code, evidence=evidence)]


def _deep_comparison(
    facts: Facts, measured: dict[str, dict[str, float]], warns: list[tuple[str, str]], evidence: dict[str, Any]
) -> list[str]:
    """Compare ``--deep``'s measured TFLOP/s with the datasheet; one summary part per device."""
    if not measured:
        return []
    gpus = _gpus(facts)
    parts = []
    evidence["measured_tflops"] = measured
    for device, rates in sorted(measured.items()):
        if not rates:
            continue
        best = max(rates, key=lambda k: rates[k])
        part = f"{device} " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()) + f" TFLOP/s (fastest: {best})"
        index = int(device.rsplit(":", 1)[-1]) if device.rsplit(":", 1)[-1].isdigit() else -1
        name = gpus[index][0] if 0 <= index < len(gpus) else ""
        sheet = datasheet(name) if name else {}
        if best in sheet:
            share = rates[best] / sheet[best]
            part += f", {share:.0%} of the datasheet's {sheet[best]:g}"
            if share < MIN_DATASHEET_SHARE:
                warns.append(
                    (
                        f"{device} ({name}) reaches {share:.0%} of its datasheet {best} throughput: throttled, "
                        "or no Tensor Core kernels in this build",
                        f"{device} ({name}) reaches {rates[best]:.1f} TFLOP/s in {best}, {share:.0%} of the "
                        f"{sheet[best]:g} of its datasheet ({sheet['source']}): the GPU is throttled (see "
                        "devices.throttle, `nvidia-smi -q -d PERFORMANCE,CLOCK`) or this build lacks Tensor Core "
                        "kernels for it.",
                    )
                )
        parts.append(part)
    return parts


CHECK = Check(
    id="amp.readiness",
    title="Mixed precision: what each GPU runs fast, and settings that ask for more",
    needs=("nvidia", "precision", "targets"),
    evaluate=evaluate,
)
