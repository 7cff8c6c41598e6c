#!/usr/bin/env python3
"""report.py OUT: turns OUT/raw/<N>.json (bench/run.sh) into OUT/results.csv, OUT/results.md and
OUT/*.png (gnuplot). OUT/notes.md, if present, is the hand-written analysis appended to results.md."""
import json
import os
import platform
import re
import shutil
import subprocess
import sys

TARGETS = {  # column -> (limit, what)
    "rss_steady_mib@1000": 16.0,
    "rss_steady_mib@10000": 32.0,
    "react_a_p99_ms": 10.0,
    "react_b_p99_ms": 10.0,
}


def hist_buckets(metrics, name, labels):
    """{le: cumulative count} of one histogram series."""
    buckets = {}
    for line in metrics.splitlines():
        m = re.match(r'^%s_bucket\{(.*)\} (\S+)$' % re.escape(name), line)
        if not m or any(f'{k}="{v}"' not in m.group(1) for k, v in labels.items()):
            continue
        le = re.search(r'le="([^"]+)"', m.group(1)).group(1)
        buckets[float("inf") if le == "+Inf" else float(le)] = float(m.group(2))
    return buckets


def hist_quantile(metrics, name, labels, q, base=""):
    """histogram_quantile as Prometheus computes it (linear within the bucket), in ms; with base
    (an earlier scrape), of the observations made since."""
    before = hist_buckets(base, name, labels) if base else {}
    buckets = sorted((le, c - before.get(le, 0.0)) for le, c in hist_buckets(metrics, name, labels).items())
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le * 1e3
            return (prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-9)) * 1e3
        prev_le, prev_c = le, c
    return None


def hist_count(metrics, name, labels):
    for line in metrics.splitlines():
        m = re.match(r'^%s_count\{(.*)\} (\S+)$' % re.escape(name), line)
        if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            return int(float(m.group(2)))
    return None


def hung_cols(d, h):
    """The columns of one hung-probe phase h of raw d (bench.py hung), prefixed hung<K>_."""
    sw, own, k = h["swaps"], h["own"], h["k"]
    au = d["audit"].get(f"hung{k}", {"total": 0})
    r = {"swaps_ok": sw["ok"], "swaps": sw["swaps"],
         "react_a_ext_p50_ms": sw["a_p50_ms"], "react_a_ext_p99_ms": sw["a_p99_ms"],
         "react_b_ext_p50_ms": sw["b_p50_ms"], "react_b_ext_p99_ms": sw["b_p99_ms"],
         "react_a_own_p50_ms": own["a"]["own_p50_ms"], "react_a_own_p99_ms": own["a"]["own_p99_ms"],
         "react_b_own_p50_ms": own["b"]["own_p50_ms"], "react_b_own_p99_ms": own["b"]["own_p99_ms"],
         "swap_p50_ms": sw["swap_p50_ms"], "swap_p99_ms": sw["swap_p99_ms"],
         # The hung pools' own requests (their deferral, their swaps' status writes) fall in the
         # window too: an upper bound on the measured swaps' requests.
         "requests_per_swap": round(au["total"] / max(sw["ok"], 1), 2),
         "hung_completed_after_release": sw.get("hung_completed_after_release"),
         "hung_still_failing_at_end": sw.get("hung_still_failing_at_end")}
    for p in ("a", "b"):
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            v = hist_quantile(h["metrics_after"], "modelpool_reaction_seconds", {"path": p}, q,
                              base=h["metrics_before"]) if h.get("metrics_after") else None
            r[f"react_{p}_int_{name}_ms"] = v
    return {f"hung{k}_{c}": v for c, v in r.items()}


EMPTY_HUNG = {"k": 0, "swaps": {"ok": 0, "swaps": 0, "a_p50_ms": None, "a_p99_ms": None, "b_p50_ms": None,
                                 "b_p99_ms": None, "swap_p50_ms": None, "swap_p99_ms": None},
              "own": {p: {"own_p50_ms": None, "own_p99_ms": None} for p in "ab"}}
EMPTY_RAW = {"audit": {}}


