#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/usr/local/sbin/gpudoctor-prolog.sh, PrologFlags=Alloc).
# Runs as root on the node before the job. A non-zero exit drains the node and requeues the job,
# so a job never starts on GPUs that cannot run it. SLURM_JOB_GPUS lists the job's GPU indices.
if [ -n "$SLURM_JOB_GPUS" ]; then
    export CUDA_VISIBLE_DEVICES="$SLURM_JOB_GPUS"
    n=$(printf '%s' "$SLURM_JOB_GPUS" | tr ',' '\n' | grep -c .)
    exec gpudoctor gate -q --require-gpus "$n" --timeout 30
fi
exit 0
