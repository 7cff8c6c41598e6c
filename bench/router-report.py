#!/usr/bin/env python3
"""router-report.py RAW OUT.md: turns one bench/router.sh run (raw/router-*.json) into the results page:
the targets of issue 14 met or missed and by how much, every round (so the machine's noise shows), the
machine and the commit. OUT's hand-written notes, after the line "## Notes", are kept."""
import json
import statistics
import sys

STREAM_TOKENS = 256  # --max-tokens of the stream phase in router.sh


def pairs(d, phase):
    """[(round, direct summary+cpu, router summary+cpu)] of one phase, in run order."""
    by = [r for r in d["runs"] if r["phase"] == phase]
    out = []
    for i in range(0, len(by) - 1, 2):
        a, b = by[i], by[i + 1]
        runs = {a["target"]: a, b["target"]: b}
        out.append((i // 2 + 1, runs["direct"], runs["router"], a["target"]))
    return out


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
    w("One fresh control plane (etcd, kube-apiserver), the operator, the member simulator, one pool of two "
      "members (m-a resident, m-b not), all on loopback. The load client is `oai-load` (libcurl multi, one "
      "thread, keep-alive connections). Each round runs direct to m-a's Pod and through the router, the "
      "order alternating between rounds, in the same run.")
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
            cpu = r["router_cpu_ns"] / 1e3 / max(r["summary"]["requests"], 1)
            w(f"| {n} | {first} | {x['summary']['p50_ms']:.3f} | {r['summary']['p50_ms']:.3f} | {a5:.3f} | "
              f"{x['summary']['p99_ms']:.3f} | {r['summary']['p99_ms']:.3f} | {a9:.3f} | {cpu:.1f} |")
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
              f"{per(r, r['router_cpu_ns'] / 1e3):.1f}, {per(r, r['sim_cpu_ns'] / 1e3):.1f}, "
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
              f"{x.get('client_cpu_s', 0) * 1e6 / tx:.2f} | {r['router_cpu_ns'] / 1e3 / tr:.2f}, "
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
