"""Fixtures shared by the Python tests: one real Zipkin server per session (see
`zipkin_server.py`), used by `test_zipkin_server.py` and `test_send.py`."""

import pytest

import zipkin_server


@pytest.fixture(scope="session")
def zipkin(tmp_path_factory):
    """The base URL of a Zipkin server started for this session, stopped at its end."""
    with zipkin_server.serve(tmp_path_factory.mktemp("zipkin")) as base:
        yield base
