#!/usr/bin/env python3
"""The chaos run's driver and judge (test/chaos/chaos.test.sh runs it; README.md there has the figures).
`objects N` prints the pools and members as YAML. `run` drives clients that request members and a fault
schedule drawn from one seed, samples the pools throughout, then quiesces and checks every invariant
(the live slot check is slot-check's; this checks busy unloads, wedged pools, writers, activations).
Beside it: chaos_procs.py, the processes and services it acts on; chaos_audit.py, the writers' check."""

import argparse
import heapq
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

from chaos_audit import audit
from chaos_procs import (ApiServer, ProxyHung, Toxiproxy, etcd_compact, kubectl, now, replica_pid, say, slots_busy,
                         state)

NS = "chaos"
MEMBERS = 3
BUDGET_S = 30
SIM = "sim.modelpool.test/"
# The operator replicas (chaos.test.sh starts one per letter), and those no fault kills or pauses: a spared
# replica lives until it loses the Lease it holds, so its memory can be followed for longer.
REPLICAS = os.environ.get("MP_CHAOS_REPLICAS", "ab")
SPARED = os.environ.get("MP_CHAOS_SPARED", "")
REQUEST = "modelpool-operator.dev/request"
# A pool Swapping longer than its budget plus this, with no condition saying why, is a violation; the
# grace covers a paused leader (25 s) and the lease handover (15 s) during which nobody may write.
SWAP_GRACE_S = 60
QUIESCE_DEADLINE_S = 120
BUSY_WAIT_S = 60  # a busy drain waits this long for the resident's Pod to say busy, else it is dropped
# Router answers that are never right here: every name exists and every body is valid, so 4xx means a
# routing fault; a model_loading 503 without Retry-After breaks the contract; a 200 from another model
# is a request served by the wrong member; a request with no byte back past budget + grace is lost.
ROUTED_BAD = {"400", "404", "405", "413", "503-no-retry-after", "wrong-model", "timeout"}


def pool_name(i):
    return "p%03d" % i


def member_name(i, j):
    return "p%03d-m%d" % (i, j)


def objects(n):
    docs = ["apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n" % NS]
    for i in range(n):
        for j in range(MEMBERS):
            docs.append(
                "apiVersion: inference.llmkube.dev/v1alpha1\nkind: InferenceService\nmetadata:\n"
                "  name: %s\n  namespace: %s\nspec:\n  modelRef: %s\n  runtime: llamacpp\n  replicas: 0\n"
                "  endpoint:\n    port: 8080\n" % (member_name(i, j), NS, member_name(i, j)))
        members = "".join("  - inferenceServiceRef: {name: %s}\n" % member_name(i, j) for j in range(MEMBERS))
        docs.append(
            "apiVersion: inference.llmkube.dev/v1alpha1\nkind: ModelPool\nmetadata:\n  name: %s\n"
            "  namespace: %s\nspec:\n  default: %s\n  swapBudget: %ds\n  members:\n%s"
            % (pool_name(i), NS, member_name(i, 0), BUDGET_S, members))
    return "---\n".join(docs)


# Fault kinds and their weights in the schedule; (lo, hi) the duration range in seconds (0: instant).
FAULTS = {
    "net-reset": (3, (1, 4)),
    "net-stall": (3, (2, 8)),
    "net-slow": (3, (3, 10)),
    "net-drop-watches": (4, (0, 0)),
    "net-cut-streams": (2, (3, 8)),
    "apiserver-restart": (2, (1, 5)),
    "etcd-compact": (3, (0, 0)),
    "operator-kill": (3, (0, 0)),
    "operator-pause": (2, (20, 25)),
    "member-fail": (2, (5, 15)),
    "member-evict": (2, (5, 15)),
    "member-slow-terminate": (2, (10, 20)),
    "member-probe-hang": (2, (5, 15)),
    "member-probe-error": (1, (5, 15)),
    "busy-drain": (3, (3, 8)),
}


