"""gpudoctor kernelspec lister: run by the Jupyter SERVER's interpreter.

Lists the kernelspecs exactly as jupyter_client's ``KernelSpecManager``
(``find_kernel_specs`` then ``get_kernel_spec(name).to_dict()``) would in that
interpreter, without importing jupyter_client, traitlets, IPython or ipykernel
(their imports cost about 0.3 s of CPU; this script about a fifth of that).
Stdlib (Python 3.6+) plus ``jupyter_core.paths`` only, which keeps the search
path rules (``JUPYTER_PATH``, ``JUPYTER_DATA_DIR``, ``JUPYTER_PREFER_ENV_PATH``,
user, ``sys.prefix`` and system ``share/jupyter``) the server's own. Prints one
JSON document framed by the marker, like the probe.

What is reproduced, from jupyter_client 5-8, ipykernel 4.6-7, IPython 8-9 and
traitlets 5 (tests/test_kernelspecs.py compares it with jupyter_client itself):

- kernel dirs: ``jupyter_path("kernels")`` then, when IPython is importable,
  ``get_ipython_dir()/kernels`` (``IPYTHONDIR``, else ``~/.ipython``, else a
  writable ``$XDG_CONFIG_HOME/ipython`` when ``~/.ipython`` does not exist);
- a kernel is a directory holding ``kernel.json``; its name is the directory
  name lower-cased (names outside ``[a-z0-9._-]`` only draw a warning there:
  they are listed); the first kernel dir wins per name, within one dir the
  last ``os.listdir`` entry does (``_list_kernels_in``) while the spec is read
  from the first one (``_find_spec_directory``);
- the built-in ``python3`` spec of ipykernel (``ipykernel/resources``, argv of
  ``ipykernel.kernelspec.get_kernel_dict``) when no ``python3`` was found;
- ``KernelSpec`` validation (traitlets 5 messages), unknown keys dropped, and
  jupyter_client 7+'s kernel provisioner check (``NoSuchKernel`` for a
  provisioner no installed distribution registers).

Not reproduced (only an import can tell): a package that is present but
fails to import (ipykernel or IPython with a missing dependency: jupyter_client
then omits the built-in spec or ``~/.ipython/kernels``); IPython's temporary
directory when ``~/.ipython`` is not writable (not listed here, never
created: this script writes nothing); ipykernel 6.4-6.28's ``debugger`` flag
is "debugpy is installed", not "debugpy imports".
"""

import json
import os
import re
import sys
from importlib.util import find_spec

MARKER = "@@gpudoctor-kernelspecs@@"
NATIVE_KERNEL_NAME = "python3"
PROVISIONER_GROUP = "jupyter_client.kernel_provisioners"
LOCAL_PROVISIONER = "local-provisioner"
#: how Python names ``KernelSpec(...)`` in a call's TypeError
CALLEE = "jupyter_client.kernelspec.KernelSpec()" if sys.version_info >= (3, 9) else "type object"
#: KernelSpec's traits: what each expects, as traitlets words it
TRAITS = {
    "argv": "a list",
    "env": "a dict",
    "metadata": "a dict",
    "interrupt_mode": "any of ['message', 'signal'] (case-insensitive)",
    "name": "a unicode string",
    "mimetype": "a unicode string",
    "display_name": "a unicode string",
    "language": "a unicode string",
    "kernel_protocol_version": "a unicode string",
    "resource_dir": "a unicode string",
}


class TraitError(Exception):
    """traitlets' error, by name."""


class NoSuchKernel(KeyError):
    """jupyter_client's error, by name and message."""

    def __init__(self, name):
        KeyError.__init__(self, name)
        self.name = name

    def __str__(self):
        return "No such kernel named %s" % self.name


# --------------------------------------------------------------------------- distributions on sys.path


def version_tuple(text):
    """(major, minor, patch) of a version string such as ``7.2.0a1``; missing parts are 0."""
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text or "")
    return tuple(int(g or 0) for g in m.groups()) if m else (0, 0, 0)


def _norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()


#: what is read from sys.path at most once per run
_CACHE = {}


def distributions():
    """{normalised name: metadata path} of the distributions on ``sys.path``: the first one per
    name in path then ``os.listdir`` order, importlib.metadata's choice."""
    if "dists" not in _CACHE:
        dists = _CACHE["dists"] = {}
        for entry in sys.path:
            try:
                names = os.listdir(entry or ".")
            except OSError:  # a zip file, a missing directory
                continue
            for f in names:
                stem, ext = os.path.splitext(f)
                if ext.lower() in (".dist-info", ".egg-info"):
                    dists.setdefault(_norm(stem.split("-")[0]), os.path.join(entry or ".", f))
    return _CACHE["dists"]


def _metadata_text(path, name):
    """A file of a dist-info/egg-info directory (an egg-info file is its own PKG-INFO), or ''."""
    if os.path.isfile(path):
        path, name = os.path.dirname(path), os.path.basename(path)
    try:
        with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def dist_version(name):
    """The ``Version:`` of an installed distribution's metadata, or None."""
    path = distributions().get(_norm(name))
    if not path:
        return None
    text = _metadata_text(path, "METADATA" if path.endswith(".dist-info") else "PKG-INFO")
    m = re.search(r"^Version:[ \t]*(\S+)", text.split("\n\n", 1)[0], re.MULTILINE)
    return m.group(1) if m else None


