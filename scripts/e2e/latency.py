"""The early event's latency, before and after the retry backoff.

An OrderPaid is sent before its OrderPlaced. Once the function has returned
it as Early, the OrderPlaced is sent. What is measured is the time from that
send to the moment the order is PAID, i.e. the early event applied. This is
measured twice, on the deployed stack, with the same queue:

- RETRY_BACKOFF=off: the early event waits out the queue's whole visibility
  timeout before it comes back;
- RETRY_BACKOFF=on (the template's default): the function sets its
  visibility to about a second (ChangeMessageVisibilityBatch, which
  MiniStack implements), so it comes back in seconds.

The function's environment is switched with UpdateFunctionConfiguration,
which makes MiniStack start a fresh worker. The result is printed. The one
check is that, with the backoff on, the event was applied before the
queue's visibility timeout could have brought it back: without a
visibility change it could not have been.
"""

from __future__ import annotations

import time


def _set_backoff(lam, fn, mode, step):
    cfg = lam.get_function_configuration(FunctionName=fn)
    env = dict(cfg.get("Environment", {}).get("Variables", {}))
    env["RETRY_BACKOFF"] = mode
    lam.update_function_configuration(FunctionName=fn, Environment={"Variables": env})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cfg = lam.get_function_configuration(FunctionName=fn)
        got = cfg.get("Environment", {}).get("Variables", {}).get("RETRY_BACKOFF")
        if got == mode and cfg.get("LastUpdateStatus", "Successful") == "Successful":
            step(f"early-event latency: the function now runs with RETRY_BACKOFF={mode}")
            return
        time.sleep(0.5)
    raise RuntimeError(f"RETRY_BACKOFF={mode} not applied to {fn} within 60 s")


def _one(h, c, out, plan, mode, visibility):
    sqs, ddb, logs = c["sqs"], c["dynamodb"], c["logs"]
    qurl, table, group = out["QueueUrl"], out["TableName"], out["LogGroupName"]
    order = f"ord-lat-{mode}"
    early = h.event(order, 2, "OrderPaid")
    placed = h.event(order, 1, "OrderPlaced")
    plan.expect[order] = ("PAID", 2, [placed["eventId"], early["eventId"]])
    h.send_bodies(sqs, qurl, [h.body(early)], plan)

    # Wait for its first delivery: the function logs the Early outcome.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = [str(h.find_key(d, "outcome")) for d in h.parse_json_lines(h.function_log_lines(logs, group))
                if h.find_key(d, "event_id") == early["eventId"] and h.find_key(d, "outcome")]
        if "Early" in seen:
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"{order}: the early OrderPaid was not delivered within 60 s")

    t_pred = time.monotonic()
    h.send_bodies(sqs, qurl, [h.body(placed)], plan)
    deadline = t_pred + visibility * 3 + 60
    while time.monotonic() < deadline:
        item = h.get_order(ddb, table, order)
        if item and item.get("status", {}).get("S") == "PAID":
            return time.monotonic() - t_pred
        time.sleep(0.2)
    raise RuntimeError(f"{order}: not PAID {deadline - t_pred:.0f} s after its predecessor was sent")


def measure(h, c, out, plan, visibility, checks):
    """Both runs; prints the latencies and checks the one fact they show."""
    lam, fn = c["lambda"], out["FunctionName"]
    results = {}
    for mode in ("off", "on"):
        _set_backoff(lam, fn, mode, h.step)
        results[mode] = _one(h, c, out, plan, mode, visibility)
        h.step(f"early-event latency with RETRY_BACKOFF={mode}: applied {results[mode]:.1f} s "
               f"after its predecessor was sent")
    h.say(f"     early event, predecessor sent -> applied: before (RETRY_BACKOFF=off) {results['off']:.1f} s, "
          f"after (on) {results['on']:.1f} s; QueueVisibilityTimeout {visibility} s")
    checks.check(results["on"] < visibility,
                 f"with the backoff on, the early event was applied {results['on']:.1f} s after its predecessor, "
                 f"before the queue's {visibility} s visibility timeout could have returned it "
                 f"(off: {results['off']:.1f} s)",
                 f"on: {results['on']:.1f} s, off: {results['off']:.1f} s")
    return results
