#!/usr/bin/env python3
"""`gpufeed bench URL` and `gpufeed doctor --data URL` against nginx on the loopback interface.

Packs small files with `gpufeed pack`, serves the shards with nginx (started here, stopped at
the end, everything in a temporary directory), then:
  - `gpufeed bench http://.../manifest.json --json`: the shards the manifest lists, the storage
    pass as ranged GETs, and each loader run's remote figures (requests, bytes fetched and
    delivered, latency p50/p99, retries) present and positive where they must be; the text
    report prints its remote table;
  - `gpufeed doctor --data http://.../missing.h5` (with a password and a signature in the URL):
    exit status 1, the storage check failed naming the URL (redacted) and the 404, the loader
    not run, and neither secret printed anywhere;
  - `gpufeed doctor --data URL` against fault_server.py answering 403 to every request, and
    against nginx over HTTPS under a certificate this machine does not trust (made with the
    openssl tool; skipped without it): the storage check fails with the 403 / TLS hint.
Every command runs under a timeout. Exit 77 (skipped) when nginx is not installed.

  check_remote_cli.py GPUFEED WORK_DIR FAULT_SERVER
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time

LIMIT = 60  # seconds per command


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=LIMIT)
    print("$ %s -> exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def start_nginx(work, root, tls=False):
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None)
    if not nginx:
        print("SKIP: nginx is not installed (scripts/setup.sh installs it)")
        sys.exit(77)
    d = os.path.join(work, "nginx-tls" if tls else "nginx")
    os.makedirs(d, exist_ok=True)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with open(os.path.join(d, "nginx.conf"), "w") as c:
        c.write("daemon off;\nmaster_process off;\nworker_processes 1;\n")
        c.write("pid %s/nginx.pid;\nerror_log %s/error.log warn;\n" % (d, d))
        c.write("events { worker_connections 256; }\nhttp {\n  access_log off;\n")
        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            c.write("  %s_temp_path %s/%s;\n" % (t, d, t))
        c.write("  default_type application/octet-stream;\n")
        c.write("  server {\n    listen 127.0.0.1:%d%s;\n    root %s;\n" %
                (port, " ssl" if tls else "", root))
        if tls:
            c.write("    ssl_certificate %s/cert.pem;\n    ssl_certificate_key %s/key.pem;\n"
                    % (d, d))
        c.write("  }\n}\n")
    p = subprocess.Popen([nginx, "-p", d + "/", "-c", os.path.join(d, "nginx.conf"), "-e",
                          os.path.join(d, "error.log")])
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    fail("nginx did not start")


def storage_check(r):
    """The doctor's storage check from its JSON report."""
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    return checks["storage"]


def check_fails_with(r, url, hint, what):
    st = storage_check(r)
    if r.returncode != 1 or st["status"] != "fail" or url not in st["summary"] or \
            hint not in st["hint"]:
        fail("doctor --data %s: exit %d, storage check %r" % (what, r.returncode, st))


def positive(obj, keys, where):
    for k in keys:
        v = obj.get(k)
        if not isinstance(v, (int, float)) or v <= 0:
            fail("%s: %s is %r, expected a positive number" % (where, k, v))