def module_version(name):
    """A package's version: its distribution metadata, else ``__version__ = "..."`` in its
    ``_version.py``, else None."""
    version = dist_version(name)
    if version is not None:
        return version
    spec = find_spec(name)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if locations:
        text = _metadata_text(locations[0], "_version.py")
        m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if m:
            return m.group(1)
    return None


def entry_point_names(group):
    """Names of the entry points of ``group`` over the distributions on ``sys.path`` (read once)."""
    if group in _CACHE:
        return _CACHE[group]
    found = _CACHE[group] = set()
    for path in distributions().values():
        if not path or not os.path.isdir(path):
            continue
        section = None
        for line in _metadata_text(path, "entry_points.txt").splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line.strip("[]")  # spaces kept, as importlib.metadata reads the group
            elif section == group and "=" in line and not line.startswith(("#", ";")):
                found.add(line.split("=", 1)[0].strip())
    return found


# --------------------------------------------------------------------------- where kernels are


def package_dir(name):
    """Directory of an importable package, found without importing it, or None."""
    spec = find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.dirname(spec.origin) if spec.origin else None


def _writable_dir(path):
    return os.path.isdir(path) and os.access(path, os.W_OK)


def ipython_kernel_dir():
    """``IPython.paths.get_ipython_dir()``/kernels, which jupyter_client appends when IPython is
    importable, or None (IPython absent, or it would fall back to a fresh temporary directory)."""
    if find_spec("IPython") is None:
        return None
    home = os.path.realpath(os.path.expanduser("~"))
    ipdir = os.environ.get("IPYTHONDIR")
    if ipdir is None:
        ipdir = os.path.join(home, ".ipython")
        xdg = (os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")) if os.name == "posix" else None
        if xdg and _writable_dir(xdg):
            xdg_ipdir = os.path.join(xdg, "ipython")
            if _writable_dir(xdg_ipdir) and not os.path.exists(ipdir) and not os.path.islink(xdg_ipdir):
                ipdir = xdg_ipdir
    ipdir = os.path.normpath(os.path.expanduser(ipdir))
    if os.path.exists(ipdir):
        if not _writable_dir(ipdir):
            return None  # IPython then uses a temporary directory
    elif not _writable_dir(os.path.dirname(ipdir)):
        return None  # IPython would create it; where it cannot, it uses a temporary directory
    return os.path.join(ipdir, "kernels")


def is_kernel_dir(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "kernel.json"))


def list_kernels_in(kdir):
    """{lower-cased name: path} of one kernel dir (``_list_kernels_in``: the last entry of a name wins)."""
    if kdir is None or not os.path.isdir(kdir):
        return {}
    kernels = {}
    for f in os.listdir(kdir):
        path = os.path.join(kdir, f)
        if is_kernel_dir(path):
            kernels[f.lower()] = path
    return kernels


def find_kernel_specs(kernel_dirs, resources):
    found = {}
    for kdir in kernel_dirs:
        for name, path in list_kernels_in(kdir).items():
            found.setdefault(name, path)
    if NATIVE_KERNEL_NAME not in found and resources is not None:
        found[NATIVE_KERNEL_NAME] = resources
    return found


def find_spec_directory(kernel_dirs, name, resources):
    """``KernelSpecManager._find_spec_directory``: the first match in ``os.listdir`` order."""
    for kdir in [d for d in kernel_dirs if os.path.isdir(d)]:
        for f in os.listdir(kdir):
            path = os.path.join(kdir, f)
            if f.lower() == name and is_kernel_dir(path):
                return path
    if name == NATIVE_KERNEL_NAME:
        return resources
    return None


# --------------------------------------------------------------------------- reading a spec


def _validate(key, value):
    """One KernelSpec trait's value after traitlets' validation, or TraitError with its message."""
    if key == "argv" and isinstance(value, str):
        return [value]  # traitlets 5's List.set wraps a lone string
    ok = {"a list": list, "a dict": dict, "a unicode string": str}.get(TRAITS[key])
    if ok is not None and isinstance(value, ok):
        return value
    if key == "interrupt_mode" and isinstance(value, str) and value.lower() in ("message", "signal"):
        return value.lower()
    raise TraitError(
        "The '%s' trait of a KernelSpec instance expected %s, not the %s %r."
        % (key, TRAITS[key], type(value).__name__, value)
    )


def spec_dict(resource_dir, kernel_dict):
    """``KernelSpec(resource_dir=..., **kernel_dict).to_dict()``."""
    if not isinstance(kernel_dict, dict):
        raise TypeError("%s argument after ** must be a mapping, not %s" % (CALLEE, type(kernel_dict).__name__))
    if "resource_dir" in kernel_dict:
        raise TypeError("%s got multiple values for keyword argument 'resource_dir'" % CALLEE)
    spec = {
        "argv": [],
        "env": {},
        "display_name": "",
        "language": "",
        "interrupt_mode": "signal",
        "metadata": {},
        "kernel_protocol_version": "",
    }
    for key, value in kernel_dict.items():
        if key in TRAITS:  # other keys are dropped (traitlets warns)
            value = _validate(key, value)
            if key in spec:
                spec[key] = value
    return spec