def row(d, ks=()):
    sw, au = d["swaps"], d["audit"]
    mib = lambda k: round(d[k] / 1024, 1)
    ok = max(sw.get("ok") or 0, 1)
    swap_reqs = au["swaps"]["total"]
    lists = sum(v for k, v in au["swaps"]["by"].items() if k.startswith("list "))
    idle_lists = sum(v for k, v in au["idle"]["by"].items() if k.startswith("list "))
    metrics = d.get("metrics") or ""
    r = {
        "pools": d["pools"],
        "measured": d.get("measured", ""),
        "commit": d.get("commit", ""),
        "rss_steady_mib": mib("rss_steady_kib"),
        "rss_peak_mib": mib("rss_peak_kib"),
        "sync_s": round((d["t_all_ns"] - d["t0_ns"]) / 1e9, 2),
        "react_a_p99_ms": None,
        "react_b_p99_ms": None,
        "react_source": "audit",
        "requests_per_swap": round(swap_reqs / ok, 2),
        "idle_cpu_s": d["idle_cpu_s"],
        "rss_empty_mib": mib("rss_empty_kib"),
        "priv_steady_mib": mib("priv_steady_kib") if "priv_steady_kib" in d else None,
        "dirty_steady_mib": mib("dirty_steady_kib") if "dirty_steady_kib" in d else None,
        "anon_steady_mib": mib("anon_steady_kib") if "anon_steady_kib" in d else None,
        "priv_empty_mib": mib("priv_empty_kib") if "priv_empty_kib" in d else None,
        "dirty_empty_mib": mib("dirty_empty_kib") if "dirty_empty_kib" in d else None,
        "anon_empty_mib": mib("anon_empty_kib") if "anon_empty_kib" in d else None,
        "rss_sync_peak_mib": mib("hwm_sync_kib") if "hwm_sync_kib" in d else None,
        "cache_bytes_per_object": round((d["rss_steady_kib"] - d["rss_empty_kib"]) * 1024 / d["objects"]),
        "caches_synced_s": round((d["t_synced_ns"] - d["t0_ns"]) / 1e9, 2) if d["t_synced_ns"] else None,
        "cold_operator_cpu_s": d["cpu_operator_cold_s"],
        "cold_apiserver_cpu_s": d["cpu_apiserver_cold_s"],
        "cold_etcd_cpu_s": d["cpu_etcd_cold_s"],
        "cold_requests": au["cold"]["total"],
        "cold_api_time_s": round(au["cold"]["api_ms"] / 1e3, 2),
        "react_a_int_p50_ms": None, "react_a_int_p99_ms": None,
        "react_b_int_p50_ms": None, "react_b_int_p99_ms": None,
        "react_a_own_p50_ms": d["own"]["a"]["own_p50_ms"], "react_a_own_p99_ms": d["own"]["a"]["own_p99_ms"],
        "react_a_own_max_ms": d["own"]["a"]["own_max_ms"],
        "react_b_own_p50_ms": d["own"]["b"]["own_p50_ms"], "react_b_own_p99_ms": d["own"]["b"]["own_p99_ms"],
        "react_b_own_max_ms": d["own"]["b"]["own_max_ms"],
        "react_a_api_p50_ms": d["own"]["a"]["api_p50_ms"], "react_a_api_p99_ms": d["own"]["a"]["api_p99_ms"],
        "react_b_api_p50_ms": d["own"]["b"]["api_p50_ms"], "react_b_api_p99_ms": d["own"]["b"]["api_p99_ms"],
        "react_a_ext_p50_ms": sw["a_p50_ms"], "react_a_ext_p99_ms": sw["a_p99_ms"], "react_a_ext_max_ms": sw["a_max_ms"],
        "react_b_ext_p50_ms": sw["b_p50_ms"], "react_b_ext_p99_ms": sw["b_p99_ms"], "react_b_ext_max_ms": sw["b_max_ms"],
        "swaps": sw["swaps"], "swaps_ok": sw["ok"],
        "swap_p50_ms": sw.get("swap_p50_ms"), "swap_p99_ms": sw.get("swap_p99_ms"),
        "api_ms_per_swap": round(au["swaps"]["api_ms"] / ok, 1),
        "lists_in_swaps": lists, "requests_idle": au["idle"]["total"], "lists_idle": idle_lists,
        "idle_window_s": round(d["idle_s"], 1),
        # The operator's own CPU per swap: its work, whatever else the machine runs.
        "operator_cpu_ms_per_swap": round(d["cpu_operator_swaps_s"] * 1e3 / ok, 2) if "cpu_operator_swaps_s" in d else None,
    }
    for p in ("a", "b"):
        for q, k in ((0.5, "p50"), (0.99, "p99")):
            v = hist_quantile(metrics, "modelpool_reaction_seconds", {"path": p}, q) if metrics else None
            r[f"react_{p}_int_{k}_ms"] = round(v, 2) if v is not None else None
    for k in ks:
        h = next((h for h in d.get("hung") or [] if h["k"] == k), None)
        r.update(hung_cols(d, h) if h else {c: None for c in hung_cols(EMPTY_RAW, dict(EMPTY_HUNG, k=k))})
    # The target excludes the API server's own time; the operator's histogram includes the round
    # trips of the writes between event and PATCH, so the main columns are the audit-derived own time.
    r["react_a_p99_ms"], r["react_b_p99_ms"] = r["react_a_own_p99_ms"], r["react_b_own_p99_ms"]
    for k in list(r):
        if isinstance(r[k], float) and k.endswith("_ms"):
            r[k] = round(r[k], 2)
    return r


