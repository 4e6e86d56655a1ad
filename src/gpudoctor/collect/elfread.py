"""Read the parts of an ELF shared library the dynamic loader uses, with pyelftools.

Only reads (never loads) files, through the rooted :class:`~gpudoctor.system.Files`:
the header (class, machine), the dynamic section (``DT_SONAME``, ``DT_NEEDED``,
``DT_RPATH``, ``DT_RUNPATH``), symbol version definitions and needs
(``.gnu.version_d``/``.gnu.version_r``) and the dynamic symbol table.
Sources: System V gABI "Dynamic Section"; LSB Core "Symbol Versioning".
"""

from __future__ import annotations

import functools
import os
from dataclasses import field

from gpudoctor.records import frozen_dataclass
from gpudoctor.system import Files

__all__ = ["ElfInfo", "expand_origin", "read_elf"]


@frozen_dataclass
class ElfInfo:
    """What ld.so needs to know about one shared object.

    Attributes:
        elf_class: 32 or 64.
        machine: ``EM_X86_64``, ``EM_386``, ``EM_AARCH64`` ...
        soname: ``DT_SONAME`` or None.
        needed: ``DT_NEEDED`` names in order.
        rpath: ``DT_RPATH`` entries (``$ORIGIN`` unexpanded).
        runpath: ``DT_RUNPATH`` entries (``$ORIGIN`` unexpanded).
        defined_versions: version names it defines (``libnvJitLink.so.12``).
        defined: exported (defined, global or weak) dynamic symbols as
            ``name@version`` (``name@`` when unversioned).
        needs: (file, version, symbol) of each undefined versioned symbol; a
            symbol without version info is recorded with version "".
        needed_versions: file -> version names required from it (``.gnu.version_r``).
        error: why the file could not be read (then the rest is empty).
    """

    elf_class: int | None = None
    machine: str | None = None
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    defined_versions: frozenset[str] = frozenset()
    defined: frozenset[str] = frozenset()
    needs: tuple[tuple[str, str, str], ...] = ()
    needed_versions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    error: str | None = None


def expand_origin(entry: str, origin: str) -> str:
    """``$ORIGIN/../lib`` with ``origin`` = ``/a/b`` -> ``/a/lib`` (also ``${ORIGIN}``)."""
    out = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
    return os.path.normpath(out) if out else out


def read_elf(files: Files, path: str, symbols: bool = True) -> ElfInfo:
    """Parse ``path`` (inside the root). Never raises for a bad file: ``error`` says why.

    ``symbols=False`` skips the dynamic symbol table (``defined``/``needs`` stay
    empty): enough for class, machine, SONAME, NEEDED and the search paths, and
    much cheaper on the large CUDA libraries.
    """
    real = files.realpath(path)
    host = str(files.host_path(real))
    try:
        st = os.stat(host)
    except OSError as exc:
        return ElfInfo(error=f"{path}: {exc.strerror or exc}")
    return _read_cached(host, st.st_size, int(st.st_mtime_ns), symbols)


def warm_up() -> None:
    """Import pyelftools now (about 40 ms), so a collector can pay for it while it waits for the
    probes rather than after them."""
    import elftools.elf.dynamic
    import elftools.elf.elffile
    import elftools.elf.gnuversions
    import elftools.elf.sections  # noqa: F401


@functools.lru_cache(maxsize=1024)
def _read_cached(host: str, _size: int, _mtime_ns: int, symbols: bool = True) -> ElfInfo:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import (
        GNUVerDefSection,
        GNUVerNeedSection,
        GNUVerSymSection,
    )
    from elftools.elf.sections import SymbolTableSection

    try:
        with open(host, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                return ElfInfo(error="not an ELF file")
            fh.seek(0)
            elf = ELFFile(fh)
            info: dict[str, object] = {"elf_class": elf.elfclass, "machine": elf["e_machine"]}
            needed: list[str] = []
            rpath: list[str] = []
            runpath: list[str] = []
            soname = None
            verdefs: dict[int, str] = {}
            verneeds: dict[int, tuple[str, str]] = {}
            needed_versions: dict[str, list] = {}
            dynsym = versym = None
            for sec in elf.iter_sections():
                if isinstance(sec, DynamicSection):
                    for tag in sec.iter_tags():
                        kind = tag.entry.d_tag
                        if kind == "DT_NEEDED":
                            needed.append(tag.needed)  # type: ignore[attr-defined]  # set per tag by pyelftools
                        elif kind == "DT_SONAME":
                            soname = tag.soname  # type: ignore[attr-defined]
                        elif kind == "DT_RPATH":
                            rpath.extend(p for p in tag.rpath.split(":") if p)  # type: ignore[attr-defined]
                        elif kind == "DT_RUNPATH":
                            runpath.extend(p for p in tag.runpath.split(":") if p)  # type: ignore[attr-defined]
                elif isinstance(sec, GNUVerDefSection):
                    for verdef, auxiter in sec.iter_versions():
                        aux = next(iter(auxiter), None)
                        if aux is not None:
                            verdefs[verdef["vd_ndx"]] = aux.name
                elif isinstance(sec, GNUVerNeedSection):
                    for verneed, auxiter in sec.iter_versions():
                        for aux in auxiter:
                            lib = verneed.name or ""
                            verneeds[aux["vna_other"]] = (lib, aux.name)
                            needed_versions.setdefault(lib, []).append(aux.name)
                elif isinstance(sec, GNUVerSymSection):
                    versym = sec
                elif symbols and isinstance(sec, SymbolTableSection) and sec.name == ".dynsym":
                    dynsym = sec
            defined, needs = set(), []
            if dynsym is not None:
                for i, sym in enumerate(dynsym.iter_symbols()):
                    if i == 0 or not sym.name:
                        continue
                    bind = sym["st_info"]["bind"]
                    if bind not in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE"):
                        continue
                    ndx = 1
                    if versym is not None:
                        raw = versym.get_symbol(i)["ndx"]
                        ndx = raw if isinstance(raw, int) else (0 if raw == "VER_NDX_LOCAL" else 1)
                        ndx &= 0x7FFF
                    if sym["st_shndx"] == "SHN_UNDEF":
                        if ndx in verneeds:
                            lib, ver = verneeds[ndx]
                            needs.append((lib, ver, sym.name))
                    else:
                        defined.add(f"{sym.name}@{verdefs.get(ndx, '') if ndx > 1 else ''}")
            return ElfInfo(
                elf_class=info["elf_class"],  # type: ignore[arg-type]
                machine=info["machine"],  # type: ignore[arg-type]
                soname=soname,
                needed=tuple(needed),
                rpath=tuple(rpath),
                runpath=tuple(runpath),
                defined_versions=frozenset(v for k, v in verdefs.items() if k > 1),
                defined=frozenset(defined),
                needs=tuple(needs),
                needed_versions={k: tuple(v) for k, v in needed_versions.items()},
            )
    except (ELFError, OSError, ValueError, KeyError, AssertionError) as exc:
        return ElfInfo(error=f"unreadable ELF: {exc}")
    except Exception as exc:  # pyelftools raises assorted errors on truncated files
        return ElfInfo(error=f"unreadable ELF: {type(exc).__name__}: {exc}")
