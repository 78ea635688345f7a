"""Measurement figures in code comments (python bench/count_comment_figures.py native pylowbit): ratios (1.10x, 0.958 / 0.868), percentages, machine
names, under the given directories (C comments in .c/.h/.inc, # comments in .pyx/.pxd)."""
import re, sys, pathlib
FIG = re.compile(r"\b\d+\.\d+(\s?-\s?\d+\.\d+)?x\b|\b0\.\d{2,3}\s?/\s?0\.\d{2,3}|\b\d+(\.\d+)?\s?%|\bZen\s?\d|\bXeon\b|this machine|measured here")
total = 0
for root in sys.argv[1:]:
    for p in sorted(pathlib.Path(root).rglob("*")):
        if p.suffix in (".c", ".h", ".inc"):
            text = "\n".join(m.group(0) for m in re.finditer(r"/\*.*?\*/|//[^\n]*", p.read_text(), re.S))
        elif p.suffix in (".pyx", ".pxd"):
            text = "\n".join(m.group(0) for m in re.finditer(r"#[^\n]*", p.read_text()))
        else:
            continue
        n = sum(1 for _ in FIG.finditer(text))
        if n: print(f"{n:4d} {p}")
        total += n
print("total", total)
