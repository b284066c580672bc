#!/usr/bin/env python3
"""An HTTP/1.1 file server on the loopback interface that answers ranged GETs, and fails some of
them on purpose, the way a store or a network can: the remote byte source's tests start it.

It serves the files of --root with single-range support (Range: bytes=A-B, 206 with
Content-Range), a strong ETag, Last-Modified and If-Match (412 when it does not match), and
keep-alive. --fault chooses one failure; --rate is the share of requests it hits, drawn from a
random generator seeded with --seed in the order requests arrive (a client that reads from one
thread sees the same faults every run); the first --skip requests are never hit (the client's
opening request can be let through). Faults:

  reset        the connection is closed with a TCP reset, no answer
  slowdown     503 with S3's <Code>SlowDown</Code> XML body
  throttle     429 Too Many Requests
  error500     500 Internal Server Error
  stall        nothing is sent for --stall seconds, then the connection is closed
  stall_body   the headers and half the body are sent, then nothing for --stall seconds
  truncate     Content-Length says the whole range, half of it is sent, then the connection closes
  bad_range    Content-Range (and the bytes) start one byte later than asked
  long_body    Content-Range as asked, but one byte more of body (and Content-Length)
  not_found    404 (with S3's NoSuchKey XML)
  forbidden    403 (with S3's AccessDenied XML)
  no_range     Range is ignored: 200 with the whole file
  change       from the request after --skip on, the file has a new ETag and Last-Modified (and
               its bytes differ); with --ignore-if-match the server still answers 206, with the
               new validators

--no-etag leaves the ETag out of every answer (Last-Modified is then the only validator, and
If-Unmodified-Since is not checked by this server).

--sigv4 KEY_ID:SECRET:REGION checks every request's AWS Signature V4 (header-based, service s3)
as S3 does, recomputed from the request as it arrived (method, path, query, the signed headers,
x-amz-content-sha256, which must be the empty body's hash for a GET): 403 with S3's
SignatureDoesNotMatch (or AccessDenied when unsigned) when it does not hold.

Prints "PORT <n>" on its first line of output once it listens (port 0 chooses a free one).
"""
import argparse
import email.utils
import hashlib
import hmac
import http.server
import os
import random
import socket
import socketserver
import struct
import sys
import threading
import time


