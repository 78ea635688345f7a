"""`pylowbit info`: version, ISA variants (compiled, supported, active), formats."""
from __future__ import annotations


def add_parser(sub):
    return sub.add_parser("info", help="show version, ISA variants and formats")


def main(args) -> int:
    import pylowbit as lb

    lb.show_runtime()
    print("formats          " + ", ".join(
        f"{f.name}({f.type_id}, {f.bits_per_weight:.4g} bpw)" for f in lb.FORMATS.values()))
    return 0
