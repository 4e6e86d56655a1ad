"""DataLoader probe, report: from the measurements to the recommendation, the call to paste and the limits.

Part of the script the target interpreter runs (see :mod:`gpudoctor.probe._dataloader`):
standard library only, no import of gpudoctor. Pure functions of the
measurement dicts (no torch, no clock), so they are tested directly.
"""

#: The recommendation is the cheapest configuration within this fraction of the best throughput.
WITHIN = 0.05
#: A data-stall fraction at or below this means the loader keeps up with the step.
STALL_OK = 0.05


def cost_key(config):
    """Cheaper sorts first: fewer workers, smaller prefetch, no pinning; persistent
    workers do not change throughput and save the per-epoch start-up, so they win ties."""
    return (
        config["num_workers"],
        config.get("prefetch_factor") or 0,
        config.get("pin_memory", False),
        0 if config.get("persistent_workers") else 1,
    )


def config_group(cfg):
    """(num_workers, prefetch_factor, pin_memory): a configuration up to ``persistent_workers``."""
    return (cfg["num_workers"], cfg.get("prefetch_factor") or 0, bool(cfg.get("pin_memory")))


def group_rates(results):
    """{group: (mean samples/s, [indices])} over the successful measurements.

    A group is a configuration up to ``persistent_workers`` (:func:`config_group`):
    persistence does not change steady-state throughput, it only removes the
    per-epoch worker start-up (``restart_s``). The group's rate is the MEAN of
    its measurements, not the best one: on a shared machine the maximum of
    several noisy measurements favours whichever group was measured most
    often or got a lucky slice.
    """
    idx = {}
    for i, r in enumerate(results):
        if r.get("samples_per_s"):
            idx.setdefault(config_group(r["config"]), []).append(i)
    return {g: (sum(results[i]["samples_per_s"] for i in ii) / float(len(ii)), ii) for g, ii in idx.items()}


def pick_group(rates):
    """The cheapest group whose mean rate is within WITHIN of the best group's mean."""
    best = max(m for m, _ in rates.values())
    return min(g for g, (m, _) in rates.items() if m >= (1 - WITHIN) * best)


def choose(results):
    """Index of the recommended measurement, or None when nothing was measured.

    Groups (:func:`group_rates`) are rated by the mean samples/s of their
    measurements. Among the groups within WITHIN of the best mean the cheapest
    (:func:`cost_key`: fewer workers, smaller prefetch, no pinning) wins; the
    index is that group's latest measurement (after the adaptive search's
    confirmation round, its persistent-workers re-measurement).
    """
    rates = group_rates(results)
    if not rates:
        return None
    return rates[pick_group(rates)][1][-1]


def recommended_config(results, index):
    """The configuration to recommend: the chosen measurement's, with ``persistent_workers=True``
    when it has workers and a persistent variant was measured (start-up saved every epoch)."""
    cfg = dict(results[index]["config"])
    if cfg["num_workers"] > 0 and any(
        config_group(r["config"]) == config_group(cfg) and r["config"].get("persistent_workers") for r in results
    ):
        cfg["persistent_workers"] = True
    return cfg


def call_text(config, batch_size):
    """The exact ``DataLoader(...)`` call to paste."""
    parts = ["dataset", "batch_size=%d" % batch_size, "num_workers=%d" % config["num_workers"]]
    if config["num_workers"] > 0:
        parts.append("prefetch_factor=%d" % (config.get("prefetch_factor") or 2))
        parts.append("persistent_workers=%s" % bool(config.get("persistent_workers")))
    parts.append("pin_memory=%s" % bool(config.get("pin_memory")))
    return "DataLoader(%s)" % ", ".join(parts)


def _n(n, word, many=None):
    """``1 CPU`` / ``2 CPUs`` (this module imports nothing from gpudoctor: see gpudoctor.words)."""
    return "%d %s" % (n, word if n == 1 else (many or word + "s"))


