#!/usr/bin/env python3
"""Generate the sample SQS events in events/ and their manifest.

The files are committed; this script documents how they were made and keeps
md5OfBody honest. Run it again after changing a scenario:

    python3 scripts/gen_events.py

Each file is one SQS batch exactly as Lambda delivers it. The scenarios run
in order against one table (that is what `make demo` and the events test do),
so later files build on the orders that earlier files created.

The functions under functions/ keep their own samples and generator
(functions/<name>/gen_events.py, on this module's helpers); `make
check-events` runs them all.
"""
import base64
import hashlib
import json
import pathlib
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "events"
REGION = "us-east-1"
ACCOUNT = "111122223333"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:order-events"
FIFO_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:order-events.fifo"
BASE_MS = 1796551200000  # 2026-12-05T10:00:00Z

DATA = {
    "OrderPlaced": lambda o: {"customerId": f"cust-{o[-4:]}", "amount": 150000, "currency": "INR"},
    "OrderPaid": lambda o: {"paymentId": f"pay-{o[-4:]}", "amount": 150000, "currency": "INR"},
    "OrderShipped": lambda o: {"carrier": "BlueDart", "trackingId": f"BD{o[-4:]}IN"},
    "OrderDelivered": lambda o: {},
    "OrderCancelled": lambda o: {"reason": "customer request"},
}
SEQ_MINUTE = {1: 0, 2: 5, 3: 60, 4: 1440, 5: 1500}


def event(order, seq, typ, event_id=None, data=None):
    minute = SEQ_MINUTE.get(seq, seq * 10)
    return {
        "eventId": event_id or f"evt-{order[4:]}-{seq}",
        "orderId": order,
        "seq": seq,
        "type": typ,
        "occurredAt": f"2026-12-0{1 + minute // 1440}T{10 + (minute % 1440) // 60:02d}:{minute % 60:02d}:00Z",
        "data": DATA[typ](order) if data is None else data,
    }


def body_of(ev):
    return ev if isinstance(ev, str) else json.dumps(ev, separators=(",", ":"))


def sns(ev):
    msg_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "sns:" + body_of(ev)))
    return {
        "Type": "Notification",
        "MessageId": msg_id,
        "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:order-events",
        "Message": body_of(ev),
        "Timestamp": "2026-12-05T10:00:00.000Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQvi2egU3N858fiTDN6bkkOxYDVrY0Ad8L10Hs3zH81mtnPk5uvvolIC1CXGu43obcgFxeL3khZl8IKvO61GWB6jI9b5+gLPoBc1Q=",
        "SigningCertURL": f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem",
        "UnsubscribeURL": f"https://sns.{REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:{REGION}:{ACCOUNT}:order-events:{msg_id}",
    }


def eventbridge(ev):
    return {
        "version": "0",
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, "eb:" + body_of(ev))),
        "detail-type": ev["type"],
        "source": "com.example.orders",
        "account": ACCOUNT,
        "time": ev["occurredAt"],
        "region": REGION,
        "resources": [],
        "detail": ev,
    }


# messageId -> SentTimestamp: a redelivery (the same messageId again) keeps
# the timestamp of the send, as SQS does.
SENT_AT = {}


def record(name, ev, n, receive_count=1, fifo_group=None, message_id=None, queue_arn=None):
    body = body_of(ev)
    mid = message_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}#{n}"))
    sent = SENT_AT.setdefault(mid, BASE_MS + n * 1000)
    attrs = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": str(sent),
        "SenderId": "AROAEXAMPLEPRODUCER:order-service",
        "ApproximateFirstReceiveTimestamp": str(sent + 15),
    }
    if fifo_group:
        attrs.update({
            "SequenceNumber": str(18849496460467696128 + n),
            "MessageGroupId": fifo_group,
            # The producer's eventId, as docs/deployment.md advises: a re-publish of
            # the same event within SQS's 5-minute window is dropped.
            "MessageDeduplicationId": ev["eventId"],
        })
    handle = base64.b64encode(hashlib.sha512(f"{mid}:{receive_count}".encode()).digest()).decode()
    return {
        "messageId": mid,
        "receiptHandle": "AQEB" + handle,
        "body": body,
        "attributes": attrs,
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn or (FIFO_ARN if fifo_group else QUEUE_ARN),
        "awsRegion": REGION,
    }


