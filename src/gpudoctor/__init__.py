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
