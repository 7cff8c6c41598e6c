#!/usr/bin/env python3
"""bench.py: the benchmark's client side (bench/run.sh drives it). Subcommands:

  create N         N pools of 3 members (member m0 resident, m1 and m2 at 0) in namespaces of
                   at most PER_NS pools (bench-0, bench-1, ...), 8 connections in parallel
  wait-members N   until the simulators report N members Ready and 2N Stopped
  coldstart N OUT  watches pools; writes OUT once every pool's status shows a resident that is
                   Ready (writes OUT.ready when its watch is in place, before the operator starts)
  swaps N COUNT OUT  COUNT swaps one after another over the pools, each requested through the
                   pool's annotation (as the router does), seen through watches on
                   InferenceServices, Pods and pools; per swap the external reaction latencies
  hung N K COUNT OUT  the same COUNT swaps over pools 0..N-K-1 while the incumbents of the last K
                   pools hang their idle probes (simulator annotation probe: hang) with a swap
                   requested in each, so the operator is stuck probing them until its probe
                   timeout; then the hang is released and those K swaps must complete too
  holdback N COUNT OUT  COUNT members scaled to 1 beside their pool's resident (as `kubectl scale`),
                   one after another, each swap waited for
  window LOG REQUESTER OPERATOR HOLDBACK_JSON  from the audit log, how long each of those members
                   stood at 1 replica (requester's PATCH to the operator's hold-back PATCH)
  audit LOG USER WINDOWS...  requests by USER in the audit log per window
Times are wall-clock ns (time.time_ns) so they line up with the audit log.
"""
import json
import os
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import kube

PER_NS = int(os.environ.get("BENCH_PER_NS", "1000"))
KCFG = os.environ.get("KUBECONFIG")
LABEL = "inference.llmkube.dev/service"
REQUEST = "modelpool-operator.dev/request"
PROBE = "sim.modelpool.test/probe"


def ns_of(i):
    return f"bench-{i // PER_NS}"


def namespaces(n):
    return sorted({ns_of(i) for i in range(n)}, key=lambda s: int(s.split("-")[1]))


def member(i, m):
    return f"p{i}-m{m}"


def pool(i):
    return f"p{i}"


def isvc_obj(ns, name, replicas):
    return {
        "apiVersion": kube.GROUP, "kind": "InferenceService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"modelRef": name, "runtime": "llamacpp", "replicas": replicas,
                 "endpoint": {"port": 8080}, "resources": {"gpu": 1}},
    }


def pool_obj(ns, i):
    return {
        "apiVersion": kube.GROUP, "kind": "ModelPool",
        "metadata": {"name": pool(i), "namespace": ns},
        "spec": {"members": [{"inferenceServiceRef": {"name": member(i, m)}} for m in range(3)],
                 "default": member(i, 0), "swapPolicy": "sticky", "gpu": 1, "swapBudget": "300s"},
    }


_local = threading.local()


def client():
    c = getattr(_local, "c", None)
    if c is None:
        c = _local.c = kube.Client(KCFG)
    return c


def cmd_create(n):
    n = int(n)
    t0 = time.time()
    c = client()
    for ns in namespaces(n):
        c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def one_isvc(k):
        i, m = divmod(k, 3)
        ns = ns_of(i)
        client().create(kube.path("inferenceservices", ns), isvc_obj(ns, member(i, m), 1 if m == 0 else 0))

    def one_pool(i):
        ns = ns_of(i)
        client().create(kube.path("modelpools", ns), pool_obj(ns, i))

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(one_isvc, range(3 * n), chunksize=64))
        list(ex.map(one_pool, range(n), chunksize=64))
    dt = time.time() - t0
    print(f"created {n} pools and {3 * n} members in {dt:.1f} s ({4 * n / dt:.0f} objects/s)")


def list_all(c, resource, group=kube.GROUP, selector=None):
    items, cont = [], ""
    while True:
        q = "?limit=500" + (f"&continue={cont}" if cont else "") + (f"&labelSelector={selector}" if selector else "")
        body = c.get(kube.path(resource, group=group) + q)
        items += body.get("items") or []
        cont = body["metadata"].get("continue")
        if not cont:
            return items, body["metadata"]["resourceVersion"]


