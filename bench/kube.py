"""kube: the smallest Kubernetes API client the benchmark needs (standard library only).

Reads the file-path form of kubeconfig that test/controlplane/start.sh writes, keeps one TLS
connection per Client (make one per thread), and streams watches line by line, timestamping each
event the moment its line is read.
"""
import http.client
import json
import re
import ssl
import time
import urllib.parse

GROUP = "inference.llmkube.dev/v1alpha1"


def read_kubeconfig(path):
    text = open(path).read()

    def field(name):
        m = re.search(r"^\s*" + re.escape(name) + r":\s*(\S+)\s*$", text, re.M)
        if not m:
            raise ValueError(f"{path}: no {name}")
        return m.group(1)

    return {
        "server": field("server"),
        "ca": field("certificate-authority"),
        "cert": field("client-certificate"),
        "key": field("client-key"),
    }


class ApiError(Exception):
    def __init__(self, code, body):
        super().__init__(f"HTTP {code}: {body[:300]!r}")
        self.code = code


class Client:
    def __init__(self, kubeconfig, timeout=60):
        cfg = read_kubeconfig(kubeconfig)
        u = urllib.parse.urlparse(cfg["server"])
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=cfg["ca"])
        self.ctx.load_cert_chain(cfg["cert"], cfg["key"])
        self.timeout = timeout
        self.conn = None

    def _connect(self, timeout=None):
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.ctx, timeout=timeout or self.timeout
        )

    def request(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = ctype
        for attempt in range(3):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if r.status == 429 or r.status >= 500:
                time.sleep(0.2 * (attempt + 1))
                continue
            if ok and r.status not in ok:
                raise ApiError(r.status, raw)
            return r.status, (json.loads(raw) if raw else None)
        raise ApiError(r.status, raw)

    def get(self, path):
        return self.request("GET", path)[1]

    def create(self, path, obj, exist_ok=True):
        code, body = self.request("POST", path, obj, ok=(200, 201, 409) if exist_ok else (200, 201))
        return body

    def merge_patch(self, path, patch):
        return self.request("PATCH", path, patch, ctype="application/merge-patch+json")[1]

    def get_raw(self, path):
        conn = self._connect()
        conn.request("GET", path)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        if r.status != 200:
            raise ApiError(r.status, raw)
        return raw.decode()

    def watch(self, path, rv, on_event, stop, timeout_s=3600):
        """Calls on_event(t_ns, type, obj) for every event from rv on, until stop() is true after an
        event or the server ends the stream; returns the last resourceVersion seen."""
        q = urllib.parse.urlencode(
            {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true",
             "timeoutSeconds": str(timeout_s)}
        )
        sep = "&" if "?" in path else "?"
        conn = self._connect(timeout=timeout_s + 30)
        conn.request("GET", f"{path}{sep}{q}", headers={"Accept": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            raise ApiError(r.status, r.read())
        try:
            while True:
                line = r.readline()
                t = time.time_ns()
                if not line:
                    break
                ev = json.loads(line)
                obj = ev.get("object", {})
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if ev["type"] == "ERROR":
                    raise ApiError(obj.get("code", 0), json.dumps(obj).encode())
                if ev["type"] != "BOOKMARK":
                    on_event(t, ev["type"], obj)
                if stop():
                    break
        finally:
            conn.close()
        return rv


def path(resource, ns=None, name=None, sub=None, group=GROUP):
    base = "/api/v1" if group == "" else f"/apis/{group}"
    p = base + (f"/namespaces/{ns}" if ns else "") + f"/{resource}"
    if name:
        p += f"/{name}"
    if sub:
        p += f"/{sub}"
    return p
