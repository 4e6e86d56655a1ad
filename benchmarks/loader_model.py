"""Cost of the loader model's ELF reads on real CUDA libraries (no GPU needed).

Reads every CUDA-family shared library under a directory (default: the CUDA
toolkit's lib64) with pyelftools, once with the dynamic symbol table and once
without (what the collector does for copies it does not resolve), and prints
milliseconds per library and the ratio. Run: ``python benchmarks/loader_model.py [DIR]``.
"""

from __future__ import annotations

import glob
import sys
import time
from pathlib import Path

from gpudoctor.collect.elfread import _read_cached, read_elf
from gpudoctor.collect.libraries import family_of
from gpudoctor.system import Files


def main() -> None:
    pattern = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda*/lib64"
    libs = sorted(
        p
        for d in glob.glob(pattern)
        for p in glob.glob(f"{d}/*.so*")
        if family_of(Path(p).name) and not Path(p).is_symlink()
    )
    if not libs:
        print(f"no CUDA libraries under {pattern}")
        return
    files = Files(Path("/"))
    for symbols in (False, True):
        _read_cached.cache_clear()
        start = time.perf_counter()
        for p in libs:
            read_elf(files, p, symbols)
        ms = (time.perf_counter() - start) * 1000.0
        print(f"symbols={symbols!s:5}  {len(libs)} libraries  {ms:8.1f} ms  ({ms / len(libs):.1f} ms each)")
        if not symbols:
            base = ms
    print(f"ratio with/without symbols: {ms / base:.1f}x")


if __name__ == "__main__":
    main()
