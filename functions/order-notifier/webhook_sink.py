#!/usr/bin/env python3
"""The order notifier's webhook in the local loop (`make local`, `make smoke`):
a stand-in for the notification provider that prints every request it gets.

It listens where the notifier is told to post: the host and port of
NOTIFY_WEBHOOK_URL (functions/order-notifier/local.mk sets it for both), so
the two cannot disagree. Like a Stripe-style provider it deduplicates by the
Idempotency-Key header: the first request with a key is accepted (201), a
later one gets 200 and is printed as a repeat, changing nothing. A request
without the header is refused with 400 (the notifier always sends one).

Each request is one line on stdout:

    webhook: POST /notify Idempotency-Key: order-ord-1001-shipped (new) {"orderId": ...}

The body is printed as received: this is a local tool for sample data, and
seeing what the notifier sends is its purpose.
"""
import http.server
import os
import sys
import urllib.parse

SEEN = set()


class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        key = self.headers.get("Idempotency-Key")
        if not key:
            status, note = 400, "no Idempotency-Key: refused"
        elif key in SEEN:
            status, note = 200, "repeat: already accepted, nothing new"
        else:
            SEEN.add(key)
            status, note = 201, "new"
        print(f"webhook: {self.command} {self.path} Idempotency-Key: {key or '-'} ({note}) {body}", flush=True)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        # The one line above per request; not http.server's access log.
        pass


def main():
    raw = os.environ.get("NOTIFY_WEBHOOK_URL", "")
    url = urllib.parse.urlsplit(raw)
    if url.scheme != "http" or not url.hostname or not url.port:
        sys.exit("webhook_sink: NOTIFY_WEBHOOK_URL must be http://HOST:PORT/... (local.mk sets it)")
    server = http.server.ThreadingHTTPServer((url.hostname, url.port), Sink)
    print(f"webhook: the notifier's local provider on {url.scheme}://{url.hostname}:{url.port}, "
          "printing what it receives", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