class State:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.count = 0

    def next_fault(self):
        """The fault for the request arriving now (None: answer it properly), and its number."""
        with self.lock:
            self.count += 1
            n = self.count
            draw = self.rng.random()
        if n <= self.args.skip:
            return None, n
        if self.args.fault == "change":
            return "change", n
        return (self.args.fault if draw < self.args.rate else None), n


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def sigv4_problem(handler, spec):
    """None when the request carries a valid SigV4 signature for spec (KEY_ID:SECRET:REGION),
    else what is wrong with it."""
    key_id, rest = spec.split(":", 1)
    secret, region = rest.rsplit(":", 1)
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "AccessDenied", "unsigned request"
    try:
        parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        cred = parts["Credential"].split("/")
        names = parts["SignedHeaders"].split(";")
        given = parts["Signature"]
    except (KeyError, ValueError):
        return "AuthorizationHeaderMalformed", "malformed Authorization"
    if len(cred) != 5 or cred[0] != key_id or cred[2:] != [region, "s3", "aws4_request"]:
        return "InvalidAccessKeyId", "wrong credential or scope"
    for needed in ("host", "x-amz-date", "x-amz-content-sha256"):
        if needed not in names:
            return "AccessDenied", needed + " not signed"
    amz_date = handler.headers.get("x-amz-date", "")
    payload = handler.headers.get("x-amz-content-sha256", "")
    if amz_date[:8] != cred[1] or payload != EMPTY_SHA256:
        return "AccessDenied", "date or payload hash"
    path, _, query = handler.path.partition("?")
    canonical_query = "&".join(sorted(query.split("&"))) if query else ""
    headers = "".join("%s:%s\n" % (n, " ".join(handler.headers.get(n, "").split())) for n in names)
    creq = "\n".join([handler.command, path, canonical_query, headers, ";".join(names), payload])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "/".join(cred[1:]),
                     hashlib.sha256(creq.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (cred[1], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, given):
        return "SignatureDoesNotMatch", "signature does not match"
    return None


def s3_error(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            '<RequestId>0</RequestId></Error>' % (code, message)).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no delayed-ACK wait

    def log_message(self, fmt, *args):  # quiet: the test's output is the client's
        pass

    def send_head(self, status, headers, length):
        """The status line, the headers and a Content-Length of `length`."""
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def send_plain(self, status, body=b"", headers=()):
        self.send_head(status, headers, len(body))
        if self.command != "HEAD":
            self.wfile.write(body)

    def reset(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        st = self.server.state
        args = st.args
        fault, _ = st.next_fault()
        if args.sigv4:
            problem = sigv4_problem(self, args.sigv4)
            if problem:
                return self.send_plain(403, s3_error(*problem))
        path = os.path.join(args.root, self.path.split("?", 1)[0].lstrip("/"))
        if not os.path.isfile(path):
            return self.send_plain(404, s3_error("NoSuchKey", "no such key"))
        stat = os.stat(path)
        size = stat.st_size
        etag = '"v1-%x"' % size
        mtime = stat.st_mtime
        if fault == "change":
            etag = '"v2-%x"' % size
            mtime += 86400
        validators = [("Accept-Ranges", "bytes"),
                      ("Last-Modified", email.utils.formatdate(mtime, usegmt=True))]
        if not args.no_etag:
            validators.append(("ETag", etag))
        if fault == "reset":
            return self.reset()
        if fault in ("slowdown", "throttle", "error500", "not_found", "forbidden"):
            status, code = {"slowdown": (503, "SlowDown"), "throttle": (429, "TooManyRequests"),
                            "error500": (500, "InternalError"), "not_found": (404, "NoSuchKey"),
                            "forbidden": (403, "AccessDenied")}[fault]
            return self.send_plain(status, s3_error(code, "injected"))
        if fault == "stall":
            time.sleep(args.stall)
            self.close_connection = True
            return
        want = self.headers.get("If-Match")
        if want is not None and not args.no_etag and want != etag and not args.ignore_if_match:
            return self.send_plain(412, s3_error("PreconditionFailed", "etag"), validators)
        rng = self.headers.get("Range")
        if rng is None or fault == "no_range":
            return self.send_file(200, path, 0, size, fault == "change", validators)
        first, last = self.parse_range(rng, size)
        if first is None:
            return self.send_plain(416, b"", [("Content-Range", "bytes */%d" % size)])
        if fault == "bad_range" and last + 1 < size:
            first, last = first + 1, last + 1
        headers = validators + [("Content-Range", "bytes %d-%d/%d" % (first, last, size))]
        if fault in ("truncate", "stall_body", "long_body"):
            body = self.file_bytes(path, first, last + 1 - first, False)
            length = len(body)
            if fault == "long_body":
                body += b"\0"
                length += 1
            self.send_head(206, headers, length)
            if fault == "long_body":
                return self.wfile.write(body)
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            if fault == "stall_body":
                time.sleep(args.stall)
            self.close_connection = True
            return
        self.send_file(206, path, first, last + 1 - first, fault == "change", headers)

    @staticmethod
    def file_bytes(path, offset, n, changed):
        """n bytes of the file at path from offset; every byte XOR 0x5A when changed (the
        object's other version)."""
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(n)
        return bytes(b ^ 0x5A for b in data) if changed else data

    def send_file(self, status, path, offset, n, changed, headers):
        """Answers status with n bytes of the file from offset: only those are read (sendfile
        where the bytes go as they are), so a ranged GET costs its range, not its file."""
        self.send_head(status, headers, n)
        if self.command == "HEAD":
            return
        if changed:
            return self.wfile.write(self.file_bytes(path, offset, n, True))
        self.wfile.flush()
        with open(path, "rb") as f:
            while n > 0:
                sent = os.sendfile(self.connection.fileno(), f.fileno(), offset, n)
                if sent == 0:
                    raise ConnectionError("file shrank while it was sent")
                offset += sent
                n -= sent

    @staticmethod
    def parse_range(value, size):
        if not value.startswith("bytes=") or "," in value:
            return None, None
        a, _, b = value[6:].partition("-")
        try:
            first = int(a)
            last = min(int(b), size - 1) if b else size - 1
        except ValueError:
            return None, None
        if first >= size or first > last:
            return None, None
        return first, last


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a connection the client (or a fault) closed early: expected here


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--fault", default="none")
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--stall", type=float, default=3.0)
    p.add_argument("--ignore-if-match", action="store_true")
    p.add_argument("--no-etag", action="store_true")
    p.add_argument("--sigv4", default="")
    args = p.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.state = State(args)
    sys.stdout.write("PORT %d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