def machine():
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) / 1024 / 1024
    cpu = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Linux {platform.release()}"


def fmt(v):
    return "" if v is None else str(v)


def plot(out, rows):
    if not shutil.which("gnuplot"):
        print("report: no gnuplot, no plots", file=sys.stderr)
        return
    cols = list(rows[0])
    data = os.path.join(out, "raw", "plot.dat")
    with open(data, "w") as f:
        for r in rows:
            f.write(" ".join("NaN" if r[c] is None else str(r[c]) for c in cols) + "\n")
    ix = lambda c: cols.index(c) + 1
    figs = [
        ("memory", "operator RSS (MiB)", [("rss_steady_mib", "steady"), ("rss_peak_mib", "peak")],
         [(16, "target 16 MiB at 1,000"), (32, "target 32 MiB at 10,000")]),
        ("coldstart", "seconds from start", [("caches_synced_s", "caches synced"), ("sync_s", "every pool status written")], []),
        ("reaction", "reaction p99 (ms)", [("react_a_int_p99_ms", "(a) operator histogram"), ("react_b_int_p99_ms", "(b) operator histogram"),
                                           ("react_a_own_p99_ms", "(a) operator own time (audit)"), ("react_b_own_p99_ms", "(b) operator own time (audit)"),
                                           ("react_a_ext_p99_ms", "(a) watch"), ("react_b_ext_p99_ms", "(b) watch")],
         [(10, "target 10 ms")]),
        ("requests", "API requests per swap", [("requests_per_swap", "requests per swap")], []),
        ("idle", "CPU seconds in the idle window", [("idle_cpu_s", "idle CPU")], []),
        ("cache", "bytes of cache per object", [("cache_bytes_per_object", "bytes per cached object")], []),
    ]
    for name, ylabel, series, lines in figs:
        series = [(c, t) for c, t in series if any(r[c] is not None for r in rows)]
        if not series:
            continue
        plots = [f"'{data}' using 1:{ix(c)} with linespoints lw 2 pt 7 title '{t}'" for c, t in series]
        plots += [f"{v} with lines dt 2 lc rgb 'red' title '{t}'" for v, t in lines]
        script = f"""set terminal png size 800,500
set output '{os.path.join(out, name + '.png')}'
set logscale x
set xrange [50:20000]
set xlabel 'pools (3 members each)'
set ylabel '{ylabel}'
set key top left
set grid
set yrange [0:*]
plot {', '.join(plots)}
"""
        r = subprocess.run(["gnuplot"], input=script.encode(), capture_output=True)
        if r.returncode:
            print(f"report: gnuplot failed on {name}: {r.stderr.decode()}", file=sys.stderr)


def plot_hung(out, rows, ks):
    """hung.png: reaction (a) and swap time against the number of pools hanging their probes."""
    rows = [r for r in rows if any(r.get(f"hung{k}_swaps") is not None for k in ks)]
    if not ks or not rows or not shutil.which("gnuplot"):
        return
    plots = []
    for r in rows:
        data = os.path.join(out, "raw", f"hung-{r['pools']}.dat")
        with open(data, "w") as f:
            for k, pre in [(0, "")] + [(k, f"hung{k}_") for k in ks]:
                vals = [r.get(pre + c) for c in ("react_a_ext_p50_ms", "react_a_ext_p99_ms", "swap_p50_ms", "swap_p99_ms")]
                f.write(f"{k} " + " ".join("NaN" if v is None else str(v) for v in vals) + "\n")
        for col, what in ((3, "(a) watch p99"), (2, "(a) watch p50"), (5, "swap p99")):
            plots.append(f"'{data}' using 1:{col} with linespoints lw 2 pt 7 title '{r['pools']} pools: {what}'")
    script = f"""set terminal png size 800,500
set output '{os.path.join(out, 'hung.png')}'
set xlabel 'other pools whose incumbents hang their idle probes (4 concurrent reconciles)'
set ylabel 'ms'
set logscale y
set xtics ({', '.join(str(k) for k in [0] + ks)})
set xrange [-0.5:{max(ks) + 0.5}]
set key top left
set grid
plot {', '.join(plots)}
"""
    r = subprocess.run(["gnuplot"], input=script.encode(), capture_output=True)
    if r.returncode:
        print(f"report: gnuplot failed on hung: {r.stderr.decode()}", file=sys.stderr)