def native_kernel_dict(ipykernel_version):
    """``ipykernel.kernelspec.get_kernel_dict()`` of the installed ipykernel version."""
    v = version_tuple(ipykernel_version) if ipykernel_version else (99, 0, 0)
    d = {
        "argv": [sys.executable, "-m", "ipykernel_launcher" if v >= (4, 6, 0) else "ipykernel"],
        "display_name": ("Python %i (ipykernel)" if v >= (6, 0, 0) else "Python %i") % sys.version_info[0],
        "language": "python",
    }
    d["argv"] += ["-f", "{connection_file}"]
    if v >= (7, 3, 0):
        d["metadata"] = {"debugger": True, "supported_encryption": ["curve"] if v >= (7, 4, 0) else "curve"}
    elif v >= (6, 0, 0):
        debugpy = (6, 4, 0) <= v < (6, 29, 0)
        d["metadata"] = {"debugger": find_spec("debugpy") is not None if debugpy else True}
    if v >= (7, 2, 0):
        d["kernel_protocol_version"] = "5.5"
    return d


def check_provisioner(name, spec):
    """jupyter_client 7+: NoSuchKernel when the spec's (or the default) provisioner is not
    registered. Adds ``config: {}`` to a ``kernel_provisioner`` stanza without one, as it does."""
    stanza = spec["metadata"].get("kernel_provisioner", {})
    if "provisioner_name" in stanza:
        if "config" not in stanza:
            stanza.update({"config": {}})
        wanted = str(stanza.get("provisioner_name"))
    else:
        wanted = os.environ.get("JUPYTER_DEFAULT_PROVISIONER_NAME", LOCAL_PROVISIONER)
    # local-provisioner is built into jupyter_client even without its entry point
    if wanted != LOCAL_PROVISIONER and wanted not in entry_point_names(PROVISIONER_GROUP):
        raise NoSuchKernel(name)


def get_kernel_spec(name, kernel_dirs, resources, ipykernel_version, provisioners):
    """``KernelSpecManager().get_kernel_spec(name).to_dict()``; ``provisioners``: jupyter_client 7+."""
    resource_dir = find_spec_directory(kernel_dirs, name, resources)
    if resource_dir is None:
        raise NoSuchKernel(name)
    if name == NATIVE_KERNEL_NAME and resource_dir == resources:
        spec = spec_dict(resource_dir, native_kernel_dict(ipykernel_version))
    else:
        with open(os.path.join(resource_dir, "kernel.json"), encoding="utf-8") as f:
            spec = spec_dict(resource_dir, json.load(f))
    if provisioners:
        check_provisioner(name, spec)
    return spec


# --------------------------------------------------------------------------- main


def main():
    if find_spec("jupyter_client") is None:
        raise ModuleNotFoundError("No module named 'jupyter_client'")
    from jupyter_core.paths import jupyter_data_dir, jupyter_path

    jupyter_client_version = module_version("jupyter_client") or "?"
    kernel_dirs = jupyter_path("kernels")
    ipython_dir = ipython_kernel_dir()
    if ipython_dir is not None:
        kernel_dirs.append(ipython_dir)
    ipykernel = package_dir("ipykernel")
    resources = os.path.join(ipykernel, "resources") if ipykernel else None
    ipykernel_version = module_version("ipykernel") if ipykernel else None
    provisioners = jupyter_client_version == "?" or version_tuple(jupyter_client_version) >= (7, 0, 0)
    found = find_kernel_specs(kernel_dirs, resources)
    specs = []
    for name in sorted(found):
        resource_dir = found[name]
        entry = {
            "name": name,
            "resource_dir": resource_dir,
            "builtin": resources is not None and os.path.abspath(resource_dir) == os.path.abspath(resources),
        }
        try:
            entry["spec"] = get_kernel_spec(name, kernel_dirs, resources, ipykernel_version, provisioners)
        except Exception as exc:  # malformed kernel.json, unknown provisioner ...
            entry["error"] = ("%s: %s" % (type(exc).__name__, exc)).strip()
        shadowed = []
        for kdir in kernel_dirs:
            if not os.path.isdir(kdir):
                continue
            for f in sorted(os.listdir(kdir)):
                path = os.path.join(kdir, f)
                if f.lower() == name and is_kernel_dir(path) and os.path.abspath(path) != os.path.abspath(resource_dir):
                    shadowed.append(path)
        entry["shadowed"] = shadowed
        specs.append(entry)
    doc = {
        "executable": sys.executable,
        "version": "%d.%d" % sys.version_info[:2],
        "jupyter_client": jupyter_client_version,
        "data_dir": jupyter_data_dir(),
        "kernel_dirs": list(kernel_dirs),
        "specs": specs,
    }
    sys.stdout.write("\n" + MARKER + json.dumps(doc) + MARKER + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
