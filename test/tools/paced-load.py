#!/usr/bin/env python3
# paced-load: steady but gappy chat completions for one model, for e2e tests that need a member busy most of
# the time yet idle now and then (router-fence.test.sh): each client sends a request, waits for its answer,
# pauses a random gap, and again, until the stop file appears. One JSON line per request on --out.
import argparse
import http.client
import json
import os
import random
import threading
import time
import urllib.parse


def paced_client(args, index, lock, out):
    rng = random.Random(args.seed * 1000 + index)
    url = urllib.parse.urlsplit(args.url)
    body = json.dumps({"model": args.model, "max_tokens": args.max_tokens, "messages": []})
    while not os.path.exists(args.stop):
        t0 = time.time()
        line = {"client": index, "model": args.model, "t0_ms": int(t0 * 1000)}
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=args.timeout)
        try:
            conn.request("POST", url.path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            line["code"] = resp.status
            line["retry_after"] = resp.getheader("Retry-After")
            line["pod"] = resp.getheader("X-Sim-Pod")
            if resp.status != 200:
                line["body"] = data.decode("utf-8", "replace")[:300]
        except (OSError, http.client.HTTPException) as e:
            # No answer: a timeout past the budget, or a connection the router dropped.
            line["code"] = 0
            line["error"] = f"{type(e).__name__}: {e}"
        finally:
            conn.close()
        t1 = time.time()
        line["t1_ms"] = int(t1 * 1000)
        line["ms"] = int((t1 - t0) * 1000)
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()
        time.sleep(rng.uniform(args.gap_min_ms, args.gap_max_ms) / 1000.0)


def main():
    p = argparse.ArgumentParser(description="paced chat completions until a stop file appears")
    p.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8080/v1/chat/completions")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, help="one JSON line per request (appended)")
    p.add_argument("--stop", required=True, help="the clients stop once this file exists")
    p.add_argument("--clients", type=int, default=1, help="independent clients, one request each at a time")
    p.add_argument("--max-tokens", type=int, default=3)
    p.add_argument("--gap-min-ms", type=float, default=20)
    p.add_argument("--gap-max-ms", type=float, default=150)
    p.add_argument("--timeout", type=float, default=60, help="per-request timeout, seconds")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.clients < 1 or args.max_tokens < 1 or not 0 <= args.gap_min_ms <= args.gap_max_ms:
        p.error("want --clients >= 1, --max-tokens >= 1 and 0 <= --gap-min-ms <= --gap-max-ms")
    lock = threading.Lock()
    with open(args.out, "a", encoding="utf-8") as out:
        threads = [threading.Thread(target=paced_client, args=(args, i, lock, out)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
