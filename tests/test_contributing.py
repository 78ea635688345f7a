"""docs/CONTRIBUTING.md's "Add a format" walk-through names every file a new A8 weight format
touches, at most six, and the places generated from formats.h's list name no format.

A listed file is one a new format must edit: it names every format of the list already.  A file
that holds the list's derived forms (the kernel slots, the x86 file-layout kernels' definitions)
must not: a format typed there would be a seventh place to edit."""
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parent.parent


def a8_formats():
    """The (ID, name) pairs of formats.h's LOWBIT_A8_KERNEL_FORMATS."""
    text = (ROOT / "native/include/lowbit/formats.h").read_text()
    body = re.search(r"#define LOWBIT_A8_KERNEL_FORMATS\(F, X\)((?:.*\\\n)*.*\n)", text).group(1)
    return re.findall(r"F\(X, (\w+), (\w+)\)", body)


def walkthrough_files():
    """The file each numbered step of "Add a format" names first."""
    text = (ROOT / "docs/CONTRIBUTING.md").read_text()
    section = text.split("## Add a format", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, flags=re.M)


def test_the_list_is_read():
    fmts = a8_formats()
    assert ("TQ2_0", "tq2_0") in fmts and ("Q8_0", "q8_0") in fmts
    assert len(fmts) == len({i for i, _ in fmts}) >= 8


def test_a_new_format_touches_at_most_six_files():
    files = walkthrough_files()
    assert "native/include/lowbit/formats.h" in files and "native/src/types.c" in files
    assert len(files) == len(set(files)) <= 6
    for f in files:
        assert (ROOT / f).is_file(), f


def test_every_listed_file_names_every_format():
    # The files are read in the test, not at collection: a wheel's test run has no docs/.
    missing = []
    for path in walkthrough_files():
        text = (ROOT / path).read_text()
        for fid, name in a8_formats():
            short = fid.replace("_0", "").replace("_", "")  # x86's F_TQ1, F_I2S, ...
            if not re.search(rf"\b(\w*{fid}|\w*{name}|F_{short})\b", text):
                missing.append((path, fid))
    assert not missing


@pytest.mark.parametrize("path", ["native/src/kernel_table.h", "native/src/x86/file-inl.h",
                                  "native/src/dispatch.c"])
def test_derived_places_name_no_format(path):
    text = (ROOT / path).read_text()
    for fid, name in a8_formats():
        for token in (f"LOWBIT_TYPE_{fid}", f"LOWBIT_K_{fid}", f"gemv_{name}", f"gemm_{name}",
                      f"DEFINE_FILE({name}"):
            assert token not in text, (path, token)
