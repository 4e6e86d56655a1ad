"""Snapshots with 1,000 and 10,000 GPUs (issue 32, item 10): how long `gpudoctor check --facts`
takes on them against the one-GPU snapshot they are built from, and how long the report's longest
line is. Prints ratios (no timed asserts); run: python benchmarks/many_gpus.py [OUT_DIR]."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "facts" / "gpu" / "devices-ok.json"
MODELS = [("NVIDIA H100 80GB HBM3", "9.0", 81559), ("NVIDIA A100-SXM4-80GB", "8.0", 81920), ("NVIDIA L4", "8.9", 23034)]


def snapshot(n: int) -> dict:
    """The one-GPU snapshot with ``n`` GPUs of three models, in NVML and in the probe's torch view."""
    doc = json.loads(BASE.read_text())
    nv = doc["domains"]["nvidia"]
    proto = nv["devices"][0]
    nv["devices"] = []
    for i in range(n):
        name, cc, mem = MODELS[i % len(MODELS)]
        dev = copy.deepcopy(proto)
        dev.update(
            index=i,
            name=name,
            uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000",
            pci_bus_id=f"{i // 65536:08x}:{(i // 256) % 256:02x}:{i % 256:02x}.0",  # NVML: 8-digit domain
            compute_capability=cc,
            memory_total_mib=mem,
        )
        nv["devices"].append(dev)
    for target in doc["domains"]["targets"]["targets"]:
        torch = target["probe"]["torch"]
        if torch.get("devices"):
            tproto = torch["devices"][0]
            torch["devices"] = []
            for i in range(n):
                name, cc, mem = MODELS[i % len(MODELS)]
                d = copy.deepcopy(tproto)
                d.update({k: v for k, v in (("index", i), ("name", name)) if k in d})
                if "pci_bus_id" in d:
                    d["pci_bus_id"] = f"{i // 65536:04x}:{(i // 256) % 256:02x}:{i % 256:02x}.0"
                if "uuid" in d:
                    d["uuid"] = f"GPU-{i:08x}-0000-0000-0000-000000000000"
                if "capability" in d:
                    d["capability"] = [int(x) for x in cc.split(".")] if isinstance(d["capability"], list) else cc
                if "total_memory" in d:
                    d["total_memory"] = mem * 1024 * 1024
                torch["devices"].append(d)
            torch["device_count"] = n
    return doc


def run(path: Path) -> tuple[float, int, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "check", "--facts", str(path)], capture_output=True, text=True
    )
    took = time.perf_counter() - start
    return took, max((len(line) for line in proc.stdout.splitlines()), default=0), proc.returncode


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    base_t, base_w, _ = run(BASE)
    print(f"1 GPU: {base_t:.2f} s, longest line {base_w} chars")
    for n in (1_000, 10_000):
        path = out / f"gpus-{n}.json"
        path.write_text(json.dumps(snapshot(n)))
        t, w, rc = run(path)
        print(f"{n} GPUs: {t:.2f} s ({t / base_t:.1f}x the 1-GPU run), longest line {w} chars, exit {rc}")


if __name__ == "__main__":
    main()
