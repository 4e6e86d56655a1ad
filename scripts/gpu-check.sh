#!/usr/bin/env bash
# Record what real NVIDIA hardware reports, as gpudoctor test fixtures.
#
# Run on a machine with a GPU, from the repository root, in the venv that has
# gpudoctor (pip install -e '.[test]') and a CUDA build of torch:
#
#   scripts/gpu-check.sh [--no-tests] [OUTDIR]      (OUTDIR: tests/fixtures/facts/recorded)
#
# 1. runs the tests marked `gpu` (pytest -m gpu);
# 2. collects the facts snapshot with the --deep smoke test (NVML health,
#    kernel-log XIDs, the probe's matrix product / copy bandwidth / peer access)
#    and saves it, secrets redacted, as OUTDIR/<gpu>-<driver>.json;
# 3. runs `gpudoctor check --deep --format json` and saves the report next to it
#    (OUTDIR/<gpu>-<driver>.report.json);
# 4. records the raw artefacts the machine-level collectors read (nvidia-smi -q, topo -m,
#    lspci -vvv with the ACS bits, the kernel log of this and the previous boot, the processes
#    holding /dev/nvidia*, IOMMU mode) under OUTDIR/<gpu>-<driver>.raw/ (scripts/gpu-record-raw.sh):
#    the material of a field case replayed from a fake root. The facts snapshot holds the same
#    machine as facts: the topology and gpu_holders domains (bridges, P2P, NVLink, holders).
# Review the files (they describe this machine: GPU names, bus ids, driver
# versions, process ids) before committing them as fixtures.
set -u
PY="${PYTHON:-python3}"
RUN_TESTS=1
if [ "${1:-}" = "--no-tests" ]; then RUN_TESTS=0; shift; fi
OUT="${1:-tests/fixtures/facts/recorded}"
mkdir -p "$OUT" || { echo "gpu-check: cannot create $OUT" >&2; exit 2; }

tests_rc=0
if [ "$RUN_TESTS" = 1 ]; then
    "$PY" -m pytest -m gpu -q -p no:cacheprovider tests || tests_rc=$?
    # pytest exits 5 when no test was collected: not a failure of the hardware
    [ "$tests_rc" = 5 ] && tests_rc=0
fi

name="$("$PY" - "$OUT" <<'PYEOF'
import json, re, sys
from pathlib import Path
from gpudoctor import engine
from gpudoctor.collect import CollectOptions
from gpudoctor.registry import load_registry
from gpudoctor.system import System

out = Path(sys.argv[1])
checks = list(load_registry().checks.values())
report = engine.run(checks, System.live(), CollectOptions(offline=True, deep=True, probe_timeout_s=300.0))
facts = report.facts
nv = facts.domains.get("nvidia")
gpu = getattr(nv, "devices", ()) and nv.devices[0].name or "no-gpu"
driver = getattr(nv, "driver_version", "")
driver = driver if isinstance(driver, str) else "no-driver"
slug = re.sub(r"[^a-z0-9.]+", "-", f"{gpu}-{driver}".lower()).strip("-")
(out / f"{slug}.json").write_text(json.dumps(facts.to_json(redact=True), indent=1, sort_keys=True) + "\n")
print(slug)
PYEOF
)" || { echo "gpu-check: collecting the facts failed" >&2; exit 3; }
echo "gpu-check: facts saved as $OUT/$name.json"

"$PY" -m gpudoctor check --deep --offline --format json -o "$OUT/$name.report.json"
check_rc=$?
echo "gpu-check: report saved as $OUT/$name.report.json (gpudoctor check exit $check_rc)"
bash "$(dirname "$0")/gpu-record-raw.sh" "$OUT/$name.raw"
if [ "$tests_rc" != 0 ]; then echo "gpu-check: the gpu-marked tests failed (exit $tests_rc)" >&2; exit 1; fi
# the check's own verdict (1 = something failed on this machine) is data here, not an error of the script
[ "$check_rc" -le 1 ] || exit "$check_rc"
exit 0
