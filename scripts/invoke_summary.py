#!/usr/bin/env python3
"""`make invoke`'s report: one line per record of the event sent, as `make demo`
prints them.

    invoke_summary.py EVENT ANSWER [WATCH_LOG]

EVENT is the event file that was sent (SQS records, or DynamoDB stream
records for the notifier), ANSWER what `cargo lambda invoke
--output-format json` wrote. Each record's outcome and its reason come from
the function's own log line (`message_id` or `sequence_number`, `outcome`,
`detail`) in WATCH_LOG
(default target/local-watch.log, which `make local` writes beside its
terminal); without it, a record shows only whether SQS would delete it or
redeliver it (the answer's batchItemFailures).

An answer that is an error (the function failed its cold start, or the
whole invocation) is printed as such, and the script exits 1.
"""
import json
import pathlib
import sys


def describe_stream(record):
    """A DynamoDB stream record of the orders table: the order and its status change."""
    change = record.get("dynamodb") or {}

    def status(image):
        return ((change.get(image) or {}).get("status") or {}).get("S") or "-"

    order = ((change.get("Keys") or {}).get("order_id") or {}).get("S", "?")
    return f"{order} {status('OldImage')} -> {status('NewImage')}"


def record_id(record):
    """What the answer's batchItemFailures name: SQS messageId, or a stream record's SequenceNumber."""
    if "messageId" in record:
        return record.get("messageId")
    return (record.get("dynamodb") or {}).get("SequenceNumber")


def describe(body):
    """What a record is, from its body: never more than ids, types and seqs."""
    try:
        ev = json.loads(body or "")
    except ValueError:
        return "(not JSON)"
    if not isinstance(ev, dict):
        return "(JSON, but not an event)"
    # SNS and EventBridge wrappers (the consumers accept both).
    if isinstance(ev.get("Message"), str):
        try:
            ev = json.loads(ev["Message"])
        except ValueError:
            return "(SNS, not JSON inside)"
    elif isinstance(ev.get("detail"), dict):
        ev = ev["detail"]
    if not isinstance(ev, dict):
        return "(JSON, but not an event)"
    if "orderId" in ev:
        return f"{ev.get('orderId')} {ev.get('type')} seq {ev.get('seq')}"
    if "accountId" in ev:
        return f"{ev.get('accountId')} {ev.get('type')} {ev.get('paymentId')}"
    return "(JSON, but not an event)"


def last_lines(log_path, ids):
    """The last log line naming each messageId (a redelivered id appears once per invoke)."""
    found = {}
    try:
        text = pathlib.Path(log_path).read_text(errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            v = json.loads(line[start:])
        except ValueError:
            continue
        if not isinstance(v, dict):
            continue
        mid = v.get("message_id") or v.get("sequence_number")
        if mid in ids and "outcome" in v:
            found[mid] = v
    return found


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    event = json.loads(pathlib.Path(sys.argv[1]).read_text())
    raw = pathlib.Path(sys.argv[2]).read_text().strip()
    log_path = sys.argv[3] if len(sys.argv) == 4 else "target/local-watch.log"
    try:
        answer = json.loads(raw)
    except ValueError:
        print(f"the function's answer is not JSON: {raw[:300]}")
        sys.exit(1)
    if isinstance(answer, dict) and "errorType" in answer:
        print(f"the invocation failed: {answer.get('errorType')}: {answer.get('errorMessage')}")
        sys.exit(1)
    failed = {f.get("itemIdentifier") for f in (answer or {}).get("batchItemFailures", [])}
    records = event.get("Records", [])
    ids = {record_id(r) for r in records}
    lines = last_lines(log_path, ids)
    for n, r in enumerate(records, 1):
        mid = record_id(r)
        stream = "dynamodb" in r
        # A failed stream record is retried with the rest of its shard.
        fate = ("retried" if stream else "returned") if mid in failed else ("done" if stream else "deleted")
        line = lines.get(mid)
        outcome = line.get("outcome", "?") if line else ("Failed/Early/…" if mid in failed else "acknowledged")
        detail = (line or {}).get("detail", "")
        what = describe_stream(r) if stream else describe(r.get("body"))
        print(f"   #{n:<2} {what:<36} {outcome:<13} {fate:<8} {detail}".rstrip())
    print(f"   batchItemFailures: {len(failed)} of {len(records)}"
          + ("" if lines else f"   (outcomes: see the `make local` terminal; no {log_path})"))


if __name__ == "__main__":
    main()
