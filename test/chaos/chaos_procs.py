"""What the chaos run (chaos.py) works on besides the operator: the admin kubectl, the fault proxy (kept
alive), the kube-apiserver (killed and started again), etcd (compacted), processes through /proc, a member
Pod's idle probe; and the run's clock, log line and files in the state dir."""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def now():
    return time.monotonic()


def say(msg):
    print("chaos: %s %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def kubectl(*args, timeout=60):
    """(ok, stdout) of an admin kubectl call; a failure under faults is counted, never fatal."""
    try:
        p = subprocess.run(["kubectl", "--kubeconfig", os.environ["KUBECONFIG"], "--request-timeout=20s"] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode == 0, p.stdout if p.returncode == 0 else p.stderr
    except subprocess.TimeoutExpired:
        return False, "timeout"


class ProxyHung(Exception):
    pass


def state(name):
    return os.path.join(os.environ["MP_STATE_DIR"], name)


class Toxiproxy:
    """The fault proxy, kept alive. Its control API can stop answering when a toxic is removed under
    traffic (upstream issues 159, 412 and 558, open on v2.5.0), and the process itself can die (a
    panic in ToxicLink.AddToxic, index out of range, seen at 100 pools): a control call unanswered in
    10 s, or a process gone, restarts the proxy (SIGKILL if alive, the same command and ports, the
    proxy defined again), which drops every toxic and cuts every connection through it, a network
    fault of its own, listed in the summary's proxy_restarts; the call is then made once more. Only a
    proxy that fails again right after its restart ends the run (ProxyHung)."""

    def __init__(self):
        self.api = os.environ["MP_TOXI_API"]
        self.proxy = json.loads(os.environ["MP_TOXI_PROXY"])
        self.restarts = []  # (time, why)
        self.pid = self._read_pid()
        # Its command, read while it runs: a dead process has none to read.
        self.argv, self.env, self.cwd = proc_command(self.pid)

    @staticmethod
    def _read_pid():
        with open(state("toxiproxy.pid")) as f:
            return int(f.read())

    def keep_alive(self):
        """Restarts the proxy if its process is gone (called between faults)."""
        if not proc_running(self.pid):
            self._restart("the proxy's process is gone (toxiproxy.log has its last words)")

    def call(self, method, path, body=None):
        try:
            return self._call(method, path, body)
        except ProxyHung as e:
            self._restart(str(e))
        except urllib.error.URLError as e:
            if isinstance(e, urllib.error.HTTPError) or proc_running(self.pid):
                raise
            self._restart("%s %s: the proxy's process is gone" % (method, path))
        return self._call(method, path, body)

    def _call(self, method, path, body=None):
        req = urllib.request.Request(self.api + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.read()
        except (TimeoutError, socket.timeout) as e:
            raise ProxyHung("%s %s: %s" % (method, path, e)) from e
        except urllib.error.URLError as e:
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise ProxyHung("%s %s: %s" % (method, path, e.reason)) from e
            raise

    def _restart(self, why):
        say("the fault proxy failed (%s); restarting it" % why)
        self.restarts.append((time.strftime("%H:%M:%S"), why))
        if proc_running(self.pid):
            try:
                proc_kill(self.pid, "toxiproxy", 30)
            except RuntimeError as e:
                raise ProxyHung(str(e)) from e
        with open(state("toxiproxy.log"), "ab") as log:
            p = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log)
        self.pid = p.pid
        with open(state("toxiproxy.pid"), "w") as f:
            f.write("%d\n" % p.pid)
        deadline = now() + 30
        while True:  # its ports are taken again once it listens (Go listeners set SO_REUSEADDR)
            try:
                self._call("GET", "/version")
                break
            except (urllib.error.URLError, ConnectionError, ProxyHung):
                if p.poll() is not None or now() > deadline:
                    raise ProxyHung("toxiproxy did not come back after a restart; see toxiproxy.log")
                time.sleep(0.2)
        self._call("POST", "/proxies", self.proxy)


def replica_pid(r):
    try:
        with open(state("replica-%s.pid" % r)) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def proc_running(pid):
    """Some thread of pid has not exited (lib.sh _proc_running: a Go server's port closes with its last thread)."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(") ", 1)[1].split()[0] not in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            pass
    return False


def slots_busy(ip, port=8080):
    """The llama.cpp idle probe of a Pod: True when GET /slots shows a slot processing."""
    try:
        with urllib.request.urlopen("http://%s:%d/slots" % (ip, port), timeout=2) as r:
            return any(slot.get("is_processing") for slot in json.load(r))
    except (OSError, ValueError, AttributeError):
        return False


def proc_command(pid):
    """(argv, env, cwd) of a running pid, read from /proc: what it takes to start it again."""
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = dict(e.decode().split("=", 1) for e in f.read().split(b"\0") if b"=" in e)
    return argv, env, os.readlink("/proc/%d/cwd" % pid)


def proc_kill(pid, what, wait_s):
    """SIGKILL pid and wait until no thread of it is left (RuntimeError after wait_s)."""
    os.kill(pid, signal.SIGKILL)
    deadline = now() + wait_s
    while proc_running(pid):
        if now() > deadline:
            raise RuntimeError("%s %d runs %d s after SIGKILL" % (what, pid, wait_s))
        time.sleep(0.1)
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class ApiServer:
    """Kill and restart of the kube-apiserver on the same etcd, as lib.sh stop_apiserver/start_apiserver."""

    def __init__(self):
        self.pid = int(os.environ["MP_APISERVER_PID"])

    def stop(self):
        self.argv, self.env, self.cwd = proc_command(self.pid)
        proc_kill(self.pid, "kube-apiserver", 90)

    def start(self):
        with open(state("kube-apiserver.log"), "ab") as log:
            p = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log, start_new_session=False)
        self.pid = p.pid
        self.proc = p
        with open(state("kube-apiserver.pid"), "w") as f:
            f.write("%d\n" % p.pid)
        deadline = now() + 120
        while not kubectl("get", "--raw", "/readyz")[0]:
            if p.poll() is not None:
                raise RuntimeError("kube-apiserver exited on restart; see kube-apiserver.log")
            if now() > deadline:
                raise RuntimeError("kube-apiserver not ready 120 s after restart")
            time.sleep(0.2)


def etcd_compact():
    url = os.environ["MP_ETCD_URL"]
    body = json.dumps({"key": base64.b64encode(b"/").decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "/v3/kv/range", data=body), timeout=10) as r:
        rev = int(json.load(r)["header"]["revision"])
    body = json.dumps({"revision": str(rev)}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "/v3/kv/compaction", data=body), timeout=30) as r:
            r.read()
    except urllib.error.HTTPError as e:
        if e.code != 400:  # 400: compacted at this revision already (two compactions with no write between)
            raise
    return rev