def cmd_wait_members(n, deadline_s="1800"):
    n, end = int(n), time.time() + int(deadline_s)
    c = client()
    while True:
        items, _ = list_all(c, "inferenceservices")
        phases = {}
        for it in items:
            p = (it.get("status") or {}).get("phase")
            phases[p] = phases.get(p, 0) + 1
        pods, _ = list_all(c, "pods", group="", selector=LABEL)
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
                      and (p.get("status") or {}).get("podIP"))
        if phases.get("Ready", 0) == n and phases.get("Stopped", 0) == 2 * n and running == n:
            print(f"members ready: {phases}, running pods {running}")
            return
        if time.time() > end:
            sys.exit(f"members not ready in time: {phases}, running pods {running}")
        time.sleep(2)


def pool_done(obj):
    st = obj.get("status") or {}
    meta = obj["metadata"]
    return (st.get("phase") == "Ready" and st.get("residentMember")
            and st.get("observedGeneration") == meta.get("generation"))


def cmd_coldstart(n, out, deadline_s="3600"):
    n = int(n)
    c = client()
    items, rv = list_all(c, "modelpools")
    done = {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in items if pool_done(o)}
    first = [None]
    open(out + ".ready", "w").write(str(time.time_ns()))
    end = time.time() + int(deadline_s)

    def on_event(t, typ, obj):
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if typ != "DELETED" and pool_done(obj):
            if first[0] is None:
                first[0] = t
            done.add(key)
        else:
            done.discard(key)

    last = None
    while len(done) < n and time.time() < end:
        rv = c.watch(kube.path("modelpools"), rv, lambda t, ty, o: on_event(t, ty, o),
                     lambda: len(done) >= n, timeout_s=300)
    last = time.time_ns()
    json.dump({"pools_done": len(done), "t_first_ns": first[0], "t_all_ns": last}, open(out, "w"))
    if len(done) < n:
        sys.exit(f"only {len(done)} of {n} pools done before the deadline")


