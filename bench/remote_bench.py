#!/usr/bin/env python3
"""Helpers of bench/run_remote.sh (gpufeed reading pack shards over HTTP on the loopback).

  remote_bench.py make-input DIR FILES KIB   FILES files of about KIB KiB each, half random and
                                             half repeated bytes (lz4 halves them), fixed seed
  remote_bench.py port                       a free TCP port on 127.0.0.1
  remote_bench.py nginx-conf DIR PORT ROOT   nginx.conf in DIR serving ROOT on PORT, logging each
                                             request's URI, Range, status and body bytes
  remote_bench.py curl-replay LOG BASE N OUT the ranged GETs an nginx access log recorded (206s),
                                             issued again by curl --parallel --parallel-max N
                                             against BASE; writes OUT (JSON: requests, bytes,
                                             seconds, bytes/s)
  remote_bench.py table OUT                  the table of the run's JSON files under OUT
"""
import gzip
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time


def make_input(d, files, kib):
    rng = random.Random(7)
    os.makedirs(d, exist_ok=True)
    for i in range(files):
        n = kib * 1024 + rng.randrange(-kib * 128, kib * 128)
        half = n // 2
        body = rng.randbytes(half) + bytes([i % 251]) * (n - half)
        with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
            f.write(body)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_conf(d, port, root):
    with open(os.path.join(d, "nginx.conf"), "w") as c:
        c.write("daemon off;\nmaster_process off;\nworker_processes 1;\n")
        c.write("pid %s/nginx.pid;\nerror_log %s/error.log warn;\n" % (d, d))
        c.write("events { worker_connections 1024; }\nhttp {\n")
        c.write("  log_format ranges '$uri $http_range $status $body_bytes_sent';\n")
        c.write("  access_log %s/access.log ranges;\n" % d)
        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            c.write("  %s_temp_path %s/%s;\n" % (t, d, t))
        c.write("  default_type application/octet-stream;\n  keepalive_requests 1000000;\n")
        c.write("  sendfile on;\n  server {\n    listen 127.0.0.1:%d;\n    root %s;\n  }\n}\n"
                % (port, root))


