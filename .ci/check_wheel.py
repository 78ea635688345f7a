"""Check a built pylowbit wheel's contents: python3 .ci/check_wheel.py WHEEL [SDIST].

- every Python source of the package, the extension modules, liblowbit, every public header, the
  Cython declarations other projects cimport, and the pkg-config file are inside;
- liblowbit holds every ISA variant of its architecture: an instruction only that variant's code
  uses appears in its disassembly (the wheel's library is stripped: no symbol names to look for);
- with SDIST: every file git tracks outside the excluded directories is in the sdist.
Whether baseline code uses instructions beyond the baseline (-march=native) is checked by running
the installed wheel under emulated CPUs (.ci/run: qemu-x86_64 -cpu Nehalem / Haswell)."""
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# per architecture: objdump to use, and per variant a pattern only its code produces
VARIANTS = {
    "x86_64": ("objdump", {"avx2": "%ymm", "avx512 (zmm registers)": "%zmm", "avx512vnni": "vpdpbusd",
                           "avxvnni (VEX vpdpbusd)": "{vex} vpdpbusd"}),
    "aarch64": ("aarch64-linux-gnu-objdump", {"neon": ".16b", "dotprod": "sdot", "i8mm": "smmla"}),
}


def tracked(*paths):
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [p for p in out.splitlines() if p]


def check_wheel(path: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        want = [p for p in tracked("pylowbit") if p.endswith((".py", ".pxd"))]
        want += ["pylowbit/include/" + p.relative_to(ROOT / "native/include").as_posix()
                 for p in (ROOT / "native/include").rglob("*.h")]
        want += ["pylowbit/pkgconfig/lowbit.pc"]
        problems += [f"missing {w}" for w in want if w not in names]
        for mod in sorted({Path(p).stem for p in tracked("pylowbit") if p.endswith(".pyx")}):
            if not any(n.startswith(f"pylowbit/{mod}.") and n.endswith(".so") for n in names):
                problems.append(f"missing extension module {mod}")
        libs = [n for n in names if Path(n).name.startswith("liblowbit") and ".so" in n]
        if not libs:
            return problems + ["missing liblowbit"]
        arch = next((a for a in VARIANTS if a in path.name), None)
        if arch is None:
            return problems + [f"no known architecture in the wheel's name {path.name}"]
        objdump, patterns = VARIANTS[arch]
        with tempfile.TemporaryDirectory() as tmp:
            lib = Path(z.extract(libs[0], tmp))
            code = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True,
                                  text=True, check=True).stdout
        for v, pattern in patterns.items():
            if pattern not in code:
                problems.append(f"liblowbit lacks the {v} variant (no {pattern!r} in its code)")
        pc = z.read("pylowbit/pkgconfig/lowbit.pc").decode() if "pylowbit/pkgconfig/lowbit.pc" in names else ""
        if pc and ("-llowbit" not in pc or "${pcfiledir}" not in pc):
            problems.append("lowbit.pc does not link -llowbit relative to its own directory")
    return problems


def check_sdist(path: Path) -> list[str]:
    with tarfile.open(path) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    excluded = ("build/", "dist/", ".ci/")
    return [f"sdist lacks {p}" for p in tracked() if not p.startswith(excluded) and p not in names]


def main(argv):
    if not 1 <= len(argv) <= 2:
        sys.exit(__doc__)
    problems = check_wheel(Path(argv[0]))
    if len(argv) == 2:
        problems += check_sdist(Path(argv[1]))
    for p in problems:
        print(f"check_wheel: {p}")
    if problems:
        sys.exit(1)
    print(f"check_wheel: {Path(argv[0]).name}: contents complete"
          + (f"; {Path(argv[1]).name} holds every tracked file" if len(argv) == 2 else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
