#!/usr/bin/env python3
"""healthz_probe: GET URL N times in a row, each on a fresh connection with a TIMEOUT (as kubelet probes:
a new connection each time, 1 s by default), and prints one JSON object: the latency percentiles of the
answered ones in ms and how many failed (no 200 within the timeout). Used by bench/limits.sh."""
import json
import socket
import sys
import time
from urllib.parse import urlsplit


def once(host, port, path, timeout):
    t0 = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(max(0.001, timeout - (time.perf_counter() - t0)))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        ok = data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200")
    except OSError:
        ok = False
    return ok, (time.perf_counter() - t0) * 1000


def main():
    url, n = sys.argv[1], int(sys.argv[2])
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    u = urlsplit(url)
    lat, failed = [], 0
    for _ in range(n):
        ok, ms = once(u.hostname, u.port, u.path or "/", timeout)
        if ok:
            lat.append(ms)
        else:
            failed += 1
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 3) if lat else None

    print(json.dumps({"n": n, "failed": failed, "p50_ms": pct(50), "p99_ms": pct(99),
                      "max_ms": round(lat[-1], 3) if lat else None}))


if __name__ == "__main__":
    main()
