"""Fixtures shared by the Python tests: one real Zipkin server per session (see
`zipkin_server.py`), used by `test_zipkin_server.py` and `test_send.py`, one real Jaeger v2
(see `jaeger_server.py`), used by `test_jaeger_server.py`, and the runs of real MPI programs
(see `real_programs.py`), made once per session for every test that reads them."""

import pytest

import jaeger_server
import real_programs
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


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory):
    """`real_programs.Runs`: `real_runs.traced(name)` is the trace files of
    `real_programs.PROGRAMS[name]`, `real_runs.counted(name)` the PMPI counter's counts per rank,
    each run once per session, on first use."""
    return real_programs.Runs(tmp_path_factory.mktemp("real-programs"))


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: a long run (about 70-90 s) against real servers; part of the test command")