#: CPU-side remedies for a CPU-bound loader: what helps on every machine.
CPU_REMEDIES = (
    "pre-process offline into ready tensors (decode and resize once, store uint8 tensors or a "
    "NumPy memmap) so each epoch only reads them; decode more cheaply (Pillow-SIMD, or a "
    "reduced-size JPEG decode such as PIL's Image.draft() when you downscale anyway); cache "
    "decoded samples in RAM when the dataset fits; or give the job more CPUs (cgroup quota / "
    "affinity)"
)
#: The GPU-side remedy, offered only where a CUDA device is usable.
GPU_REMEDY = "move decode/augmentation to the GPU (e.g. torchvision.io.decode_jpeg on device='cuda', NVIDIA DALI)"


def cpu_bound_advice(gpu_usable):
    """The remedies for a CPU-bound loader that fit the machine.

    ``gpu_usable``: whether ``torch.cuda.is_available()`` was True in the
    target (True/False), or None when unknown. GPU decoding (DALI,
    ``device='cuda'``) is advised only when it is True; without a usable GPU
    the advice is CPU-side only (offline pre-processing, cheaper decode,
    caching, more CPUs); unknown says both, the GPU one conditionally.
    """
    if gpu_usable:
        return GPU_REMEDY + "; or " + CPU_REMEDIES
    if gpu_usable is None:
        return CPU_REMEDIES + "; with a usable CUDA GPU you could also " + GPU_REMEDY
    return CPU_REMEDIES + " (no CUDA device is usable here, so decoding on the GPU is not an option)"


def limits(results, rec_index, cpus, budget_exhausted, gpu_usable=None):
    """What still limits the recommended configuration: a list of {kind, summary, detail}.

    ``gpu_usable`` (True/False/None: unknown) chooses the remedies of a
    CPU-bound loader (:func:`cpu_bound_advice`)."""
    if rec_index is None:
        return []
    rec = results[rec_index]
    w = rec["config"]["num_workers"]
    stall = rec.get("stall_fraction", 0.0)
    busy = rec.get("workers_cpu_busy")
    out = []
    if stall <= STALL_OK:
        out.append(
            {
                "kind": "step-bound",
                "summary": "the training step is the bottleneck: the loader is not the problem",
                "detail": "the loop waits for data only %.0f%% of the time with these settings; a faster "
                "step (mixed precision, torch.compile, a larger batch) speeds training up, "
                "more loader tuning does not" % (100 * stall),
            }
        )
    host = rec.get("host_cpu_busy")
    saturated = w >= cpus["usable"] or (host is not None and host >= 0.85)
    if stall <= STALL_OK:
        pass
    elif saturated and not (busy is not None and busy < 0.3 and (host is None or host < 0.6)):
        out.append(
            {
                "kind": "cpu-bound",
                "summary": "CPU-bound decode with %s busy: the loop still waits for "
                "data %.0f%% of the time"
                % (
                    "the only usable CPU" if cpus["usable"] == 1 else "all %d usable CPUs" % cpus["usable"],
                    100 * stall,
                ),
                "detail": cpu_bound_advice(gpu_usable)
                + ("" if host is None else "; the whole machine was %.0f%% busy" % (100 * host)),
            }
        )
    elif busy is not None and busy < 0.5:
        out.append(
            {
                "kind": "io-bound",
                "summary": "the workers mostly wait (CPU busy %.0f%%) while CPUs are free: loading "
                "is I/O-bound" % (100 * busy),
                "detail": "read from faster local storage or RAM, use larger sequential files "
                "(WebDataset-style shards), or cache the dataset; more workers than CPUs "
                "can help an I/O-bound loader",
            }
        )
    else:
        out.append(
            {
                "kind": "more-workers",
                "summary": "the loop still waits for data %.0f%% of the time with %d of %s "
                "as workers" % (100 * stall, w, _n(cpus["usable"], "usable CPU")),
                "detail": "the search stopped (budget or no gain); try --exhaustive or a larger --budget-s",
            }
        )
    if budget_exhausted:
        out.append(
            {
                "kind": "budget",
                "summary": "the time budget ran out before the search finished",
                "detail": "run again with a larger --budget-s for a complete search",
            }
        )
    return out
