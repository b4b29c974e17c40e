#!/usr/bin/env python3
"""Generate the order notifier's sample events (events/ here): records of the
orders table's DynamoDB stream, shaped as Lambda delivers them (NEW_AND_OLD_IMAGES,
images as the order consumer writes its items), for `make invoke
FUNCTION=order-notifier EVENT=functions/order-notifier/events/...` and
`make smoke`. The files are committed; `make check-events` fails when this
script would change them. Run it again after changing a scenario:

    python3 functions/order-notifier/gen_events.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "events"
REGION = "us-east-1"
ACCOUNT = "111122223333"
STREAM_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/orders/stream/2026-12-01T00:00:00.000"


def image(order, status, seq, customer="cust-1", shipped=False):
    """An order item as the order consumer writes it (the attributes the notifier reads, and its seq)."""
    item = {
        "order_id": {"S": order},
        "status": {"S": status},
        "customer_id": {"S": customer},
        "last_event_seq": {"N": str(seq)},
        "history": {"L": [{"S": f"evt-{order}-{n}"} for n in range(1, seq + 1)]},
    }
    if shipped:
        item["carrier"] = {"S": "BlueDart"}
        item["tracking_id"] = {"S": f"trk-{order}"}
    return item


def record(n, order, old, new):
    """Stream record number `n` (its SequenceNumber and eventID), old and new images (None: absent)."""
    change = {
        "ApproximateCreationDateTime": 1796551200.0 + n,
        "Keys": {"order_id": {"S": order}},
        "SequenceNumber": f"{1000 + n:021}",
        "SizeBytes": 160,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if old is not None:
        change["OldImage"] = old
    if new is not None:
        change["NewImage"] = new
    return {
        "eventID": f"ev-{n}",
        "eventName": "INSERT" if old is None else ("REMOVE" if new is None else "MODIFY"),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": change,
        "eventSourceARN": STREAM_ARN,
    }


def write(name, records):
    (OUT / name).write_text(json.dumps({"Records": records}, indent=2) + "\n")


def main():
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    placed = image("ord-1001", "PLACED", 1)
    paid = image("ord-1001", "PAID", 2)
    shipped = image("ord-1001", "SHIPPED", 3, shipped=True)
    lifecycle = [
        record(1, "ord-1001", None, placed),  # order-confirmation
        record(2, "ord-1001", placed, paid),  # nothing to send
        record(3, "ord-1001", paid, shipped),  # shipping-notice
    ]
    write("01-placed-paid-shipped.json", lifecycle)
    # Lambda retries a batch whole: the notifications table says SENT, so
    # nothing is posted again.
    write("02-batch-retried.json", lifecycle)
    bad = image("ord-1002", "LOST", 2, customer="cust-2")
    write("03-cancelled-and-unreadable.json", [
        record(4, "ord-1002", None, image("ord-1002", "PLACED", 1, customer="cust-2")),
        record(5, "ord-1002", image("ord-1002", "PLACED", 1, customer="cust-2"),
               image("ord-1002", "CANCELLED", 2, customer="cust-2")),  # cancellation-notice
        record(6, "ord-1002", image("ord-1002", "CANCELLED", 2, customer="cust-2"), bad),  # unreadable status
    ])
    print(f"wrote the order notifier's sample events to {OUT}")


if __name__ == "__main__":
    main()
