"""Fixtures shared by the test modules."""
import pytest

import pylowbit as lb


@pytest.fixture
def isa():
    """lb.set_isa, with the default variant restored after a test that forces one."""
    before = lb.isa_active()
    yield lb.set_isa
    lb.set_isa(before)


def pytest_addoption(parser):
    parser.addoption("--integrations", action="store_true",
                     help="also collect tests/integrations (needs pylowbit[test-integrations])")


def pytest_ignore_collect(collection_path, config):
    # The runtimes these tests drive are optional extras; without the flag the directory is not
    # collected at all, with it a missing runtime fails at import (CI installs them all).
    if collection_path.name == "integrations" and not config.getoption("--integrations"):
        return True
    return None
