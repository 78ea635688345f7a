"""Fixtures shared by the test modules."""
import pytest

import pylowbit as lb


@pytest.fixture
def isa():
    """lb.set_isa, with the default variant restored after a test that forces one."""
    before = lb.isa_active()
    yield lb.set_isa
    lb.set_isa(before)