def main(out):
    raws = []
    rawdir = os.path.join(out, "raw")
    for f in os.listdir(rawdir):
        if re.fullmatch(r"\d+\.json", f):
            raws.append(json.load(open(os.path.join(rawdir, f))))
    raws.sort(key=lambda d: d["pools"])
    ks = sorted({h["k"] for d in raws for h in d.get("hung") or []})
    rows = [row(d, ks) for d in raws]
    machs = [d.get("machine") or machine() for d in raws]
    mach = "; ".join(sorted(set(machs)))
    cols = list(rows[0])
    with open(os.path.join(out, "results.csv"), "w") as f:
        f.write(",".join(cols + ["machine"]) + "\n")
        for r, m in zip(rows, machs):
            f.write(",".join(fmt(r[c]) for c in cols) + f',"{m}"\n')
    main_cols = ["pools", "rss_steady_mib", "anon_steady_mib", "rss_peak_mib", "sync_s", "react_a_p99_ms",
                 "react_b_p99_ms", "requests_per_swap", "idle_cpu_s", "commit", "measured"]
    md = [f"# Benchmark results\n", f"Machine{'s (per row in results.csv)' if len(set(machs)) > 1 else ''}: {mach}. Produced by `bench/run.sh`; raw numbers in `raw/`, every column in `results.csv`.\n",
          "| " + " | ".join(main_cols) + " |", "|" + "---|" * len(main_cols)]
    for r in rows:
        md.append("| " + " | ".join(fmt(r[c]) for c in main_cols) + " |")
    detail = [c for c in cols if c not in main_cols]
    md += ["\nAll columns. Reaction: react_*_ext is the API server's view through a watch (event to event); "
           "react_*_own is the operator's own time on the path, from the watch event that starts it to the API "
           "server receiving the PATCH that ends it, less the time the operator's requests were in flight in the "
           "API server (audit log timestamps), so it is loopback, TLS, the idle probe and the operator's work; "
           "react_*_api is that API server time; react_*_int is the operator's histogram modelpool_reaction_seconds "
           "(from the watch event's arrival to the PATCH being sent, so it includes the API round trips of the writes "
           "in between; empty before the operator had /metrics). The main react columns are react_*_own_p99_ms "
           "(react_source), the measure the target names.\n",
           "| column | " + " | ".join(str(r["pools"]) for r in rows) + " |", "|---|" + "---|" * len(rows)]
    for c in detail:
        md.append(f"| {c} | " + " | ".join(fmt(r[c]) for r in rows) + " |")
    if ks:
        md += ["\nReaction while K other pools' incumbents hang their idle probes (`bench.py hung`): K pools get "
               "a swap requested while their incumbent's simulator accepts the probe and never answers, so the "
               "operator probes each until --probe-timeout (2 s), defers (IdleCheckFailed) and probes again 2 s "
               "later; meanwhile swaps are requested one after another in the other pools. K=0 is the swaps phase "
               "above. (a) watch: request annotation seen -> incumbent scaled to 0; own: the same less API server "
               "time; histogram: modelpool_reaction_seconds over the phase (buckets end at 5 s); swap: request "
               "sent -> pool Ready with the target resident.\n",
               "| pools | K hung | swaps ok | (a) watch p50 / p99 ms | (a) own p50 / p99 ms | (a) histogram p50 / p99 ms "
               "| (b) watch p50 / p99 ms | swap p50 / p99 ms | requests per swap |",
               "|---|---|---|---|---|---|---|---|---|"]
        pair = lambda r, a, b: f"{fmt(r.get(a))} / {fmt(r.get(b))}"
        for r in rows:
            if all(r.get(f"hung{k}_swaps") is None for k in ks):
                continue
            for k, pre in [(0, "")] + [(k, f"hung{k}_") for k in ks]:
                if r.get(pre + "swaps") is None:
                    continue
                md.append(f"| {r['pools']} | {k} | {r[pre + 'swaps_ok']}/{r[pre + 'swaps']} "
                          f"| {pair(r, pre + 'react_a_ext_p50_ms', pre + 'react_a_ext_p99_ms')} "
                          f"| {pair(r, pre + 'react_a_own_p50_ms', pre + 'react_a_own_p99_ms')} "
                          f"| {pair(r, pre + 'react_a_int_p50_ms', pre + 'react_a_int_p99_ms')} "
                          f"| {pair(r, pre + 'react_b_ext_p50_ms', pre + 'react_b_ext_p99_ms')} "
                          f"| {pair(r, pre + 'swap_p50_ms', pre + 'swap_p99_ms')} | {fmt(r[pre + 'requests_per_swap'])} |")
    pngs = ["memory", "coldstart", "reaction", "requests", "idle", "cache"] + (["hung"] if ks else [])
    md.append("\nPlots: " + ", ".join(f"`{n}.png`" for n in pngs) + "\n")
    notes = os.path.join(out, "notes.md")
    if os.path.exists(notes):
        md.append(open(notes).read())
    open(os.path.join(out, "results.md"), "w").write("\n".join(md) + "\n")
    plot(out, rows)
    plot_hung(out, rows, ks)
    print(open(os.path.join(out, "results.csv")).read())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
