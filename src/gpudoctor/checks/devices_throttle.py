"""Check ``devices.throttle``: clocks held down by heat or power (NVML).

From ``nvmlDeviceGetCurrentClocksEventReasons`` (bits in
:data:`gpudoctor.facts.nvidia.CLOCK_EVENT_REASONS`, NVML API reference
"Clocks Event Reasons"), the temperature against its slowdown threshold and
the power draw against the enforced limit:

- ``warn``: hardware slowdown, hardware/software thermal slowdown or the
  power brake is active, or the GPU is within 5 °C of its slowdown threshold
  (cooling, airflow, power supply);
- ``info``: only the software power cap or sync boost holds the clocks (normal
  for a GPU running flat out at its power limit);
- ``ok`` otherwise.
"""

from __future__ import annotations

from gpudoctor.checks._devices import (
    NVML_DOC,
    bullets,
    ev,
    gpus_with_health,
    head,
    label,
    num,
    shown,
)
from gpudoctor.facts import Facts
from gpudoctor.facts.nvidia import CLOCK_EVENT_REASONS
from gpudoctor.model import Check, Command, Finding, Status

#: Reasons that mean the hardware protects itself (heat, power delivery): warn.
BAD = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"}
#: Reasons that are expected under full load: info.
EXPECTED = {"sw_power_cap", "sync_boost"}
#: Degrees C below the slowdown threshold that count as "near" it.
NEAR_SLOWDOWN_C = 5
MEANING = dict(CLOCK_EVENT_REASONS.values())


def reason_names(mask: int) -> list[str]:
    """Names of the bits set in a clock event reason mask, lowest bit first."""
    return [name for bit, (name, _) in sorted(CLOCK_EVENT_REASONS.items()) if mask & bit]


def evaluate(facts: Facts) -> list[Finding]:
    bad: list[str] = []
    soft: list[str] = []
    evidence = {}
    for dev, h in gpus_with_health(facts):
        mask = num(h.clock_event_reasons)
        names = reason_names(mask) if isinstance(mask, int) else []
        temp, slow, shut = num(h.temperature_c), num(h.temperature_slowdown_c), num(h.temperature_shutdown_c)
        evidence[f"gpu{dev.index}"] = {
            "clock_event_reasons": names if isinstance(mask, int) else shown(h.clock_event_reasons),
            "temperature_c": ev(h.temperature_c),
            "slowdown_c": ev(h.temperature_slowdown_c),
            "shutdown_c": ev(h.temperature_shutdown_c),
            "power_draw_w": ev(h.power_draw_w),
            "power_limit_w": ev(h.power_limit_w),
        }
        name = label(dev)
        heat = (
            f"{temp} °C (slowdown at {slow} °C, shutdown at {shut} °C)" if temp is not None else "temperature unknown"
        )
        power = (
            f"{num(h.power_draw_w):.0f} W of its {num(h.power_limit_w):.0f} W limit"
            if num(h.power_draw_w) is not None and num(h.power_limit_w) is not None
            else "power unknown"
        )
        active = [n for n in names if n in BAD]
        if active:
            why = "; ".join(MEANING[n] for n in active)
            bad.append(f"{name}: **{', '.join(active)}** — {why}. Now {heat}, {power}")
        elif temp is not None and slow is not None and temp >= slow - NEAR_SLOWDOWN_C:
            bad.append(
                f"{name}: **{temp} °C, within {NEAR_SLOWDOWN_C} °C of its slowdown threshold** ({slow} °C); {power}"
            )
        elif any(n in EXPECTED for n in names):
            soft.append(f"{name}: {', '.join(n for n in names if n in EXPECTED)} — {power}, {heat}")
    if bad:
        return [
            CHECK.finding(
                Status.WARN,
                f"GPU clocks held down by heat or power: {head(bad[0])}"
                + (f" and {len(bad) - 1} more" if len(bad) > 1 else ""),
                "These GPUs run slower than they can, to protect themselves:\n\n"
                + bullets(bad)
                + "\n\nWhat to check: airflow and fans (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`), blocked inlets, "
                "a hot aisle or a failed chassis fan; for a hardware slowdown or power brake, the power cables and "
                "the power supply (the brake is asserted by the board or chassis). `nvidia-smi -q -d PERFORMANCE` "
                "shows each reason live.",
                evidence=evidence,
                commands=(
                    Command("nvidia-smi -q -d TEMPERATURE,PERFORMANCE", "temperatures and throttle reasons, live"),
                ),
                doc_url=NVML_DOC,
            )
        ]
    if soft:
        return [
            CHECK.finding(
                Status.INFO,
                "GPU clocks limited by the software power cap (expected at full load)",
                bullets(soft) + "\n\nNo action needed unless the limit was lowered on purpose "
                "(`nvidia-smi -q -d POWER` shows the default and the enforced limit).",
                evidence=evidence,
            )
        ]
    return [CHECK.finding(Status.OK, "no thermal or power throttling", evidence=evidence)]


CHECK = Check(
    id="devices.throttle",
    title="GPU clocks: thermal and power throttling",
    needs=("nvidia",),
    evaluate=evaluate,
)