def mid(name, n):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}#{n}"))


SCENARIOS = []


def scenario(file, title, items, out=OUT, manifest=SCENARIOS, queue_arn=None):
    """items: (kwargs for record(), expected outcome label)"""
    records = [record(file, n=i, queue_arn=queue_arn, **kw) for i, (kw, _) in enumerate(items)]
    manifest.append({"file": file, "title": title, "expect": [exp for _, exp in items]})
    (out / file).write_text(json.dumps({"Records": records}, indent=2) + "\n")


def main():
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    o = "ord-1001"
    scenario("01-happy-path.json", "ord-1001 goes through its whole lifecycle in order", [
        (dict(ev=event(o, 1, "OrderPlaced")), "Applied"),
        (dict(ev=event(o, 2, "OrderPaid")), "Applied"),
        (dict(ev=event(o, 3, "OrderShipped")), "Applied"),
        (dict(ev=event(o, 4, "OrderDelivered")), "Applied"),
    ])
    scenario("02-redelivered-duplicate.json",
             "ord-1001's OrderDelivered again: redelivered by SQS (same messageId) and re-published by the producer (new messageId)", [
        (dict(ev=event(o, 4, "OrderDelivered"), receive_count=2, message_id=mid("01-happy-path.json", 3)), "Duplicate"),
        (dict(ev=event(o, 4, "OrderDelivered")), "Duplicate"),
    ])
    o = "ord-1002"
    scenario("03-out-of-order-batch.json", "ord-1002's four events arrive shuffled in one batch; all apply, in seq order", [
        (dict(ev=event(o, 4, "OrderDelivered")), "Applied"),
        (dict(ev=event(o, 3, "OrderShipped")), "Applied"),
        (dict(ev=event(o, 1, "OrderPlaced")), "Applied"),
        (dict(ev=event(o, 2, "OrderPaid")), "Applied"),
    ])
    o = "ord-1003"
    scenario("04-early-event.json", "ord-1003's OrderPaid arrives before its OrderPlaced: retried, not dropped", [
        (dict(ev=event(o, 2, "OrderPaid")), "Early"),
    ])
    scenario("05-early-event-redelivered.json", "ord-1003's OrderPlaced arrives; SQS redelivers the early OrderPaid with it", [
        (dict(ev=event(o, 1, "OrderPlaced")), "Applied"),
        (dict(ev=event(o, 2, "OrderPaid"), receive_count=2, message_id=mid("04-early-event.json", 0)), "Applied"),
    ])
    scenario("06-stale-event.json", "a late copy of ord-1001's OrderShipped (seq 3) after OrderDelivered (seq 4): superseded", [
        (dict(ev=event("ord-1001", 3, "OrderShipped")), "Stale"),
    ])
    o = "ord-1005"
    scenario("07-illegal-transition.json",
             "ord-1005 is cancelled, then an OrderShipped comes; and a second OrderPlaced for ord-1001: both can never apply", [
        (dict(ev=event(o, 1, "OrderPlaced")), "Applied"),
        (dict(ev=event(o, 2, "OrderCancelled")), "Applied"),
        (dict(ev=event(o, 3, "OrderShipped")), "Rejected"),
        (dict(ev=event("ord-1001", 5, "OrderPlaced", event_id="evt-1001-replaced")), "Rejected"),
    ])
    bad_missing_seq = event("ord-1006", 2, "OrderPaid")
    del bad_missing_seq["seq"]
    scenario("08-poison-message.json", "valid events for ord-1006 beside a body that is not JSON, one without seq, and an unknown type", [
        (dict(ev=event("ord-1006", 1, "OrderPlaced")), "Applied"),
        (dict(ev="{\"eventId\": \"evt-1006-2\", \"orderId\": \"ord-1006\""), "Invalid"),
        (dict(ev=bad_missing_seq), "Invalid"),
        (dict(ev=event("ord-1006", 3, "OrderPlaced") | {"type": "OrderTeleported"}), "Invalid"),
        (dict(ev=event("ord-1006", 2, "OrderPaid", event_id="evt-1006-pay")), "Applied"),
    ])
    o = "ord-1007"
    scenario("09-sns-wrapped.json", "ord-1007's first events come through SNS (raw message delivery off)", [
        (dict(ev=sns(event(o, 1, "OrderPlaced"))), "Applied"),
        (dict(ev=sns(event(o, 2, "OrderPaid"))), "Applied"),
    ])
    scenario("10-eventbridge-wrapped.json", "ord-1007 ships and is delivered, through EventBridge", [
        (dict(ev=eventbridge(event(o, 3, "OrderShipped"))), "Applied"),
        (dict(ev=eventbridge(event(o, 4, "OrderDelivered"))), "Applied"),
    ])
    scenario("11-fifo-failing-group.json",
             "FIFO: in group ord-1008 OrderShipped comes before OrderPaid, so it and the rest of its group go back; group ord-1009 is unaffected", [
        (dict(ev=event("ord-1008", 1, "OrderPlaced"), fifo_group="ord-1008"), "Applied"),
        (dict(ev=event("ord-1009", 1, "OrderPlaced"), fifo_group="ord-1009"), "Applied"),
        (dict(ev=event("ord-1008", 3, "OrderShipped"), fifo_group="ord-1008"), "Early"),
        (dict(ev=event("ord-1009", 2, "OrderPaid"), fifo_group="ord-1009"), "Applied"),
        (dict(ev=event("ord-1008", 2, "OrderPaid"), fifo_group="ord-1008"), "NotAttempted"),
    ])
    scenario("12-conflicting-producer.json",
             "a producer bug: another event claims ord-1002's seq 4, and ord-1002's seq-4 event comes back with changed content", [
        (dict(ev=event("ord-1002", 4, "OrderDelivered", event_id="evt-1002-4-other")), "Conflict"),
        (dict(ev=event("ord-1002", 4, "OrderDelivered") | {"occurredAt": "2026-12-09T09:00:00Z"}), "Conflict"),
    ])
    scenario("13-changed-older-event.json",
             "ord-1001's OrderPaid (seq 2) comes back with another amount after OrderDelivered: a producer bug, not a stale copy", [
        (dict(ev=event("ord-1001", 2, "OrderPaid") | {"data": {"paymentId": "pay-1001", "amount": 1, "currency": "INR"}}), "Conflict"),
    ])
    producer_metadata = event("ord-1010", 1, "OrderPlaced") | {"source": "checkout", "detail-type": "OrderPlaced"}
    scenario("14-producer-metadata.json",
             "ord-1010's OrderPlaced carries its producer's own `source` and `detail-type` fields: still a plain event, not an EventBridge envelope", [
        (dict(ev=producer_metadata), "Applied"),
    ])
    o = "ord-1011"
    replaced = event(o, 2, "OrderPlaced", event_id="evt-1011-replaced")
    scenario("15-placed-out-of-turn.json",
             "a second OrderPlaced (seq 2) for ord-1011 arrives before the order exists: Early, it must not found the order", [
        (dict(ev=replaced), "Early"),
    ])
    scenario("16-placed-out-of-turn-redelivered.json",
             "ord-1011's real OrderPlaced (seq 1) arrives; the redelivered second OrderPlaced is then rejected in its turn", [
        (dict(ev=event(o, 1, "OrderPlaced")), "Applied"),
        (dict(ev=replaced, receive_count=2, message_id=mid("15-placed-out-of-turn.json", 0)), "Rejected"),
    ])
    (OUT / "scenarios.json").write_text(json.dumps(SCENARIOS, indent=2) + "\n")
    print(f"wrote {len(SCENARIOS)} scenarios to {OUT}")


if __name__ == "__main__":
    main()