def schedule(seed, seconds, pools):
    """The fault schedule: (t, kind, duration, pool, member index, extra) drawn from the seed alone."""
    rng = random.Random(seed)
    kinds = sorted(FAULTS)
    weights = [FAULTS[k][0] for k in kinds]
    out, t = [], 8.0
    mean_gap = 4.0 if pools < 50 else 2.0
    while True:
        t += rng.expovariate(1.0 / mean_gap)
        if t > seconds - 10:
            return out
        k = rng.choices(kinds, weights)[0]
        lo, hi = FAULTS[k][1]
        out.append((round(t, 2), k, round(rng.uniform(lo, hi), 2), rng.randrange(pools), rng.randrange(MEMBERS),
                    rng.random()))


class Run:
    def __init__(self, a):
        self.a = a
        self.t0 = now()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.busy_pools = set()      # pools a fault or a busy drain owns: clients and other faults skip them
        self.inflight = {}           # pool -> client requests being written (a claim waits for none)
        self.activations = []        # (t, pool, member, method, ok)
        self.samples = {}            # pool -> list of (t, phase, resident, pending, conditions)
        self.fault_counts = {}
        self.fault_errors = {}
        self.violations = []
        self.rss = {}                # (who: a, b or r for the router, pid) -> [(t, kib)]
        self.touches = 0
        self.api = ApiServer()
        self.toxi = Toxiproxy()
        self.routed = []             # (t, pool, member, stream, outcome, seconds, detail): router requests
        self.drains = []             # busy drains' threads
        self.drain_outcomes = {}     # drained, never-busy (the Pod did not say busy in time), stopped

    def t(self):
        return now() - self.t0

    def violation(self, what):
        with self.lock:
            self.violations.append("%.1fs %s" % (self.t(), what))
        say("VIOLATION " + what)

    def count(self, kind, ok=True):
        with self.lock:
            d = self.fault_counts if ok else self.fault_errors
            d[kind] = d.get(kind, 0) + 1

    def claim(self, pool):
        with self.lock:
            if pool in self.busy_pools or self.inflight.get(pool):
                return False
            self.busy_pools.add(pool)
            return True

    def release(self, pool):
        with self.lock:
            self.busy_pools.discard(pool)

    # ---- clients ----
    def client(self, k):
        rng = random.Random(self.a.seed * 1000 + k)
        while not self.stop.is_set():
            time.sleep(rng.uniform(0.3, 2.0))
            i = rng.randrange(self.a.pools)
            m = member_name(i, rng.randrange(MEMBERS))
            method = "scale" if rng.random() < self.a.scale_share else "annotate"
            with self.lock:
                if pool_name(i) in self.busy_pools:
                    continue
                self.inflight[pool_name(i)] = self.inflight.get(pool_name(i), 0) + 1
            t = self.t()
            if method == "scale":
                ok, _ = kubectl("-n", NS, "scale", "isvc", m, "--replicas=1")
            else:
                ok, _ = kubectl("-n", NS, "annotate", "modelpool", pool_name(i), "%s=%s" % (REQUEST, m), "--overwrite")
            with self.lock:
                self.inflight[pool_name(i)] -= 1
                self.activations.append((t, pool_name(i), m, method, ok))

    def writer(self):
        """Concurrent writers: metadata changes on pools and members, so the operator's writes meet 409s."""
        rng = random.Random(self.a.seed * 1000 + 999)
        n = 0
        while not self.stop.is_set():
            time.sleep(rng.uniform(0.2, 1.0))
            i = rng.randrange(self.a.pools)
            n += 1
            if rng.random() < 0.5:
                ok, _ = kubectl("-n", NS, "annotate", "modelpool", pool_name(i), "chaos/touch=%d" % n, "--overwrite")
            else:
                ok, _ = kubectl("-n", NS, "annotate", "isvc", member_name(i, rng.randrange(MEMBERS)),
                                "chaos/touch=%d" % n, "--overwrite")
            if ok:
                with self.lock:
                    self.touches += 1

    def router_client(self, k):
        """Chat completions through the router for a random member of a random pool (a third streamed),
        every 0.3-2 s; the pool counts as written to while one is in flight, as for the clients."""
        rng = random.Random(self.a.seed * 1000 + 500 + k)
        while not self.stop.is_set():
            time.sleep(rng.uniform(0.3, 2.0))
            i = rng.randrange(self.a.pools)
            pool, m, stream = pool_name(i), member_name(i, rng.randrange(MEMBERS)), rng.random() < 0.33
            with self.lock:
                if pool in self.busy_pools:
                    continue
                self.inflight[pool] = self.inflight.get(pool, 0) + 1
            t = self.t()
            outcome, detail = self.routed_call(m, stream)
            took = self.t() - t
            with self.lock:
                self.inflight[pool] -= 1
                self.routed.append((t, pool, m, stream, outcome, took, detail))
            if outcome in ROUTED_BAD:
                self.violation("router request for %s (stream=%s) after %.1f s: %s %s" % (m, stream, took, outcome, detail))
            elif took > BUDGET_S + SWAP_GRACE_S:
                self.violation("router answered %s for %s after %.0f s, past budget %d s + %d s" %
                               (outcome, m, took, BUDGET_S, SWAP_GRACE_S))

    def routed_call(self, member, stream):
        """(outcome, detail) of one request through the router: ok, ok-stream, 503-<code>, truncated,
        <http code>, timeout (no byte for budget + grace + 30 s), unreachable; ROUTED_BAD ones are violations."""
        body = {"model": member, "messages": [{"role": "user", "content": "chaos"}], "max_tokens": 8, "stream": stream}
        req = urllib.request.Request(os.environ["MP_CHAOS_ROUTER_URL"] + "/v1/chat/completions", method="POST",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            r = urllib.request.urlopen(req, timeout=BUDGET_S + SWAP_GRACE_S + 30)
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                code = json.loads(text)["error"].get("code") or ""
            except (ValueError, KeyError, TypeError, AttributeError):
                code = ""
            if e.code == 503:
                if code == "model_loading" and not e.headers.get("Retry-After"):
                    return "503-no-retry-after", text[:200]
                return "503-%s" % (code or "other"), ""
            return str(e.code), text[:200]
        except (TimeoutError, socket.timeout):
            return "timeout", ""
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return "timeout", ""
            return "unreachable", str(reason)[:200]
        try:  # the status line came: a failure from here on cut an answer that had begun
            with r:
                data = r.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            return "truncated", str(e)[:200]
        if not stream:
            try:
                got = json.loads(data).get("model")
            except ValueError:
                return "truncated", data[:200]
            return ("ok", "") if got == member else ("wrong-model", "asked %s, answered by %s" % (member, got))
        chunks = [l[6:] for l in data.splitlines() if l.startswith("data: ")]
        if not chunks or chunks[-1] != "[DONE]":
            return "truncated", data[-200:]
        try:
            got = json.loads(chunks[0]).get("model")
        except ValueError:
            return "truncated", chunks[0][:200]
        return ("ok-stream", "") if got == member else ("wrong-model", "asked %s, answered by %s" % (member, got))

    # ---- sampling ----
    def sample_pools(self):
        ok, out = kubectl("-n", NS, "get", "modelpools", "-o", "json")
        if not ok:
            return None
        t = self.t()
        res = {}
        for p in json.loads(out)["items"]:
            st = p.get("status", {})
            conds = {c["type"]: (c.get("status"), c.get("reason")) for c in st.get("conditions", [])}
            res[p["metadata"]["name"]] = (t, st.get("phase", ""), st.get("residentMember", ""),
                                          st.get("pendingMember", ""), conds, p["metadata"].get("annotations", {}))
        return res

    def sample_rss(self):
        """RSS of each replica process and of the router (MP_CHAOS_ROUTER_PID), which lives the whole run."""
        for r in REPLICAS + ("r" if os.environ.get("MP_CHAOS_ROUTER_PID") else ""):
            pid = int(os.environ["MP_CHAOS_ROUTER_PID"]) if r == "r" else replica_pid(r)
            if not pid:
                continue
            try:
                with open("/proc/%d/status" % pid) as f:
                    kib = int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
            except (OSError, StopIteration, ValueError):
                continue
            with self.lock:
                self.rss.setdefault((r, pid), []).append((self.t(), kib))

    def sampler(self):
        streak = {}  # pool -> t it started Swapping (continuously, by samples)
        flagged = set()
        while not self.stop.is_set():
            s = self.sample_pools()
            self.sample_rss()
            if s:
                for name, smp in s.items():
                    with self.lock:
                        self.samples.setdefault(name, []).append(smp[:5])
                    t, phase, _, _, conds = smp[:5]
                    if phase != "Swapping":
                        streak.pop(name, None)
                        flagged.discard(name)
                        continue
                    start = streak.setdefault(name, t)
                    explained = conds.get("SwapDeferred", ("", ""))[0] == "True" or \
                        conds.get("SlotAllocated", ("", ""))[0] == "False"
                    if t - start > BUDGET_S + SWAP_GRACE_S and not explained and name not in flagged:
                        flagged.add(name)
                        self.violation("pool %s Swapping for %.0f s (budget %d s) with no condition saying why: %s"
                                       % (name, t - start, BUDGET_S, conds))
            self.stop.wait(2.0)

    # ---- faults ----
    def leader(self):
        ok, out = kubectl("-n", "modelpool-system", "get", "lease", "modelpool-operator", "-o",
                          "jsonpath={.spec.holderIdentity}")
        if ok and out.startswith("replica-"):
            return out[len("replica-")]
        return None

    def add_toxic(self, name, kind, attrs, stream="downstream", toxicity=1.0):
        self.toxi.call("POST", "/proxies/apiserver/toxics",
             {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attrs})

    def del_toxic(self, *names):
        for name in names:
            try:
                self.toxi.call("DELETE", "/proxies/apiserver/toxics/" + name)
            except urllib.error.HTTPError as e:
                if e.code != 404:  # gone already is fine: the undo may be retried
                    raise

    def member_fault(self, kind, pool, member, dur):
        """Annotate the member for dur seconds; returns the undo."""
        ann = {"member-fail": SIM + "fail=true", "member-evict": SIM + "evict=true",
               "member-slow-terminate": SIM + "terminate-ms=%d" % int(dur * 1000 * 0.6),
               "member-probe-hang": SIM + "probe=hang", "member-probe-error": SIM + "probe=error"}[kind]
        key = ann.split("=")[0]
        if not kubectl("-n", NS, "annotate", "isvc", member, ann, "--overwrite")[0]:
            raise RuntimeError("annotate failed")

        def undo():
            kubectl("-n", NS, "annotate", "isvc", member, key + "-")
            self.release(pool)
        return undo

    def busy_drain(self, pool, i, dur, x):
        """On a settled pool, the resident made busy, then (in a thread of its own, busy_drain_run) another
        member requested once the resident's Pod says busy: it must not be unloaded while busy (the
        simulator logs any busy Pod deletion; checked at the end) and stays at 1. False: not settled."""
        ok, out = kubectl("-n", NS, "get", "modelpool", pool, "-o", "json")
        if not ok:
            return False
        p = json.loads(out)
        st = p.get("status", {})
        res = st.get("residentMember", "")
        if st.get("phase") != "Ready" or not res or st.get("pendingMember") or \
                REQUEST in p["metadata"].get("annotations", {}):
            return False
        ok, out = kubectl("-n", NS, "get", "isvc", "-o", "json")
        if not ok:
            return False
        reps = {o["metadata"]["name"]: o["spec"].get("replicas", 1) for o in json.loads(out)["items"]}
        others = [member_name(i, j) for j in range(MEMBERS) if member_name(i, j) != res]
        if any(reps.get(m, 0) != 0 for m in others) or reps.get(res) != 1:
            return False
        if not kubectl("-n", NS, "annotate", "isvc", res, SIM + "busy=true", "--overwrite")[0]:
            return False
        target = others[int(x * len(others)) % len(others)]
        t = threading.Thread(target=self.busy_drain_run, args=(pool, res, target, dur), daemon=True)
        self.drains.append(t)
        t.start()
        return True

    def busy_drain_run(self, pool, res, target, dur):
        """The drain starts only once the resident's Pod says busy to an idle probe of the run's own:
        the simulator reads the annotation from a cache that lags it by seconds under these faults
        (seed 1608934174: the operator's probe found the Pod idle 0.2 s after the annotation, a drain
        that was never busy; 14.5 s measured by hand in the next long run)."""
        outcome = "stopped"
        try:
            if not self.await_busy(res, BUSY_WAIT_S):
                outcome = "stopped" if self.stop.is_set() else "never-busy"
                return
            kubectl("-n", NS, "annotate", "modelpool", pool, "%s=%s" % (REQUEST, target), "--overwrite")
            with self.lock:
                self.activations.append((self.t(), pool, target, "busy-drain", True))
            self.stop.wait(dur)
            ok, out = kubectl("-n", NS, "get", "isvc", res, "-o", "jsonpath={.spec.replicas}")
            if ok and out != "1":
                self.violation("busy resident %s/%s scaled to %s during its busy drain" % (pool, res, out))
            outcome = "drained"
        finally:
            kubectl("-n", NS, "annotate", "isvc", res, SIM + "busy-")
            self.release(pool)
            with self.lock:
                self.drain_outcomes[outcome] = self.drain_outcomes.get(outcome, 0) + 1

    def await_busy(self, member, wait_s):
        """True once every live Pod of member answers its idle probe (llama.cpp's GET /slots, as the
        operator asks it) with a slot processing, and there is one; False after wait_s or at the stop."""
        deadline = now() + wait_s
        while now() < deadline and not self.stop.is_set():
            ok, out = kubectl("-n", NS, "get", "pods", "-l", "inference.llmkube.dev/service=" + member, "-o", "json")
            ips = [p["status"].get("podIP") for p in json.loads(out)["items"]] if ok else []
            if ips and all(ips) and all(slots_busy(ip) for ip in ips):
                return True
            self.stop.wait(1.0)
        return False

    def apply(self, kind, dur, i, j, x):
        """Starts one fault; returns its undo (None: nothing to undo)."""
        pool, member = pool_name(i), member_name(i, j)
        # MP_CHAOS_SKIP=kind,...: kinds left out (counted as not applied); the schedule stays the seed's.
        if kind in os.environ.get("MP_CHAOS_SKIP", "").split(","):
            raise RuntimeError("left out (MP_CHAOS_SKIP)")
        if kind == "net-reset":
            self.add_toxic("reset", "reset_peer", {"timeout": int(x * 500)}, toxicity=0.5)
            return lambda: self.del_toxic("reset")
        if kind == "net-stall":
            self.add_toxic("stall", "timeout", {"timeout": 0})
            return lambda: self.del_toxic("stall")
        if kind == "net-slow":
            self.add_toxic("slow-lat", "latency", {"latency": 200 + int(x * 800), "jitter": 200})
            self.add_toxic("slow-bw", "bandwidth", {"rate": 4})
            return lambda: self.del_toxic("slow-lat", "slow-bw")
        if kind == "net-drop-watches":
            self.toxi.call("POST", "/proxies/apiserver", {"enabled": False})
            time.sleep(0.2 + x)
            self.toxi.call("POST", "/proxies/apiserver", {"enabled": True})
            return None
        if kind == "net-cut-streams":
            self.add_toxic("cut", "limit_data", {"bytes": 4096 + int(x * 60000)})
            return lambda: self.del_toxic("cut")
        if kind == "apiserver-restart":
            self.api.stop()
            time.sleep(dur)
            self.api.start()
            return None
        if kind == "etcd-compact":
            etcd_compact()
            return None
        if kind == "operator-kill":
            fair = [r for r in REPLICAS if r not in SPARED]
            r = self.leader() if x < 0.6 else None
            if r is None or r in SPARED:
                r = fair[int(x * 10) % len(fair)]
            pid = replica_pid(r)
            if pid:
                os.kill(pid, signal.SIGKILL)
            return None
        if kind == "operator-pause":
            r = self.leader()
            if r and r in SPARED:
                raise RuntimeError("the leader, replica %s, is spared" % r)
            pid = replica_pid(r) if r else None
            if not pid:
                raise RuntimeError("no leader to pause")
            os.kill(pid, signal.SIGSTOP)

            def resume():
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:  # killed meanwhile by another fault
                    pass
            return resume
        if not self.claim(pool):
            raise RuntimeError("pool %s taken" % pool)
        try:
            if kind == "busy-drain":
                if not self.busy_drain(pool, i, dur, x):
                    raise RuntimeError("pool %s not settled" % pool)
                return None  # busy_drain_run undoes it and releases the pool
            return self.member_fault(kind, pool, member, dur)
        except Exception:
            self.release(pool)
            raise

    def faults(self, sched):
        undo = []  # heap of (t, n, fn)
        n = 0
        for (t, kind, dur, i, j, x) in sched:
            while not self.stop.is_set() and self.t() < t:
                self.toxi.keep_alive()
                while undo and undo[0][0] <= self.t():
                    self.run_undo(heapq.heappop(undo)[2])
                self.stop.wait(0.1)
            if self.stop.is_set():
                break
            try:
                fn = self.apply(kind, dur, i, j, x)
                self.count(kind)
                if fn:
                    n += 1
                    heapq.heappush(undo, (self.t() + dur, n, fn))
            except Exception as e:  # a fault that could not start is counted, not fatal
                self.count(kind, ok=False)
                say("fault %s not applied: %s" % (kind, e))
        while undo and not self.stop.is_set() and self.t() < self.a.seconds:
            self.toxi.keep_alive()
            while undo and undo[0][0] <= self.t():
                self.run_undo(heapq.heappop(undo)[2])
            self.stop.wait(0.1)
        self.pending_undo = [u[2] for u in sorted(undo)]
        for t in self.drains:  # the stop ends their waits
            t.join()

    def run_undo(self, fn):
        for attempt in range(20):
            try:
                fn()
                return
            except ProxyHung:
                raise
            except Exception as e:
                say("undo failed (%s), retrying" % e)
                time.sleep(1)

    # ---- the end ----
    def quiesce(self):
        self.toxi.keep_alive()
        for fn in getattr(self, "pending_undo", []):
            self.run_undo(fn)
        self.toxi.call("POST", "/reset")  # every toxic gone, the proxy enabled, whatever an undo missed
        for r in REPLICAS:
            pid = replica_pid(r)
            if pid:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for key in ("fail", "evict", "terminate-ms", "probe", "busy"):
            kubectl("-n", NS, "annotate", "isvc", "--all", SIM + key + "-")
        rng = random.Random(self.a.seed + 1)
        final = {}
        for i in range(self.a.pools):
            m = member_name(i, rng.randrange(MEMBERS))
            final[pool_name(i)] = m
            while not kubectl("-n", NS, "annotate", "modelpool", pool_name(i), "%s=%s" % (REQUEST, m), "--overwrite")[0]:
                time.sleep(1)
            with self.lock:
                self.activations.append((self.t(), pool_name(i), m, "final", True))
        say("quiesced: every pool requested once more; waiting for each to settle")
        deadline = now() + QUIESCE_DEADLINE_S
        bad = {}
        while now() < deadline:
            bad = self.settled(final)
            if not bad:
                break
            time.sleep(2)
        for pool, why in sorted(bad.items()):
            self.violation("wedged pool %s: %s" % (pool, why))
        return final

    def settled(self, final):
        """pool -> why it is not settled on its final member (Ready, resident, nothing pending, sole Pod)."""
        ok1, pools = kubectl("-n", NS, "get", "modelpools", "-o", "json")
        ok2, isvcs = kubectl("-n", NS, "get", "isvc", "-o", "json")
        ok3, pods = kubectl("-n", NS, "get", "pods", "-o", "json")
        if not (ok1 and ok2 and ok3):
            return {"*": "API unavailable"}
        reps = {o["metadata"]["name"]: o["spec"].get("replicas", 1) for o in json.loads(isvcs)["items"]}
        live = {}
        for p in json.loads(pods)["items"]:
            if p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            svc = p["metadata"].get("labels", {}).get("inference.llmkube.dev/service")
            live[svc] = live.get(svc, 0) + 1
        bad = {}
        for p in json.loads(pools)["items"]:
            name = p["metadata"]["name"]
            st = p.get("status", {})
            want = final[name]
            got = (st.get("phase"), st.get("residentMember"), st.get("pendingMember", ""))
            if got != ("Ready", want, ""):
                bad[name] = "phase/resident/pending %s, want Ready/%s/" % ("/".join(map(str, got)), want)
                continue
            for j in range(MEMBERS):
                m = member_name(int(name[1:]), j)
                w = 1 if m == want else 0
                if reps.get(m) != w or (live.get(m, 0) != w):
                    bad[name] = "%s replicas %s live Pods %s, want %d" % (m, reps.get(m), live.get(m, 0), w)
        return bad

    def check_sim_busy(self):
        n = 0
        with open(state("sim.log")) as f:
            for line in f:
                if line.startswith("sim ") and " state=Terminating " in line and line.rstrip().endswith("busy=true"):
                    n += 1
                    self.violation("busy Pod deleted: " + line.strip())
        return n

    def outcomes(self):
        """Each activation: resident (a sample showed the member resident and Ready before another member was
        requested), explained (else a sample showed a condition saying why: SwapDeferred True or SlotAllocated
        False), superseded (else another member was requested first), or unresolved. A failed kubectl call is
        counted as a client error, not an activation."""
        out = {"resident": 0, "superseded": 0, "explained": 0, "unresolved": 0, "client-errors": 0}
        by_pool = {}
        for a in sorted(self.activations):
            if not a[4]:
                out["client-errors"] += 1
                continue
            by_pool.setdefault(a[1], []).append(a)
        for pool, acts in by_pool.items():
            smp = self.samples.get(pool, [])
            for k, (t, _, m, _, _) in enumerate(acts):
                nxt = next((b[0] for b in acts[k + 1:] if b[2] != m), float("inf"))
                window = [s for s in smp if t <= s[0] <= nxt]
                if any(s[1] == "Ready" and s[2] == m for s in window):
                    out["resident"] += 1
                elif any(s[4].get("SwapDeferred", ("", ""))[0] == "True" or
                         s[4].get("SlotAllocated", ("", ""))[0] == "False" for s in window):
                    out["explained"] += 1
                elif nxt != float("inf"):
                    out["superseded"] += 1
                else:
                    out["unresolved"] += 1
        return out

    def routed_report(self):
        """Router requests by outcome, and the longest wait of each outcome (seconds)."""
        by = {}
        for (_, _, _, stream, outcome, took, _) in self.routed:
            n, longest = by.get(outcome, (0, 0.0))
            by[outcome] = (n + 1, max(longest, took))
        return {"requests": len(self.routed), "streamed": sum(1 for x in self.routed if x[3]),
                "by_outcome": {k: {"n": n, "longest_s": round(t, 1)} for k, (n, t) in sorted(by.items())}}

    def rss_report(self):
        """Per process (an operator replica by its letter, or the router r) sampled for 60 s or more: RSS 30 s after its first
        sample, at its last, and its highest."""
        rows = []
        for (who, pid), s in sorted(self.rss.items()):
            if s[-1][0] - s[0][0] < 60:
                continue
            first = next(v for v in s if v[0] >= s[0][0] + 30)
            rows.append({"who": who, "pid": pid, "lived_s": round(s[-1][0] - s[0][0]), "rss_first_kib": first[1],
                         "rss_last_kib": s[-1][1], "rss_max_kib": max(v[1] for v in s)})
        return rows


def run(a):
    sched = schedule(a.seed, a.seconds, a.pools)
    say("seed=%d pools=%d seconds=%d clients=%d router clients=%d faults scheduled=%d" %
        (a.seed, a.pools, a.seconds, a.clients, a.router_clients if os.environ.get("MP_CHAOS_ROUTER_URL") else 0, len(sched)))
    with open(state("chaos-schedule.txt"), "w") as f:
        for s in sched:
            f.write("%s\n" % (s,))
    r = Run(a)
    threads = [threading.Thread(target=r.client, args=(k,), daemon=True) for k in range(a.clients)]
    if os.environ.get("MP_CHAOS_ROUTER_URL"):
        threads += [threading.Thread(target=r.router_client, args=(k,), daemon=True) for k in range(a.router_clients)]
    threads.append(threading.Thread(target=r.writer, daemon=True))
    threads.append(threading.Thread(target=r.sampler, daemon=True))
    ft = threading.Thread(target=r.faults, args=(sched,), daemon=True)
    for t in threads + [ft]:
        t.start()
    while r.t() < a.seconds:
        time.sleep(1)
    r.stop.set()
    ft.join()
    for t in threads:
        t.join()
    say("faults and clients stopped after %.0f s; quiescing" % r.t())
    r.stop.clear()
    st = threading.Thread(target=r.sampler, daemon=True)
    st.start()
    final = r.quiesce()
    r.stop.set()
    st.join()
    busy = r.check_sim_busy()
    summary, bad = audit(state("audit.log"))
    for b in bad[:20]:
        r.violation(b)
    if len(bad) > 20:
        r.violation("%d more writes by a replica that did not hold the Lease" % (len(bad) - 20))
    restarts = {}
    for x in REPLICAS:
        try:
            with open(state("replica-%s.runs" % x)) as f:
                restarts[x] = sum(1 for l in f if " start " in l)
        except OSError:
            restarts[x] = 0
    acts = [x for x in r.activations if x[3] != "final"]
    result = {
        "seed": a.seed, "pools": a.pools, "scale_share": a.scale_share, "members_per_pool": MEMBERS, "clients": a.clients,
        "seconds": round(r.t()), "faults": r.fault_counts, "faults_not_applied": r.fault_errors,
        "activations": len([x for x in acts if x[4]]), "activations_by_method": {
            m: len([x for x in acts if x[3] == m and x[4]]) for m in ("scale", "annotate", "busy-drain")},
        "outcomes": r.outcomes(), "final_requests": len(final), "metadata_writes": r.touches,
        "busy_pods_deleted": busy, "audit": summary, "operator_starts": restarts, "rss": r.rss_report(),
        "routed": r.routed_report(), "proxy_restarts": r.toxi.restarts, "busy_drains": r.drain_outcomes,
        "violations": r.violations,
    }
    js = json.dumps(result, indent=1, sort_keys=True)
    print(js)
    if a.out:
        with open(a.out, "w") as f:
            f.write(js + "\n")
    say("seed=%d: %d violations" % (a.seed, len(r.violations)))
    return 1 if r.violations else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("objects")
    o.add_argument("pools", type=int)
    p = sub.add_parser("run")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--pools", type=int, required=True)
    p.add_argument("--seconds", type=int, required=True)
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--router-clients", type=int, default=0,
                   help="clients sending chat completions through the router at MP_CHAOS_ROUTER_URL")
    p.add_argument("--scale-share", type=float, default=0.0,
                   help="share of activations made by kubectl scale (the racy path, docs/guarantees.md) instead of the pool request")
    p.add_argument("--out")
    s = sub.add_parser("schedule")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--pools", type=int, required=True)
    s.add_argument("--seconds", type=int, required=True)
    a = ap.parse_args()
    if a.cmd == "objects":
        sys.stdout.write(objects(a.pools))
        return 0
    if a.cmd == "schedule":
        for x in schedule(a.seed, a.seconds, a.pools):
            print(x)
        return 0
    try:
        return run(a)
    except ProxyHung as e:
        # The fault proxy hung again right after Toxiproxy.restart: the run cannot undo its faults
        # nor finish its checks. Not a verdict on the operator: skipped (77), with slot-check's
        # count of what did run.
        say("the fault proxy's control API stopped answering after a restart (%s): the run cannot finish; skipped" % e)
        return 77


if __name__ == "__main__":
    sys.exit(main())
