#!/usr/bin/env python3
"""Generate the payment ledger's sample SQS events (events/ here) and their
manifest, on the helpers of the template's generator (scripts/gen_events.py).
The files are committed; `make check-events` fails when this script would
change them. Run it again after changing a scenario:

    python3 functions/payment-ledger/gen_events.py
"""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "scripts"))
import gen_events as g  # noqa: E402

LEDGER_OUT = HERE / "events"
LEDGER_ARN = f"arn:aws:sqs:{g.REGION}:{g.ACCOUNT}:payment-events"
LEDGER_SCENARIOS = []


def payment(typ, event_id, payment_id, account, amount, currency="INR", refund_id=None, minute=0):
    ev = {
        "eventId": event_id,
        "type": typ,
        "paymentId": payment_id,
        "accountId": account,
        "amount": amount,
        "currency": currency,
        "occurredAt": f"2026-12-05T{10 + minute // 60:02d}:{minute % 60:02d}:00Z",
    }
    if refund_id:
        ev["refundId"] = refund_id
    return ev


def ledger_scenario(file, title, items):
    g.scenario(file, title, items, out=LEDGER_OUT, manifest=LEDGER_SCENARIOS, queue_arn=LEDGER_ARN)


def ledger_main():
    LEDGER_OUT.mkdir(exist_ok=True)
    for old in LEDGER_OUT.glob("*.json"):
        old.unlink()
    cap1 = payment("PaymentCaptured", "evt-pay-1", "pay-1", "acct-1", 500000)
    ledger_scenario("01-captures.json", "two captures open two accounts", [
        (dict(ev=cap1), "Applied"),
        (dict(ev=payment("PaymentCaptured", "evt-pay-2", "pay-2", "acct-2", 120000)), "Applied"),
    ])
    ledger_scenario("02-duplicate-and-conflicting-capture.json",
                    "pay-1 re-published under a new eventId (same entry: Duplicate), and pay-1 again with another amount (Conflict)", [
        (dict(ev=cap1 | {"eventId": "evt-pay-1-republished"}), "Duplicate"),
        (dict(ev=cap1 | {"eventId": "evt-pay-1-changed", "amount": 499999}), "Conflict"),
    ])
    ref3 = payment("PaymentRefunded", "evt-ref-3", "pay-3", "acct-3", 30000, refund_id="ref-3", minute=30)
    ledger_scenario("03-refund-before-capture.json", "a refund of pay-3 arrives before pay-3's capture: retried, not dropped", [
        (dict(ev=ref3), "Early"),
    ])
    ledger_scenario("04-capture-then-redelivered-refund.json",
                    "pay-3's capture arrives with the redelivered refund: capture first, then the refund", [
        (dict(ev=ref3, receive_count=2, message_id=g.mid("03-refund-before-capture.json", 0)), "Applied"),
        (dict(ev=payment("PaymentCaptured", "evt-pay-3", "pay-3", "acct-3", 80000, minute=10)), "Applied"),
    ])
    ref5 = payment("PaymentRefunded", "evt-ref-5", "pay-1", "acct-1", 400000, refund_id="ref-5", minute=50)
    ledger_scenario("05-over-refund.json",
                    "two refunds of pay-1: the second would exceed what is left of the capture, and is parked in suspense", [
        (dict(ev=payment("PaymentRefunded", "evt-ref-4", "pay-1", "acct-1", 200000, refund_id="ref-4", minute=40)), "Applied"),
        (dict(ev=ref5), "Suspended"),
    ])
    pay6 = payment("PaymentCaptured", "evt-pay-6", "pay-6", "acct-1", 1000, currency="USD")
    ledger_scenario("06-currency-mismatch.json", "a USD capture for acct-1, which holds INR: parked in suspense", [
        (dict(ev=pay6), "Suspended"),
    ])
    bad = payment("PaymentRefunded", "evt-ref-7", "pay-2", "acct-2", 100, refund_id="ref-7")
    del bad["refundId"]
    ledger_scenario("07-poison-message.json", "a valid capture beside a body that is not JSON and a refund without refundId", [
        (dict(ev=payment("PaymentCaptured", "evt-pay-8", "pay-8", "acct-2", 5000)), "Applied"),
        (dict(ev="{\"eventId\": \"evt-broken\""), "Invalid"),
        (dict(ev=bad), "Invalid"),
    ])
    ledger_scenario("08-parked-redelivered.json",
                    "the parked refund and capture redelivered: their suspense entries exist, so Duplicate", [
        (dict(ev=ref5, receive_count=2, message_id=g.mid("05-over-refund.json", 1)), "Duplicate"),
        (dict(ev=pay6, receive_count=2, message_id=g.mid("06-currency-mismatch.json", 0)), "Duplicate"),
    ])
    ref9 = payment("PaymentRefunded", "evt-ref-9", "pay-6", "acct-1", 400, currency="USD", refund_id="ref-9", minute=20)
    ledger_scenario("09-refund-of-parked-capture.json",
                    "a refund of pay-6, whose capture is parked: parked too (never Early for ever), naming the capture's "
                    "suspense entry; the refund re-published under a new eventId finds it: Duplicate", [
        (dict(ev=ref9), "Suspended"),
        (dict(ev=ref9 | {"eventId": "evt-ref-9-republished"}), "Duplicate"),
    ])
    (LEDGER_OUT / "scenarios.json").write_text(json.dumps(LEDGER_SCENARIOS, indent=2) + "\n")
    print(f"wrote {len(LEDGER_SCENARIOS)} ledger scenarios to {LEDGER_OUT}")


if __name__ == "__main__":
    ledger_main()
