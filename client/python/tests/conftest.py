"""Fixtures: a memory-only lapsed per test and a client of it."""

import pytest
from lapse_testing import LapsedProcess

import lapse


@pytest.fixture
def lapsed():
    process = LapsedProcess()
    yield process
    process.kill()


@pytest.fixture
def client(lapsed):
    with lapse.Client(lapsed.address) as c:
        yield c