class Watches:
    """Watches on members, their Pods and pools, recording what the swaps need."""

    def __init__(self):
        self.lock = threading.Condition()
        self.isvc = []  # (t, key, replicas)
        self.pod_del = []  # (t, member key, pod name)
        self.requests = []  # (t, pool key, member its request annotation names)
        self.pools = {}  # key -> (phase, resident, pending)
        self.deferred = {}  # key -> reason of a SwapDeferred=True condition, or None
        self.stop = False
        self.threads = []

    def start(self):
        c = client()
        for resource, group, sel in (("inferenceservices", kube.GROUP, None),
                                     ("pods", "", LABEL),
                                     ("modelpools", kube.GROUP, None)):
            items, rv = list_all(c, resource, group, sel)
            if resource == "modelpools":
                for o in items:
                    self._pool(o)
            th = threading.Thread(target=self._run, args=(resource, group, sel, rv), daemon=True)
            th.start()
            self.threads.append(th)
        time.sleep(0.5)

    def _pool(self, o):
        st = o.get("status") or {}
        key = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        self.pools[key] = (st.get("phase"), st.get("residentMember"), st.get("pendingMember"))
        self.deferred[key] = next((c.get("reason") for c in st.get("conditions") or []
                                   if c.get("type") == "SwapDeferred" and c.get("status") == "True"), None)
        return key

    def _on(self, resource, t, typ, o):
        meta = o["metadata"]
        with self.lock:
            if resource == "inferenceservices" and typ == "MODIFIED":
                r = (o.get("spec") or {}).get("replicas", 1)
                self.isvc.append((t, f"{meta['namespace']}/{meta['name']}", r))
            elif resource == "pods" and typ == "DELETED":
                svc = (meta.get("labels") or {}).get(LABEL)
                self.pod_del.append((t, f"{meta['namespace']}/{svc}", meta["name"]))
            elif resource == "modelpools":
                key = self._pool(o)
                rq = (meta.get("annotations") or {}).get(REQUEST)
                if rq and typ != "DELETED":
                    self.requests.append((t, key, rq))
            self.lock.notify_all()

    def _run(self, resource, group, sel, rv):
        c = kube.Client(KCFG)
        path = kube.path(resource, group=group) + (f"?labelSelector={sel}" if sel else "")
        while not self.stop:
            try:
                rv = c.watch(path, rv, lambda t, ty, o: self._on(resource, t, ty, o), lambda: self.stop)
            except kube.ApiError as e:
                print(f"watch {resource}: {e}", file=sys.stderr)
                return


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def swap_one(w, c, i):
    """One swap in pool i, requested through the pool's annotation, waited for (60 s at most) and
    timed from the watches; None when the pool was not Ready with a resident."""
    ns, key = ns_of(i), f"{ns_of(i)}/{pool(i)}"
    with w.lock:
        phase, resident, _ = w.pools.get(key, (None, None, None))
    if phase != "Ready" or not resident:
        print(f"skip {key}: {phase} {resident}", file=sys.stderr)
        return None
    m = int(resident.rsplit("m", 1)[1])
    target = member(i, (m + 1) % 3)
    tkey, ikey = f"{ns}/{target}", f"{ns}/{resident}"
    with w.lock:
        mark_isvc, mark_pod, mark_rq = len(w.isvc), len(w.pod_del), len(w.requests)
    t_req = time.time_ns()
    c.merge_patch(kube.path("modelpools", ns, pool(i)), {"metadata": {"annotations": {REQUEST: target}}})
    end = time.time() + 60
    with w.lock:
        while time.time() < end:
            ph, res, pend = w.pools.get(key, (None, None, None))
            if ph == "Ready" and res == target and not pend:
                break
            w.lock.wait(1)
        t_done = time.time_ns()
        ev = w.isvc[mark_isvc:]
        pods = w.pod_del[mark_pod:]
        rqs = w.requests[mark_rq:]
    s = {"pool": key, "from": ikey, "to": tkey, "t_req": t_req, "t_done": t_done, "ok": res == target}
    # (a): the request seen (the pool's annotation naming the target), then the incumbent's
    # scale-down seen (-> 0): what the operator's histogram times on path a.
    t_a0 = next((t for t, k, m in rqs if k == key and m == target), None)
    t_a1 = next((t for t, k, r in ev if k == ikey and r == 0 and t_a0 and t >= t_a0), None)
    # (b): the incumbent's last Pod gone, then the target scaled to 1 by the operator.
    dels = [t for t, k, _ in pods if k == ikey]
    t_b0 = dels[-1] if dels else None
    t_b1 = next((t for t, k, r in ev if k == tkey and r == 1 and t_b0 and t >= t_b0), None)
    s.update(t_a0=t_a0, t_a1=t_a1, t_b0=t_b0, t_b1=t_b1)
    time.sleep(0.05)  # let the swap's tail (status writes, Events) settle before the next
    return s


