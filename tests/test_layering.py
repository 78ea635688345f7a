"""No circle among native/ files and pylowbit/ modules (tools/check_cycles.py).

The include and import graphs are read from the sources here; the call graph needs a build's
object files, so the C test run checks it (ctest's check_cycles: nm on liblowbit's objects)."""
import importlib.util
from pathlib import Path

import pytest

# The graphs are of the source tree: a run against an installed wheel deselects these (.ci/run).
pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def check_cycles():
    """tools/check_cycles.py, loaded when a test of the source tree runs (not at collection)."""
    spec = importlib.util.spec_from_file_location("check_cycles", ROOT / "tools" / "check_cycles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_finds_a_circle(check_cycles):
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert sorted(check_cycles.cycles(g)) == [["a", "b", "c"], ["d"]]


def test_no_include_circle_in_native(check_cycles):
    g = check_cycles.include_graph()
    assert "native/src/packed.h" in g["native/src/internal.h"]  # the graph was read
    assert check_cycles.cycles(g) == []


def test_no_import_circle_in_pylowbit(check_cycles):
    g = check_cycles.import_graph()
    assert "pylowbit._lowbit" in g["pylowbit.core"]
    assert check_cycles.cycles(g) == []


def test_reference_is_a_leaf_by_includes(check_cycles):
    """ref/ sources include only ref/'s, the format headers and the internal plumbing headers;
    never a dispatcher, pack or kernel source."""
    g = check_cycles.include_graph()
    for src, targets in g.items():
        if src.startswith("native/src/ref/"):
            for t in targets:
                assert not t.endswith(".c") and "/x86/" not in t and "/arm/" not in t, (src, t)
