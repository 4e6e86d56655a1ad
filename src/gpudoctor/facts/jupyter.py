"""Facts about Jupyter kernelspecs: what Jupyter would offer and how it would launch each.

Gathered by ``gpudoctor.collect.jupyter`` with jupyter_client's
``KernelSpecManager`` listing (reproduced on ``jupyter_core.paths``, checked
against jupyter_client by tests/test_kernelspecs.py) run by the Jupyter
server's interpreter (so the search path, the built-in ``python3`` spec and
the plain-``python`` substitution are the server's). Sources: jupyter_core 5.9 ``paths.py`` (``jupyter_path``),
jupyter_client 8.10 ``kernelspec.py`` (``find_kernel_specs``), ``manager.py``
(``format_kernel_cmd``) and ``provisioning/provisioner_base.py`` (``pre_launch``:
server environment, then kernel.json ``env`` with ``${VAR}`` substitution).
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class KernelInterpreter:
    """The Python a kernelspec's ``argv`` really runs.

    Attributes:
        path: the interpreter as run: absolute when it could be resolved,
            else the name as written (e.g. ``python3.9`` not on PATH).
        argv_index: index in ``argv`` of the interpreter token (0 unless a
            wrapper such as ``conda run`` or ``env`` comes first), or None.
        via: how ``path`` was found: ``absolute`` (argv names it),
            ``server-python`` (argv says ``python``/``python3``/``python3.X`` and
            Jupyter substitutes the server's own ``sys.executable``),
            ``path-lookup`` (a bare name looked up on the kernel's PATH),
            ``conda-run`` (``conda run -n ENV python``), ``env`` (``env VAR=... python``).
        exists: ``path`` is an existing file.
        conda_env: the ``-n``/``-p`` argument of a ``conda run`` wrapper, else None.
        wrapper_env: ``VAR=value`` assignments of an ``env`` wrapper.
        note: one line on anything unusual (unresolved name, unknown wrapper).
    """

    path: str
    argv_index: int | None
    via: str
    exists: bool
    conda_env: str | None = None
    wrapper_env: dict[str, str] = field(default_factory=dict)
    note: str = ""


@frozen_dataclass
class KernelLaunch:
    """Result of ``--deep``: the kernel started for real with jupyter_client's KernelManager.

    Attributes:
        ok: the kernel started, answered, ran the probe and was shut down.
        duration_ms: start to shutdown, in ms.
        error: why it failed (never answered within the timeout and was
            killed, died on start with its exit code, the probe raised ...), or None.
        probe: the probe's facts as printed inside the running kernel, or
            Unavailable with why there are none.
        stderr_tail: the kernel process's last stderr lines (empty when ok).
    """

    ok: bool
    duration_ms: float
    error: str | None
    probe: ProbeFacts | Unavailable
    stderr_tail: str = ""


@frozen_dataclass
class KernelSpecFacts:
    """One kernelspec as Jupyter lists it (the winner for its name).

    Attributes:
        name: kernel name (directory name, lower-cased).
        resource_dir: the kernelspec directory.
        kernel_json: path of its ``kernel.json``.
        kernel_json_text: the file's exact text (fix planners edit it), or
            None for ipykernel's built-in spec or an unreadable file.
        builtin: the built-in ``python3`` spec Jupyter adds from the server's
            ipykernel when no ``python3`` kernelspec is installed (no file to edit).
        error: why Jupyter could not load the spec (malformed JSON ...), or None.
        display_name, language, argv, interrupt_mode: kernel.json fields.
        env: kernel.json ``env`` exactly as written.
        env_resolved: ``env`` after Jupyter's ``${VAR}`` substitution from the
            server's environment (what the kernel process gets on top of it).
        metadata_json: kernel.json ``metadata`` as compact JSON text (free-form).
        provisioner: ``metadata.kernel_provisioner.provisioner_name``, or None
            (None means jupyter_client's local provisioner).
        is_python: a Python kernel (language python, or argv runs ipykernel).
        interpreter: the Python it runs (None for non-Python kernels or an empty argv).
        shadowed: other directories holding a kernelspec with the same name,
            lower in the search path and therefore ignored by Jupyter.
        launch: ``--deep`` result; None when not launched.
    """

    name: str
    resource_dir: str
    kernel_json: str
    kernel_json_text: str | None
    builtin: bool
    error: str | None
    display_name: str = ""
    language: str = ""
    argv: tuple[str, ...] = ()
    interrupt_mode: str = "signal"
    env: dict[str, str] = field(default_factory=dict)
    env_resolved: dict[str, str] = field(default_factory=dict)
    metadata_json: str = "{}"
    provisioner: str | None = None
    is_python: bool = False
    interpreter: KernelInterpreter | None = None
    shadowed: tuple[str, ...] = ()
    launch: KernelLaunch | Unavailable | None = None


@domain("jupyter")
@frozen_dataclass
class JupyterFacts:
    """Every kernelspec the Jupyter server would offer, and how it would launch them.

    Attributes:
        server_python: the interpreter that runs the Jupyter server (the
            ``jupyter`` command on PATH, from its ``#!`` line), whose
            ``sys.executable`` replaces a plain ``python`` in kernel argv.
        server_python_source: how ``server_python`` was chosen, one line.
        server_python_version: its ``major.minor``.
        jupyter_client_version: version of the jupyter_client that listed the specs.
        data_dir: ``jupyter_data_dir()`` of the server (``--user`` installs go to
            ``<data_dir>/kernels/NAME``).
        kernel_dirs: the kernelspec search path, highest priority first.
        kernels: the kernelspecs, in name order.
        deep: kernels were launched for real (``--deep``).
    """

    server_python: str
    server_python_source: str
    server_python_version: str
    jupyter_client_version: str
    data_dir: str
    kernel_dirs: tuple[str, ...]
    kernels: tuple[KernelSpecFacts, ...]
    deep: bool = False

    def kernel(self, name: str) -> KernelSpecFacts | None:
        """The kernelspec called ``name`` (case-insensitive), or None."""
        for k in self.kernels:
            if k.name == name.lower():
                return k
        return None


@frozen_dataclass
class JupyterServer:
    """A running Jupyter server (or JupyterHub single-user server), found in Jupyter's runtime directory.

    Source: the ``jpserver-<pid>.json`` / ``nbserver-<pid>.json`` files a
    server writes into its runtime directory (what ``jupyter server list
    --json`` reads), and ``/proc/<pid>/environ`` / ``/proc/<pid>/cgroup``.

    Attributes:
        pid: the server's process id.
        url: the server's URL (token removed).
        info_file: the runtime-dir JSON file.
        alive: the process exists.
        env: the server's environment (only the variables that matter for
            kernels: loader paths, PATH, CUDA/NVIDIA, Python environment, JupyterHub).
        env_error: why the environment could not be read ("" when it was).
        service: the systemd unit running it (``jupyter.service``), "" when none.
        hub: started by JupyterHub (``JUPYTERHUB_*`` in its environment).
    """

    pid: int
    url: str
    info_file: str
    alive: bool
    env: dict[str, str] = field(default_factory=dict)
    env_error: str = ""
    service: str = ""
    hub: bool = False


@domain("jupyter_servers")
@frozen_dataclass
class JupyterServersFacts:
    """Running Jupyter servers and the terminal's environment to compare their kernels with.

    Attributes:
        runtime_dir: the runtime directory searched.
        servers: every server found there.
        terminal_env: the same variables from the environment gpudoctor runs in.
    """

    runtime_dir: str
    servers: tuple[JupyterServer, ...] = ()
    terminal_env: dict[str, str] = field(default_factory=dict)


@frozen_dataclass
class RunningKernel:
    """A running kernel, asked through jupyter_client (``--deep``) without touching its namespace.

    Attributes:
        connection_file: the ``kernel-<id>.json`` in Jupyter's runtime directory.
        kernel_name: the kernelspec name recorded in the connection file ("" if absent).
        pid: the kernel process id (None when it did not answer).
        torch_imported: ``torch`` is in the kernel's ``sys.modules``.
        cuda_initialized: ``torch.cuda.is_initialized()``.
        cvd_now: ``os.environ['CUDA_VISIBLE_DEVICES']`` now (None: unset).
        cvd_at_start: the value in the process's start environment
            (``/proc/self/environ``), which CUDA read unless it was changed in the
            kernel before the first CUDA call (None: unset).
        notebook: the notebook using it (server sessions API), "" when unknown.
        error: why it could not be asked ("" when it answered).
        order_now: ``os.environ['CUDA_DEVICE_ORDER']`` now (None: unset).
        order_at_start: its value in the start environment (None: unset).
        device_count: ``torch.cuda.device_count()`` once CUDA is initialised (the devices torch
            enumerated), None when CUDA is not initialised or the kernel is older than this question.
        device_buses: the PCI bus id of each device in torch's order (``get_device_properties(i)
            .pci_bus_id``), empty when not known: tells whether ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` took effect.
    """

    connection_file: str
    kernel_name: str = ""
    pid: int | None = None
    torch_imported: bool = False
    cuda_initialized: bool = False
    cvd_now: str | None = None
    cvd_at_start: str | None = None
    notebook: str = ""
    error: str = ""
    order_now: str | None = None
    order_at_start: str | None = None
    device_count: int | None = None
    device_buses: tuple[str, ...] = ()


@domain("jupyter_running")
@frozen_dataclass
class RunningKernelsFacts:
    """Running kernels found in Jupyter's runtime directory and what they answered (``--deep`` only).

    Attributes:
        runtime_dir: the directory searched.
        kernels: one entry per connection file.
    """

    runtime_dir: str
    kernels: tuple[RunningKernel, ...] = ()