def order(n, count):
    """Pool indices for count swaps over n pools, spread round-robin."""
    step = max(1, n // min(n, count))
    return [((j * step) % n + (j * step) // n % step) % n for j in range(count)]


def summarize(swaps, extra=None):
    a = [(s["t_a1"] - s["t_a0"]) / 1e6 for s in swaps if s["t_a0"] and s["t_a1"]]
    b = [(s["t_b1"] - s["t_b0"]) / 1e6 for s in swaps if s["t_b0"] and s["t_b1"]]
    done = [(s["t_done"] - s["t_req"]) / 1e6 for s in swaps if s["ok"]]
    summary = {
        "swaps": len(swaps), "ok": sum(1 for s in swaps if s["ok"]),
        "a_n": len(a), "a_p50_ms": pct(a, 50), "a_p99_ms": pct(a, 99), "a_max_ms": max(a, default=None),
        "b_n": len(b), "b_p50_ms": pct(b, 50), "b_p99_ms": pct(b, 99), "b_max_ms": max(b, default=None),
        "swap_p50_ms": pct(done, 50), "swap_p99_ms": pct(done, 99), "swap_max_ms": max(done, default=None),
        "t_start_ns": swaps[0]["t_req"] if swaps else None, "t_end_ns": swaps[-1]["t_done"] if swaps else None,
    }
    summary.update(extra or {})
    return summary


def cmd_swaps(n, count, out):
    n, count = int(n), int(count)
    w = Watches()
    w.start()
    c = client()
    swaps = [s for s in (swap_one(w, c, i) for i in order(n, count)) if s]
    w.stop = True
    summary = summarize(swaps)
    json.dump({"summary": summary, "swaps": swaps}, open(out, "w"), indent=1)
    print(json.dumps(summary))


def holdback_one(w, c, i):
    """Pool i's next member scaled to 1 as `kubectl scale` does (a merge patch of spec.replicas),
    beside the resident; the operator holds it back at once, then swaps to it. Waited for (60 s at
    most); None when the pool was not Ready with a resident."""
    ns, key = ns_of(i), f"{ns_of(i)}/{pool(i)}"
    with w.lock:
        phase, resident, _ = w.pools.get(key, (None, None, None))
    if phase != "Ready" or not resident:
        print(f"skip {key}: {phase} {resident}", file=sys.stderr)
        return None
    target = member(i, (int(resident.rsplit("m", 1)[1]) + 1) % 3)
    t_req = time.time_ns()
    c.merge_patch(kube.path("inferenceservices", ns, target), {"spec": {"replicas": 1}})
    ok = bool(not wait_pools(w, [key], lambda k: w.pools.get(k, (None,))[:2] == ("Ready", target)
                             and not w.pools[k][2], 60))
    time.sleep(0.05)
    return {"pool": key, "ns": ns, "member": target, "t_req": t_req, "t_done": time.time_ns(), "ok": ok}


def cmd_holdback(n, count, out):
    """count scales of a member beside its pool's resident, one after another (the window each
    stays at 1 comes from the audit log: cmd_window)."""
    n, count = int(n), int(count)
    w = Watches()
    w.start()
    c = client()
    scales = [s for s in (holdback_one(w, c, i) for i in order(n, count)) if s]
    w.stop = True
    json.dump({"scales": scales, "t_start_ns": scales[0]["t_req"] if scales else None,
               "t_end_ns": scales[-1]["t_done"] if scales else None}, open(out, "w"), indent=1)
    print(json.dumps({"scales": len(scales), "ok": sum(s["ok"] for s in scales)}))


def cmd_window(log, requester, operator, holdback_json):
    """Per scale of cmd_holdback, how long the member's replicas stood at 1 on the API server: from
    the requester's PATCH to the operator's next PATCH of that member (its hold-back to 0), each
    taken at its completion in the audit log. Prints n and p50/p99/max in ms as JSON."""
    mine = [e for e in audit_events(log, requester) if e["verb"] == "patch" and e["code"] == 200]
    ops = [e for e in audit_events(log, operator) if e["verb"] == "patch" and e["code"] == 200
           and e["res"] == "inferenceservices"]
    ops.sort(key=lambda e: e["t1"])
    writes = [e for e in audit_events(log, operator) if e["verb"] != "watch"]
    win, api = [], []
    for s in json.load(open(holdback_json))["scales"]:
        up = next((e for e in mine if e["res"] == "inferenceservices" and e["ns"] == s["ns"]
                   and e["name"] == s["member"] and e["t0"] >= s["t_req"]), None)
        down = up and next((e for e in ops if e["ns"] == s["ns"] and e["name"] == s["member"]
                            and e["t1"] >= up["t1"]), None)
        if down:
            win.append((down["t1"] - up["t1"]) / 1e6)
            # the API server's share: the operator's requests in flight in the window (its
            # status write, the hold-back itself); the rest is the operator's own time and the
            # watch event's way to it
            api.append(union_ms([(e["t0"], e["t1"]) for e in writes if e["ns"] == s["ns"]
                                 and e["t1"] > up["t1"] and e["t0"] < down["t1"]], up["t1"], down["t1"]))
    own = [w - a for w, a in zip(win, api)]
    print(json.dumps({"n": len(win), "p50_ms": pct(win, 50), "p99_ms": pct(win, 99),
                      "max_ms": max(win, default=None), "api_p50_ms": pct(api, 50),
                      "api_p99_ms": pct(api, 99), "own_p50_ms": pct(own, 50),
                      "own_p99_ms": pct(own, 99)}))


def wait_pools(w, keys, ok, deadline_s):
    """Until ok(key) holds for every key (under w.lock), or the deadline; the keys it does not hold for."""
    end = time.time() + deadline_s
    with w.lock:
        while True:
            left = [k for k in keys if not ok(k)]
            if not left or time.time() >= end:
                return left
            w.lock.wait(1)


def scrape():
    """The operator's modelpool_ series from BENCH_METRICS_URL (plain HTTP), or "" without it."""
    url = os.environ.get("BENCH_METRICS_URL")
    if not url:
        return ""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError as e:
        print(f"scrape {url}: {e}", file=sys.stderr)
        return ""
    return "".join(line + "\n" for line in text.splitlines() if line.startswith("modelpool_"))


def cmd_hung(n, k, count, out):
    n, k, count = int(n), int(k), int(count)
    if k >= n:
        sys.exit(f"hung: {k} hung pools leave none of {n} to measure")
    # The operator's histograms are read before and after the measured swaps (before the hung
    # pools are released, so their own swaps are not in the difference).
    metrics_before = scrape()
    w = Watches()
    w.start()
    c = client()
    hung, targets = list(range(n - k, n)), {}
    with w.lock:
        residents = {i: w.pools.get(f"{ns_of(i)}/{pool(i)}", (None, None, None))[1] for i in hung}
    if not all(residents.values()):
        sys.exit(f"hung: a pool to hang has no resident: {residents}")
    for i in hung:
        c.merge_patch(kube.path("inferenceservices", ns_of(i), residents[i]), {"metadata": {"annotations": {PROBE: "hang"}}})
    # The simulator must see the hang before the operator probes (else the probe is answered and
    # that pool simply swaps, which the IdleCheckFailed wait below would catch).
    time.sleep(1)
    for i in hung:
        m = int(residents[i].rsplit("m", 1)[1])
        targets[i] = member(i, (m + 1) % 3)
        c.merge_patch(kube.path("modelpools", ns_of(i), pool(i)), {"metadata": {"annotations": {REQUEST: targets[i]}}})
    keys = [f"{ns_of(i)}/{pool(i)}" for i in hung]
    # Every hung pool has been through one probe timeout: from here on the operator keeps probing
    # them (re-probed once the failed result is 2 s old), each probe holding a reconcile slot.
    t_hung0 = time.time_ns()
    left = wait_pools(w, keys, lambda key: w.deferred.get(key) == "IdleCheckFailed", 60)
    if left:
        sys.exit(f"hung: no IdleCheckFailed within 60 s in {left}")
    t_hung = time.time_ns()
    swaps = [s for s in (swap_one(w, c, i) for i in order(n - k, count)) if s]
    not_failing = wait_pools(w, keys, lambda key: w.deferred.get(key) == "IdleCheckFailed", 0)
    time.sleep(1)  # the last swap's tail: its clocks are stamped before the pool shows it done
    metrics_after = scrape()
    # Released, the held probes are answered idle and the K swaps complete.
    t_rel = time.time_ns()
    for i in hung:
        c.merge_patch(kube.path("inferenceservices", ns_of(i), residents[i]), {"metadata": {"annotations": {PROBE: None}}})
    target_of = {f"{ns_of(i)}/{pool(i)}": targets[i] for i in hung}

    def swapped(key):
        ph, res, pend = w.pools.get(key, (None, None, None))
        return ph == "Ready" and res == target_of[key] and not pend

    left = wait_pools(w, keys, swapped, 120)
    t_rel_done = time.time_ns()
    w.stop = True
    summary = summarize(swaps, {
        "hung": k, "hung_first_failed_s": round((t_hung - t_hung0) / 1e9, 2),
        "hung_still_failing_at_end": len(keys) - len(not_failing), "hung_completed_after_release": len(keys) - len(left),
        "hung_release_s": round((t_rel_done - t_rel) / 1e9, 2),
        "metrics_before": metrics_before, "metrics_after": metrics_after,
    })
    json.dump({"summary": summary, "swaps": swaps}, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in summary.items() if not k.startswith("metrics")}))


def parse_ts(s):
    # 2024-01-02T03:04:05.123456Z -> ns
    from datetime import datetime, timezone
    base, _, frac = s.rstrip("Z").partition(".")
    t = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return int(t) * 10**9 + int((frac or "0").ljust(9, "0")[:9])


def audit_events(log, user):
    with open(log) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("stage") != "ResponseComplete" or (e.get("user") or {}).get("username") != user:
                continue
            t0 = parse_ts(e["requestReceivedTimestamp"])
            t1 = parse_ts(e["stageTimestamp"])
            o = e.get("objectRef") or {}
            res = o.get("resource", "") + ("/" + o["subresource"] if o.get("subresource") else "")
            yield {"t0": t0, "t1": t1, "verb": e.get("verb"), "res": res, "name": o.get("name"),
                   "ns": o.get("namespace"),
                   "code": (e.get("responseStatus") or {}).get("code")}


def cmd_audit(log, user, *windows):
    """windows: NAME:START_NS:END_NS; prints JSON {name: {verb/resource: count, ...}}."""
    ws = []
    for w in windows:
        name, a, b = w.split(":")
        ws.append((name, int(a), int(b)))
    res = {name: {"total": 0, "by": {}, "api_ms": 0.0} for name, _, _ in ws}
    for e in audit_events(log, user):
        for name, a, b in ws:
            if a <= e["t0"] <= b:
                r = res[name]
                if e["verb"] == "watch":
                    k = f"watch {e['res']}"
                else:
                    r["total"] += 1
                    r["api_ms"] += (e["t1"] - e["t0"]) / 1e6
                    k = f"{e['verb']} {e['res']} {e['code']}"
                r["by"][k] = r["by"].get(k, 0) + 1
    print(json.dumps(res))


def union_ms(intervals, a, b):
    """Length (ms) of the union of the intervals clipped to [a, b]."""
    total, end = 0, a
    for t0, t1 in sorted(intervals):
        t0, t1 = max(t0, end), min(t1, b)
        if t1 > t0:
            total += t1 - t0
            end = t1
    return total / 1e6


def cmd_own(log, user, swaps_json):
    """Per swap, each path from the watch event that starts it to the API server receiving the
    operator's PATCH that ends it, split into the API server's time (the union of the operator's
    requests in flight, as the audit log times them) and the rest: the operator's own time (plus
    loopback and TLS, and for (a) the idle probe). Prints p50/p99/max of both paths as JSON."""
    ev = [e for e in audit_events(log, user) if e["verb"] != "watch"]
    ev.sort(key=lambda e: e["t0"])
    out = {}
    for p, start, end_member in (("a", "t_a0", "from"), ("b", "t_b0", "to")):
        own, total, api = [], [], []
        for s in json.load(open(swaps_json))["swaps"]:
            t0 = s.get(start)
            if not t0:
                continue
            ns, name = s[end_member].split("/")
            end = next((e for e in ev if e["t0"] >= t0 and e["res"] == "inferenceservices"
                        and e["verb"] == "patch" and e["name"] == name and e["ns"] == ns
                        and e["code"] == 200), None)
            # A PATCH after the pool was seen done belongs to a later swap: the watcher saw the
            # start event after the API server had the PATCH (its own lag), so the swap is left out.
            if not end or end["t0"] > s["t_done"]:
                continue
            busy = union_ms([(e["t0"], e["t1"]) for e in ev if e["t1"] > t0 and e["t0"] < end["t0"]], t0, end["t0"])
            tot = (end["t0"] - t0) / 1e6
            total.append(tot)
            api.append(busy)
            own.append(tot - busy)
        out[p] = {"n": len(own), "own_p50_ms": pct(own, 50), "own_p99_ms": pct(own, 99), "own_max_ms": max(own, default=None),
                  "total_p50_ms": pct(total, 50), "total_p99_ms": pct(total, 99),
                  "api_p50_ms": pct(api, 50), "api_p99_ms": pct(api, 99)}
    print(json.dumps(out))


if __name__ == "__main__":
    cmds = {"create": cmd_create, "wait-members": cmd_wait_members, "coldstart": cmd_coldstart,
            "swaps": cmd_swaps, "hung": cmd_hung, "audit": cmd_audit, "own": cmd_own,
            "holdback": cmd_holdback, "window": cmd_window}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
