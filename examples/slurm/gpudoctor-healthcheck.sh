#!/bin/sh
# Slurm HealthCheckProgram: drain the node when the gate fails, resume it when it passes again.
# slurm.conf:
#   HealthCheckProgram=/usr/local/sbin/gpudoctor-healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY,CYCLE
# Requirements (GPUs per node, memory) come from /etc/gpudoctor.toml, e.g.
#   [gate]
#   require-gpus = 8
#   min-gpu-memory-gib = 79
# Without require-gpus the gate expects at least one GPU; a CPU node says `require-gpus = 0`
# (or GPUDOCTOR_REQUIRE_GPUS=0), else it is drained as "no GPU is visible".
node=$(hostname -s)
status=${GPUDOCTOR_STATUS_FILE:-/run/gpudoctor/status.json}
mkdir -p "$(dirname "$status")"
if out=$(gpudoctor gate -q --status-file "$status" 2>&1); then
    # only undo our own drain
    if scontrol show node "$node" | grep -q 'Reason=gpudoctor:'; then
        scontrol update nodename="$node" state=resume
    fi
    exit 0
fi
reason=$(printf '%s\n' "$out" | grep -m1 -E '^gpudoctor gate: (required|failed|error|warning):' \
         | sed 's/^gpudoctor gate: //' | cut -c1-120)
scontrol update nodename="$node" state=drain reason="gpudoctor: ${reason:-gate failed}"
exit 1
