#!/usr/bin/env python3
"""router-report.py RAW OUT.md: turns one bench/router.sh run (raw/router-*.json) into the results page:
the targets of issues 14 and 28 met or missed and by how much (the router against direct and, when the
run had one, against a plain reverse proxy), every round (so the machine's noise shows), the machine and
the commit. OUT's hand-written notes, after the line "## Notes", are kept."""
import json
import statistics
import sys

STREAM_TOKENS = 256  # --max-tokens of the stream phase in router.sh


def targets(d):
    """The targets of the run, in the order of its first round."""
    out = []
    for r in d["runs"]:
        if r["phase"] != "warmup" and r["target"] not in out:
            out.append(r["target"])
    return out


def groups(d, phase):
    """[(round, {target: run}, first target)] of one phase, in run order."""
    n = len(targets(d))
    if not n:
        return []
    by = [r for r in d["runs"] if r["phase"] == phase]
    out = []
    for i in range(0, len(by) - n + 1, n):
        runs = {r["target"]: r for r in by[i:i + n]}
        out.append((i // n + 1, runs, by[i]["target"]))
    return out


def pairs(d, phase):
    """[(round, direct run, router run, first target)] of one phase."""
    return [(n, g["direct"], g["router"], first) for n, g, first in groups(d, phase)]


def via_cpu(r):
    """CPU (ns) of the process between the client and the Pod during run r (older raw files: the
    router's only)."""
    return r.get("via_cpu_ns", r.get("router_cpu_ns", 0))


def cpu_per_request_us(r):
    return via_cpu(r) / 1e3 / max(r["summary"]["requests"], 1)


def ok200(r):
    return r["summary"]["codes"].get("200", 0)


def tokens_per_s(r):
    return ok200(r) * STREAM_TOKENS / r["summary"]["seconds"]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def mib(kib):
    return kib / 1024


def verdict(ok):
    return "**met**" if ok else "**missed**"


def main():
    raw, outp = sys.argv[1], sys.argv[2]
    d = json.load(open(raw))
    lines = []
    w = lines.append
    w("# Router benchmark results")
    w("")
    w(f"Produced by `bench/router.sh` at commit {d['commit']}, {d['measured']}; raw numbers in "
      f"`raw/{raw.rsplit('/', 1)[-1]}`.")
    w(f"Machine: {d['machine']}. **Shared**: the 2 cores also ran other sessions' builds and tests "
      f"during the run (load average at the end: {d['loadavg_end']}), so single rounds are noisy; "
      f"every round is listed and the summary is the median over {d['rounds']} rounds.")
    w("")
    proxy = d.get("proxy")
    w("One fresh control plane (etcd, kube-apiserver), the operator, the member simulator, one pool of two "
      "members (m-a resident, m-b not), all on loopback. The load client is `oai-load` (libcurl multi, one "
      "thread, keep-alive connections). Each round runs direct to m-a's Pod, through the router"
      + (f" and through haproxy {proxy} (Debian's, a plain HTTP reverse proxy to the same Pod, keep-alive "
         "both ways, one thread per core)" if proxy else "")
      + ", the order rotating between rounds, in the same run.")
    w("")

    lat = pairs(d, "latency")
    add50 = [r["summary"]["p50_ms"] - x["summary"]["p50_ms"] for _, x, r, _ in lat]
    add99 = [r["summary"]["p99_ms"] - x["summary"]["p99_ms"] for _, x, r, _ in lat]
    rps = pairs(d, "rps")
    rps_ratio = [r["summary"]["rps"] / x["summary"]["rps"] for _, x, r, _ in rps if x["summary"]["rps"]]
    st = pairs(d, "stream")
    st_ratio = [tokens_per_s(r) / tokens_per_s(x) for _, x, r, _ in st if tokens_per_s(x)]
    sp = pairs(d, "stream-paced")
    sp_ratio = [tokens_per_s(r) / tokens_per_s(x) for _, x, r, _ in sp if tokens_per_s(x)]
    idle = d["idle"]
    hold = d.get("hold")
    has_proxy = "proxy" in targets(d)
    conc = [("1", "latency"), ("16", "rps16"), ("64", "rps")]

    w("## Targets")
    w("")
    w("| measure | target | result (median of rounds; range) | verdict |")
    w("|---|---|---|---|")
    if lat:
        m99 = med(add99)
        w(f"| added latency p99, concurrency 1, max_tokens 1 | < 0.3 ms | {m99:.3f} ms "
          f"({min(add99):.3f} .. {max(add99):.3f}); p50 {med(add50):.3f} ms | {verdict(m99 < 0.3)}"
          f"{'' if m99 < 0.3 else f' by {m99 - 0.3:.3f} ms'} |")
    if rps_ratio:
        mr = med(rps_ratio)
        w(f"| requests/s at 64 clients, router / direct | >= 90% | {mr * 100:.1f}% "
          f"({min(rps_ratio) * 100:.1f} .. {max(rps_ratio) * 100:.1f}%) | {verdict(mr >= 0.9)}"
          f"{'' if mr >= 0.9 else f' by {(0.9 - mr) * 100:.1f} points'} |")
    if st_ratio:
        ms = med(st_ratio)
        w(f"| streamed tokens/s, token-ms 0 (as fast as the 2 cores allow), concurrency 8, router / direct | unchanged (taken as >= 95%) | "
          f"{ms * 100:.1f}% ({min(st_ratio) * 100:.1f} .. {max(st_ratio) * 100:.1f}%) | "
          f"{verdict(ms >= 0.95)}{'' if ms >= 0.95 else f' by {(0.95 - ms) * 100:.1f} points'} |")
    if sp_ratio:
        ms = med(sp_ratio)
        w(f"| streamed tokens/s at the member's pace (token-ms 5), concurrency 8, router / direct | "
          f"unchanged (taken as >= 95%) | {ms * 100:.1f}% ({min(sp_ratio) * 100:.1f} .. "
          f"{max(sp_ratio) * 100:.1f}%) | {verdict(ms >= 0.95)}"
          f"{'' if ms >= 0.95 else f' by {(0.95 - ms) * 100:.1f} points'} |")
    # Issue 28: beside a plain proxy, and the drain fence's reads while requests flow.
    if lat:
        m50 = med(add50)
        w(f"| added latency p50, concurrency 1 (issue 28) | <= 0.1 ms | {m50:.3f} ms "
          f"({min(add50):.3f} .. {max(add50):.3f}) | {verdict(m50 <= 0.1)}"
          f"{'' if m50 <= 0.1 else f' by {m50 - 0.1:.3f} ms'} |")
    for c, phase in conc if has_proxy else []:
        g = groups(d, phase)
        ratio = [x["router"]["summary"]["rps"] / x["proxy"]["summary"]["rps"] for _, x, _ in g
                 if x["proxy"]["summary"]["rps"]]
        if ratio:
            mr = med(ratio)
            w(f"| requests/s at {c} client{'s' if c != '1' else ''}, router / haproxy (issue 28) | >= 80% | "
              f"{mr * 100:.1f}% ({min(ratio) * 100:.1f} .. {max(ratio) * 100:.1f}%) | {verdict(mr >= 0.8)}"
              f"{'' if mr >= 0.8 else f' by {(0.8 - mr) * 100:.1f} points'} |")
        cpu = [cpu_per_request_us(x["router"]) / cpu_per_request_us(x["proxy"]) for _, x, _ in g
               if cpu_per_request_us(x["proxy"])]
        if cpu and c != "1":
            mc = med(cpu)
            w(f"| router CPU per request at {c} clients, router / haproxy (issue 28) | <= 1.3x | {mc:.2f}x "
              f"({min(cpu):.2f} .. {max(cpu):.2f}) | {verdict(mc <= 1.3)}"
              f"{'' if mc <= 1.3 else f' by {mc - 1.3:.2f}x'} |")
    rr = [r for r in d["runs"] if r["target"] == "router" and r["phase"] != "warmup" and "fence_reads" in r]
    if rr:
        reads = sum(r["fence_reads"] for r in rr)
        secs = sum(r["summary"]["seconds"] for r in rr)
        rate = reads / secs if secs else float("nan")
        w(f"| drain-fence reads of the pool while requests flow, per second (issue 28) | about 1 | "
          f"{rate:.2f} ({reads} reads in {secs:.0f} s of router traffic, one pool, one replica) | "
          f"{verdict(rate <= 1.5)} |")
    if hold:
        rss = mib(hold["mem_held"]["rss_kib"])
        w(f"| RSS with {hold['held_at_measure']:,} held connections | < 64 MiB | {rss:.1f} MiB "
          f"(VmHWM {mib(hold['mem_held']['hwm_kib']):.1f} MiB) | {verdict(rss < 64)}"
          f"{'' if rss < 64 else f' by {rss - 64:.1f} MiB'} |")
    for i in idle:
        w(f"| CPU idle, {i['name']} the traffic, {i['seconds']:.0f} s | 0 | {i['cpu_ticks']} ticks "
          f"({i['cpu_ns'] / 1e6:.2f} ms on CPU by schedstat) | {verdict(i['cpu_ticks'] == 0)} |")
    w("")

    w("## Memory")
    w("")
    w("| when | VmRSS MiB | VmHWM MiB | RssAnon MiB | RssFile MiB | fds |")
    w("|---|---|---|---|---|---|")
    rows = [("idle, no connection (before traffic)", d["mem_idle"]),
            ("after the load rounds", d["mem_after_load"]),
            ("after the second idle window", idle[-1]["mem"])]
    if hold:
        rows += [("before the held clients", hold["mem_before"]),
                 (f"{hold['held_at_measure']:,} held", hold["mem_held"]),
                 (f"10 s after every client left ({hold['held_after_clients_left']:,} still held)",
                  hold["mem_after_clients_left"])]
    for name, m in rows:
        w(f"| {name} | {mib(m['rss_kib']):.1f} | {mib(m['hwm_kib']):.1f} | {mib(m['anon_kib']):.1f} | "
          f"{mib(m['file_kib']):.1f} | {m['fds']} |")
    if hold and hold["held_at_measure"]:
        per = (hold["mem_held"]["rss_kib"] - hold["mem_before"]["rss_kib"]) * 1024 / hold["held_at_measure"]
        w("")
        w(f"Per held connection: {per:,.0f} bytes of RSS ((held - before) / held). "
          f"All {hold['clients']:,} held after {hold['seconds_to_all']} s; the peak the gauge showed: "
          f"{hold['held_peak']:,}; the pool meanwhile (phase/resident/pending): `{hold['pool']}`.")
    w("")

    w("## Every round")
    w("")
    if lat:
        w("Latency, concurrency 1, not streamed, max_tokens 1 (ms; first = which target ran first):")
        w("")
        w("| round | first | direct p50 | router p50 | added p50 | direct p99 | router p99 | added p99 | router CPU µs/request |")
        w("|---|---|---|---|---|---|---|---|---|")
        for (n, x, r, first), a5, a9 in zip(lat, add50, add99):
            cpu = cpu_per_request_us(r)
            w(f"| {n} | {first} | {x['summary']['p50_ms']:.3f} | {r['summary']['p50_ms']:.3f} | {a5:.3f} | "
              f"{x['summary']['p99_ms']:.3f} | {r['summary']['p99_ms']:.3f} | {a9:.3f} | {cpu:.1f} |")
        w("")
    if has_proxy:
        w("Router and haproxy side by side, each round (rps; added p50/p99 ms over direct at 1 client; CPU "
          "µs/request of the process in between; the router's drain-fence reads during its run):")
        w("")
        w("| round | clients | direct rps | router rps | haproxy rps | router/haproxy | router added p50 / p99 | "
          "haproxy added p50 / p99 | CPU µs/req router | CPU µs/req haproxy | router fence reads |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for c, phase in conc:
            for n, g, _ in groups(d, phase):
                x, r, h = g["direct"]["summary"], g["router"]["summary"], g["proxy"]["summary"]
                w(f"| {n} | {c} | {x['rps']:.0f} | {r['rps']:.0f} | {h['rps']:.0f} | "
                  f"{r['rps'] / h['rps'] * 100 if h['rps'] else float('nan'):.1f}% | "
                  f"{r['p50_ms'] - x['p50_ms']:.3f} / {r['p99_ms'] - x['p99_ms']:.3f} | "
                  f"{h['p50_ms'] - x['p50_ms']:.3f} / {h['p99_ms'] - x['p99_ms']:.3f} | "
                  f"{cpu_per_request_us(g['router']):.1f} | {cpu_per_request_us(g['proxy']):.1f} | "
                  f"{g['router'].get('fence_reads', '-')} |")
        w("")
    if rps:
        w("Requests per second, 64 concurrent clients, max_tokens 1 (CPU: seconds on CPU during the run):")
        w("")
        w("| round | first | direct rps | router rps | router/direct | direct p99 ms | router p99 ms | "
          "CPU µs/request direct: sim, client | CPU µs/request via router: router, sim, client | non-200 |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for (n, x, r, first) in rps:
            sx, sr = x["summary"], r["summary"]
            bad = sum(v for k, v in sr["codes"].items() if k != "200") + sum(v for k, v in sx["codes"].items() if k != "200")
            per = lambda run, v: v / max(run["summary"]["requests"], 1)
            w(f"| {n} | {first} | {sx['rps']:.0f} | {sr['rps']:.0f} | {sr['rps'] / sx['rps'] * 100:.1f}% | "
              f"{sx['p99_ms']:.2f} | {sr['p99_ms']:.2f} | "
              f"{per(x, x['sim_cpu_ns'] / 1e3):.1f}, {per(x, x.get('client_cpu_s', 0) * 1e6):.1f} | "
              f"{per(r, via_cpu(r) / 1e3):.1f}, {per(r, r['sim_cpu_ns'] / 1e3):.1f}, "
              f"{per(r, r.get('client_cpu_s', 0) * 1e6):.1f} | {bad} |")
        w("")
    if st:
        w(f"Streamed, concurrency 8, max_tokens {STREAM_TOKENS}, token-ms 0, then (paced) token-ms 5 "
          f"(tokens/s = 200 answers x {STREAM_TOKENS} / seconds):")
        w("")
        w("| round | first | direct tokens/s | router tokens/s | router/direct | direct p50 ms | router p50 ms | "
          "CPU µs/token direct: sim, client | CPU µs/token via router: router, sim, client |")
        w("|---|---|---|---|---|---|---|---|---|")
        for (n, x, r, first) in st + [(f"paced {n}", x, r, first) for n, x, r, first in sp]:
            tx, tr = max(ok200(x) * STREAM_TOKENS, 1), max(ok200(r) * STREAM_TOKENS, 1)
            w(f"| {n} | {first} | {tokens_per_s(x):.0f} | {tokens_per_s(r):.0f} | "
              f"{tokens_per_s(r) / tokens_per_s(x) * 100:.1f}% | {x['summary']['p50_ms']:.1f} | "
              f"{r['summary']['p50_ms']:.1f} | {x['sim_cpu_ns'] / 1e3 / tx:.2f}, "
              f"{x.get('client_cpu_s', 0) * 1e6 / tx:.2f} | {via_cpu(r) / 1e3 / tr:.2f}, "
              f"{r['sim_cpu_ns'] / 1e3 / tr:.2f}, {r.get('client_cpu_s', 0) * 1e6 / tr:.2f} |")
        w("")

    notes = ""
    try:
        old = open(outp).read()
        if "\n## Notes" in old:
            notes = old[old.index("\n## Notes") + 1:]
    except FileNotFoundError:
        pass
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + notes
    open(outp, "w").write(text)


if __name__ == "__main__":
    main()
