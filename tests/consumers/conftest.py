"""Fixtures shared by the Python tests: one real Zipkin server per session (see
`zipkin_server.py`), used by `test_zipkin_server.py` and `test_send.py`, and one real Jaeger v2
(see `jaeger_server.py`), used by `test_jaeger_server.py`."""

import pytest

import jaeger_server
import zipkin_server


@pytest.fixture(scope="session")
def zipkin(tmp_path_factory):
    """The base URL of a Zipkin server started for this session, stopped at its end."""
    with zipkin_server.serve(tmp_path_factory.mktemp("zipkin")) as base:
        yield base


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory):
    """A Jaeger v2 started for this session (see `jaeger_server.py`): its query, OTLP/HTTP and
    Zipkin URLs; stopped at its end."""
    with jaeger_server.serve(tmp_path_factory.mktemp("jaeger")) as urls:
        yield urls


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: a long run (about 70-90 s) against real servers; part of the test command")