def curl_replay(log, base, parallel, out):
    reqs = []
    with (gzip.open(log, "rt") if log.endswith(".gz") else open(log)) as f:
        for line in f:
            p = line.split()
            if len(p) == 4 and p[1].startswith("bytes=") and p[2] == "206":
                reqs.append((p[0], p[1][6:], int(p[3])))
    cfg = out + ".curl.cfg"
    with open(cfg, "w") as c:
        for k, (uri, rng, _) in enumerate(reqs):
            if k:
                c.write("next\n")
            # Options after "next" apply to that transfer alone: each says them again.
            c.write('url = "%s%s"\nrange = "%s"\noutput = "/dev/null"\nsilent\nshow-error\n'
                    'write-out = "%%{size_download}\\n"\n' % (base, uri, rng))
    t0 = time.monotonic()
    r = subprocess.run(["curl", "-s", "--parallel", "--parallel-max", str(parallel),
                        "--parallel-immediate", "-K", cfg],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.monotonic() - t0
    got = sum(int(x) for x in r.stdout.split() if x.isdigit())
    res = {"requests": len(reqs), "bytes_expected": sum(b for _, _, b in reqs), "bytes": got,
           "seconds": secs, "bytes_per_s": got / secs if secs > 0 else 0, "parallel": parallel,
           "exit": r.returncode, "stderr": r.stderr[-500:]}
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def table(out):
    rows = []
    ref = {}
    for name, label in [("http_block_shuffled", "nginx, block_shuffled"),
                        ("http_shuffled", "nginx, shuffled"),
                        ("fault_none", "fault_server, no faults"),
                        ("fault_reset", "fault_server, resets"),
                        ("fault_slowdown", "fault_server, 503 SlowDown"),
                        ("local_block_shuffled", "local file, block_shuffled"),
                        ("local_shuffled", "local file, shuffled")]:
        j = load(os.path.join(out, name + ".json"))
        if not j:
            rows.append((label, None, None))
            continue
        run = j["loader"][j["best"]]
        rows.append((label, j, run))
        ref[name] = run
    print("%-28s %10s %9s %9s %9s %10s %9s %7s %7s %7s" %
          ("run", "records/s", "GB/s", "fetch GB/s", "requests", "fetch/dlv", "fetch/ds",
           "p50 ms", "p99 ms", "retries"))
    for label, j, run in rows:
        if not run:
            print("%-28s %s" % (label, "(did not run: see the log)"))
            continue
        net = run.get("remote")
        if net:
            fetch_gbps = net["bytes_fetched"] / run["seconds"] / 1e9
            print("%-28s %10.0f %9.3f %9.3f %9d %10.3f %9.3f %7.2f %7.2f %7d" %
                  (label, run["records_per_s"], run["gbps"], fetch_gbps, net["requests"],
                   net["fetched_per_delivered"], net["fetched_per_epoch_per_dataset"],
                   net["latency_p50_ms"], net["latency_p99_ms"], net["retries"]))
        else:
            print("%-28s %10.0f %9.3f %9s %9s %10s %9s %7s %7s %7s" %
                  (label, run["records_per_s"], run["gbps"], "-", "-", "-", "-", "-", "-", "-"))
    print()
    for order in ("block_shuffled", "shuffled"):
        c = load(os.path.join(out, "curl_%s.json" % order))
        run = ref.get("http_" + order)
        if not c or not run:
            continue
        fetch = run["remote"]["bytes_fetched"] / run["seconds"]
        print("curl replaying gpufeed's %s GETs (%d requests, %d bytes, --parallel-max %d): "
              "%.3f GB/s; gpufeed fetched at %.3f GB/s = %.2fx curl (target >= 0.9x)" %
              (order, c["requests"], c["bytes"], c["parallel"], c["bytes_per_s"] / 1e9,
               fetch / 1e9, fetch / c["bytes_per_s"] if c["bytes_per_s"] else 0))
    g = load(os.path.join(out, "http_ranged.json"))
    if g and g["storage"].get("remote"):
        s = g["storage"]
        print("gpufeed's ranged GETs alone (%d MiB each, no decoding): %.3f GB/s one stream, "
              "%.3f GB/s with %d; 1-byte GET latency p50 %.2f ms, p99 %.2f ms" %
              (s["block_bytes"] >> 20, s["single_gbps"], s["parallel_gbps"], s["streams"],
               s["latency_p50_ms"], s["latency_p99_ms"]))
    # Each round's faulty runs against that round's fault-free run; the median over rounds.
    for name in ("fault_reset", "fault_slowdown"):
        ratios, retries = [], 0
        for k in range(1, 100):
            suffix = "" if k == 1 else "_%d" % k
            base, run = (load(os.path.join(out, n + suffix + ".json"))
                         for n in ("fault_none", name))
            if not base or not run:
                break
            b, r = base["loader"][base["best"]], run["loader"][run["best"]]
            if b["records_per_s"] > 0:
                ratios.append(r["records_per_s"] / b["records_per_s"])
                retries += r["remote"]["retries"]
        if ratios:
            print("%s: %.2fx the fault-free records/s, median of %d rounds (%s; target >= 0.8x), "
                  "%d retries in all" % (name, statistics.median(ratios), len(ratios),
                                         " ".join("%.2f" % x for x in ratios), retries))
    bs = ref.get("http_block_shuffled")
    if bs:
        print("block_shuffled bytes fetched per epoch / dataset bytes: %.3f (target <= 1.05)" %
              bs["remote"]["fetched_per_epoch_per_dataset"])


def main():
    cmd = sys.argv[1]
    a = sys.argv[2:]
    if cmd == "make-input":
        make_input(a[0], int(a[1]), int(a[2]))
    elif cmd == "port":
        print(free_port())
    elif cmd == "nginx-conf":
        nginx_conf(a[0], int(a[1]), a[2])
    elif cmd == "curl-replay":
        curl_replay(a[0], a[1], int(a[2]), a[3])
    elif cmd == "table":
        table(a[0])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
