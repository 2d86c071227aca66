"""Helpers of the `turbokv serve` tests: start a server on 127.0.0.1 with a free
port (--port 0; the port is read from its "listening on" line), raw HTTP
requests, /metrics parsing, SIGTERM and the exit code."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time


class Server:
    def __init__(self, binary, *args, start_timeout=120):
        cmd = [binary, "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self.lines = []
        self.port = None
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + "".join(self.lines))
        # Keep draining stdout so the server never blocks on a full pipe.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        # It listens while the model loads: /health is 503 until then, 200 after.
        self.health_statuses = set()
        while time.time() < deadline:
            try:
                status = self.request("GET", "/health", timeout=5)[0]
            except OSError:
                status = -1
            self.health_statuses.add(status)
            if status == 200:
                break
            if status not in (503, -1) or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if 200 not in self.health_statuses:
            self.proc.kill()
            raise RuntimeError(f"server not ready (/health {self.health_statuses}): " +
                               "".join(self.lines))

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes); body: dict (JSON), bytes or None."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def metrics(self, headers=None):
        status, _, data = self.request("GET", "/metrics", headers=headers)
        assert status == 200, (status, data)
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def terminate(self, timeout=60):
        """SIGTERM; the exit code (or None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self._reader.join(5)
            self.proc.stdout.close()

    def output(self):
        return "".join(self.lines)


def sse_events(resp):
    """Yields the JSON of each `data:` line of an SSE http.client response, then
    the string "[DONE]"."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            yield "[DONE]"
            return
        yield json.loads(payload)


def metrics_of(url):
    """/metrics of the server at URL (http://HOST:PORT), as {name: value}."""
    host, port = url.rsplit("/", 1)[-1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
            for ln in text.splitlines() if ln and not ln.startswith("#")}


def free_run(n, also=()):
    """A port P with P .. P+n-1 (and P+k for k in `also`) all free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        ports = list(range(base, base + n)) + [base + k for k in also]
        if max(ports) > 65535:
            continue
        try:
            for p in ports:
                socket.create_server(("127.0.0.1", p)).close()
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free ports")


class Cluster:
    """scripts/cluster/up: N replicas behind vllm-router on loopback; .down() stops them."""

    def __init__(self, binary, n, policy, serve_args, kv_events=False):
        import tempfile
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
        self.scripts = os.path.join(root, "scripts", "cluster")
        self.dir = tempfile.mkdtemp(prefix="tkv-cluster-")
        # Replicas on base .. base+n-1, the router on base+n (its metrics on base+n+1),
        # KV events (--kv-events) on base+100+i.
        self.base = free_run(n + 2, also=range(100, 100 + n) if kv_events else ())
        router_port = self.base + n
        cpus = ["--cpus", "1"] if os.cpu_count() >= n else []
        cmd = [os.path.join(self.scripts, "up"), "-n", str(n), "--policy", policy, "--port",
               str(router_port), "--base-port", str(self.base), "--dir", self.dir, *cpus,
               *(["--kv-events"] if kv_events else []), "--", *serve_args]
        r = subprocess.run(cmd, env=dict(os.environ, TURBOKV=binary), capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"cluster/up failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        self.router = f"http://127.0.0.1:{router_port}"
        self.router_port = router_port
        self.replicas = []  # (pid, url)
        with open(os.path.join(self.dir, "pids")) as f:
            for line in f:
                pid, name, url = line.split()
                if name.startswith("replica"):
                    self.replicas.append((int(pid), url))

    def events_endpoint(self, i):
        return f"tcp://127.0.0.1:{self.base + 100 + i}"

    def down(self):
        subprocess.run([os.path.join(self.scripts, "down"), "--dir", self.dir], timeout=120,
                       check=True, capture_output=True)

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()


def install_router():
    """scripts/cluster/install-router; False (with the reason printed) when it fails."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    r = subprocess.run([os.path.join(root, "scripts", "cluster", "install-router")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("vllm-router could not be installed:\n" + r.stderr)
    return r.returncode == 0
