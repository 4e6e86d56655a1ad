"""gpudoctor kernelspec lister: run by the Jupyter SERVER's interpreter.

Uses jupyter_client's own ``KernelSpecManager`` so the search path
(``JUPYTER_PATH``, ``JUPYTER_DATA_DIR``, user, ``sys.prefix`` and system
``share/jupyter/kernels``, ``~/.ipython/kernels``), the name rules and the
built-in ``python3`` spec are exactly the server's. Prints one JSON document
framed by the marker, like the probe. Stdlib plus jupyter_client only.
"""

import json
import os
import sys

MARKER = "@@gpudoctor-kernelspecs@@"


def main():
    import jupyter_client
    from jupyter_client.kernelspec import KernelSpecManager, _is_kernel_dir
    from jupyter_core.paths import jupyter_data_dir

    ksm = KernelSpecManager()
    found = ksm.find_kernel_specs()
    try:
        from ipykernel.kernelspec import RESOURCES
    except Exception:
        RESOURCES = None
    specs = []
    for name in sorted(found):
        resource_dir = found[name]
        entry = {
            "name": name,
            "resource_dir": resource_dir,
            "builtin": RESOURCES is not None and os.path.abspath(resource_dir) == os.path.abspath(RESOURCES),
        }
        try:
            entry["spec"] = ksm.get_kernel_spec(name).to_dict()
        except Exception as exc:  # malformed kernel.json, unknown provisioner ...
            entry["error"] = ("%s: %s" % (type(exc).__name__, exc)).strip()
        shadowed = []
        for kdir in ksm.kernel_dirs:
            if not os.path.isdir(kdir):
                continue
            for f in sorted(os.listdir(kdir)):
                path = os.path.join(kdir, f)
                if (
                    f.lower() == name
                    and _is_kernel_dir(path)
                    and os.path.abspath(path) != os.path.abspath(resource_dir)
                ):
                    shadowed.append(path)
        entry["shadowed"] = shadowed
        specs.append(entry)
    doc = {
        "executable": sys.executable,
        "version": "%d.%d" % sys.version_info[:2],
        "jupyter_client": getattr(jupyter_client, "__version__", "?"),
        "data_dir": jupyter_data_dir(),
        "kernel_dirs": list(ksm.kernel_dirs),
        "specs": specs,
    }
    sys.stdout.write("\n" + MARKER + json.dumps(doc) + MARKER + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
