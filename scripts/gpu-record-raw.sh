#!/usr/bin/env bash
# Record the raw machine-level artefacts gpudoctor's collectors read, as field-case material:
#
#   scripts/gpu-record-raw.sh OUTDIR
#
# Writes, each command under a timeout and never failing the script:
#   nvidia-smi-q.txt      nvidia-smi -q (driver, every GPU, ECC, retired pages, recovery action)
#   nvidia-smi-L.txt      nvidia-smi -L
#   topo-m.txt            nvidia-smi topo -m (GPU/NIC matrix, CPU and NUMA affinity)
#   nvlink-s.txt          nvidia-smi nvlink -s
#   compute-apps.csv      the processes NVML lists, with their memory
#   lspci-vvv.txt         lspci -vvv (ACSCtl on the bridges needs root)
#   kernel-b0.txt         NVIDIA/PCIe/module-signing kernel messages of this boot (journalctl, else dmesg)
#   kernel-b-1.txt        the same of the previous boot (journalctl -b -1; empty without a persistent journal)
#   holders.txt           processes holding /dev/nvidia* open: pid, ppid, etime, cgroup, command
#   iommu.txt             /proc/cmdline and each NVIDIA GPU's IOMMU group type and bridge chain
#   os-release            /etc/os-release
# Review before committing: the files name this machine's GPUs, serials, PIDs and commands.
set -u
OUT="${1:?usage: gpu-record-raw.sh OUTDIR}"
mkdir -p "$OUT" || { echo "gpu-record-raw: cannot create $OUT" >&2; exit 2; }
PATTERN='NVRM|nvidia|nouveau|AER|PCIe Bus Error|Lockdown|module verification|Key was rejected|unsigned module'

rec() {  # rec FILE CMD...: run CMD under a timeout, its output (or why not) into OUTDIR/FILE
    local file="$1"; shift
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "# not recorded: $1 is not installed" >"$OUT/$file"
        return 0
    fi
    timeout 30 "$@" >"$OUT/$file" 2>&1 || echo "# exit status $? of: $*" >>"$OUT/$file"
}

rec nvidia-smi-q.txt nvidia-smi -q
rec nvidia-smi-L.txt nvidia-smi -L
rec topo-m.txt nvidia-smi topo -m
rec nvlink-s.txt nvidia-smi nvlink -s
rec compute-apps.csv nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
rec lspci-vvv.txt lspci -vvv

if command -v journalctl >/dev/null 2>&1; then
    timeout 30 journalctl -k -b 0 --no-pager -q -o short-iso 2>&1 | grep -E "$PATTERN" >"$OUT/kernel-b0.txt"
    timeout 30 journalctl -k -b -1 --no-pager -q -o short-iso 2>&1 | grep -E "$PATTERN|no persistent journal" >"$OUT/kernel-b-1.txt"
else
    timeout 30 dmesg 2>&1 | grep -E "$PATTERN" >"$OUT/kernel-b0.txt"
    echo "# not recorded: journalctl is not installed" >"$OUT/kernel-b-1.txt"
fi

{
    echo "# pid ppid etime cgroup command (processes with /dev/nvidia* open)"
    for p in /proc/[0-9]*; do
        pid="${p#/proc/}"
        if ls -l "$p/fd" 2>/dev/null | grep -q ' /dev/nvidia'; then
            stat_ppid="$(awk '{print $4}' "$p/stat" 2>/dev/null)"
            etime="$(ps -o etime= -p "$pid" 2>/dev/null | tr -d ' ')"
            cg="$(head -1 "$p/cgroup" 2>/dev/null)"
            cmd="$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-300)"
            echo "$pid $stat_ppid $etime $cg $cmd"
        fi
    done
} >"$OUT/holders.txt"

{
    echo "cmdline: $(cat /proc/cmdline 2>/dev/null)"
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor" 2>/dev/null)" = "0x10de" ] || continue
        case "$(cat "$d/class" 2>/dev/null)" in 0x03*) ;; *) continue ;; esac
        group="$(readlink "$d/iommu_group" 2>/dev/null)"
        type=""
        [ -n "$group" ] && type="$(cat "/sys/kernel/iommu_groups/${group##*/}/type" 2>/dev/null)"
        echo "$(basename "$d") path=$(readlink -f "$d") iommu=${type:-none}"
    done
} >"$OUT/iommu.txt"

cp /etc/os-release "$OUT/os-release" 2>/dev/null || true
echo "gpu-record-raw: raw artefacts saved under $OUT"
exit 0
