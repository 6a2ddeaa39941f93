"""What the real servers of the consumer tests (Zipkin, Jaeger) share: free ports, plain HTTP
calls, and stopping a server process."""

import socket
import subprocess
import urllib.error
import urllib.request


def free_ports(n):
    """`n` distinct ports the system had free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(port):
    """Whether something accepts connections on `port` of this machine."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def http(method, url, body=None, content_type="application/json", timeout=10):
    """(status, body bytes); HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"Content-Type": content_type} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def stop(server, log):
    """Stops a server process (terminate, then kill after 20 s) and closes its log."""
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()