def main():
    gpufeed, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "in"))
    rng = random.Random(5)
    for i in range(120):
        with open(os.path.join(work, "in", "f%03d.bin" % i), "wb") as f:
            f.write(rng.randbytes(2000 + i * 30) + bytes(3000))
    if run([gpufeed, "pack", os.path.join(work, "in"), "-o", os.path.join(work, "www", "shards"),
            "--compress", "lz4", "--chunk-size", "64KiB", "--shard-size", "200000",
            "-q"]).returncode != 0:
        fail("gpufeed pack")
    server, port = start_nginx(work, os.path.join(work, "www"))
    try:
        base = "http://127.0.0.1:%d/shards/" % port
        r = run([gpufeed, "bench", base + "manifest.json", "--json", "--seconds", "2",
                 "--workers", "1,2", "--prefetch", "2"])
        if r.returncode != 0:
            fail("gpufeed bench URL: exit %d" % r.returncode)
        j = json.loads(r.stdout)
        if j["records"] != 120 or j["shards"] < 2 or j["format"] != "hdf5":
            fail("bench URL: %s records, %s shards" % (j["records"], j["shards"]))
        st = j["storage"]
        if st.get("remote") is not True or st.get("objects") != j["shards"]:
            fail("bench URL: storage is not the remote pass: %r" % st)
        positive(st, ["total_bytes", "single_gbps", "parallel_gbps", "latency_p50_ms",
                      "latency_p99_ms", "single_bytes"], "storage")
        if len(j["loader"]) != 2:
            fail("bench URL: %d loader runs, expected 2" % len(j["loader"]))
        for k, run_ in enumerate(j["loader"]):
            net = run_.get("remote")
            if not net:
                fail("bench URL: loader run %d has no remote figures" % k)
            positive(net, ["requests", "bytes_fetched", "bytes_delivered",
                           "fetched_per_delivered", "fetched_per_epoch_per_dataset",
                           "latency_p50_ms", "latency_p99_ms"], "loader run %d" % k)
            if net["retries"] != 0 or net["failures"] != 0:
                fail("bench URL: retries or failures against a healthy server: %r" % net)
            if net["latency_p99_ms"] < net["latency_p50_ms"]:
                fail("bench URL: p99 below p50: %r" % net)
            # The bench's automatic order on compressed shards reads whole units: each fetched
            # once, some ahead of their reads, never more ahead than in all.
            if not 0 < net["unit_fetches"] <= net["requests"] or \
                    not 0 <= net["unit_prefetches"] <= net["unit_fetches"] or net["unit_hits"] <= 0:
                fail("bench URL: unit counts: %r" % net)
        r = run([gpufeed, "bench", base + "manifest.json", "--seconds", "1", "--workers", "1"])
        if r.returncode != 0 or "remote (each run's requests" not in r.stdout or \
                "ranged GETs" not in r.stdout:
            fail("bench URL text report: exit %d, no remote table" % r.returncode)

        # doctor --data URL: a 404, the URL named redacted, secrets never printed.
        secret = "http://someone:hunter2@127.0.0.1:%d/shards/missing.h5?X-Amz-Signature=abcdef" % port
        shown = "127.0.0.1:%d/shards/missing.h5" % port
        r = run([gpufeed, "doctor", "--data", secret, "--loader-seconds", "1"])
        if r.returncode != 1:
            fail("doctor --data missing URL: exit %d, expected 1" % r.returncode)
        storage = next((l for l in r.stdout.splitlines() if "Storage read rate" in l), "")
        if not storage.startswith("[FAIL]") or shown not in storage or "404" not in storage:
            fail("doctor: the storage line does not fail naming the URL and 404: %r" % storage)
        if "does not exist (404)" not in r.stdout:
            fail("doctor: no hint for the 404")
        if "failed checks: storage" not in r.stderr:
            fail("doctor: stderr does not name the failed check")
        if "the loader was not run" not in r.stdout:
            fail("doctor: the loader ran over a URL that cannot be read")
        for s in ("hunter2", "abcdef"):
            if s in r.stdout or s in r.stderr:
                fail("doctor printed a secret of the URL")
        # JSON: the storage check's status and summary for scripts.
        r = run([gpufeed, "doctor", "--data", base + "missing.h5", "--json", "--loader-seconds",
                 "1"])
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        if r.returncode != 1 or checks["storage"]["status"] != "fail" or \
                base + "missing.h5" not in checks["storage"]["summary"]:
            fail("doctor --json: storage check %r" % checks.get("storage"))
    finally:
        server.kill()
        server.wait()

    # 403 from a store that refuses every request.
    fs = subprocess.Popen([sys.executable, sys.argv[3], "--root", os.path.join(work, "www"),
                           "--fault", "forbidden", "--rate", "1"], stdout=subprocess.PIPE,
                          text=True)
    try:
        port = int(fs.stdout.readline().split()[1])
        url = "http://127.0.0.1:%d/shards/manifest.json" % port
        r = run([gpufeed, "doctor", "--data", url, "--json", "--loader-seconds", "1"])
        check_fails_with(r, url, "refused access (403)", "a 403")
    finally:
        fs.kill()
        fs.wait()

    # TLS: a certificate nobody here trusts.
    openssl = shutil.which("openssl")
    if not openssl:
        print("openssl is not installed: the TLS case is not checked")
    else:
        d = os.path.join(work, "nginx-tls")
        os.makedirs(d, exist_ok=True)
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                        os.path.join(d, "key.pem"), "-out", os.path.join(d, "cert.pem")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=LIMIT,
                       check=True)
        server, port = start_nginx(work, os.path.join(work, "www"), tls=True)
        try:
            url = "https://127.0.0.1:%d/shards/manifest.json" % port
            r = run([gpufeed, "doctor", "--data", url, "--json", "--loader-seconds", "1"])
            check_fails_with(r, url, "TLS handshake failed", "an untrusted certificate")
        finally:
            server.kill()
            server.wait()
    print("OK")


if __name__ == "__main__":
    main()
