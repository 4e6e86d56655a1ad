"""gpudoctor: diagnose and repair GPU deep-learning machines, containers and notebooks.

The package is laid out as facts -> checks -> findings -> render, with fixes
planned as data and written only by :mod:`gpudoctor.apply`. See ``docs/``.
"""

__version__ = "0.2.0"


def audit(model, *example_inputs, **example_kwargs):
    """Find the first module of ``model`` whose inputs, parameters, buffers or plain tensor
    attributes sit on different devices; see :func:`gpudoctor.device_audit.audit`.

    Runs in the caller's process (torch is imported only when this is called).
    Returns a :class:`gpudoctor.device_audit.AuditReport`.
    """
    from gpudoctor.device_audit import audit as _audit

    return _audit(model, *example_inputs, **example_kwargs)


def watch(loader, interval_s=0.5, gpu=None):
    """``with gpudoctor.watch(loader) as w:`` around a training loop: the share of step time
    spent waiting for data, GPU busy %, what limits the loader and the settings to use (the
    ``gpudoctor watch`` verdict for one loop); see :class:`gpudoctor.loop_watch.LoopWatch`.

    Runs in the caller's process (torch is imported only when this is called).
    """
    from gpudoctor.loop_watch import LoopWatch

    return LoopWatch(loader, interval_s=interval_s, gpu=gpu)
