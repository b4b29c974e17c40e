#!/usr/bin/env python3
"""Move a dead-letter queue's messages back to its source queue, for LOCAL
emulators only (MiniStack implements no StartMessageMoveTask).

On AWS, `make redrive` uses SQS's own StartMessageMoveTask; never use this
script there. It is the fallback `make redrive ENDPOINT=http://127.0.0.1:...`
and `make e2e` use, and it refuses any endpoint that is not on this machine.

For each message: ReceiveMessage from the DLQ (with its message attributes),
SendMessage to the source queue with the same body and message attributes,
and DeleteMessage from the DLQ only once that send has succeeded. A message
whose send failed stays in the DLQ (it becomes visible again after the
receive's visibility timeout). A crash between the send and the delete leaves
the message in both queues: a copy too many, never one too few, and the
consumers are idempotent. The move stops after as many messages as the DLQ
held when it started, so messages that fail again and come back while it runs
are not moved round in circles.

On a FIFO DLQ the copy keeps its MessageGroupId and gets the DLQ messageId as
MessageDeduplicationId: a fresh id (the original one may still be inside its
5-minute deduplication window, which would make SQS drop the copy), the same
for a retried move of the same DLQ message.

    redrive_local.py --endpoint URL --dlq-url URL --source-url URL
"""
import argparse
import sys
import urllib.parse

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def is_local(endpoint):
    return urllib.parse.urlsplit(endpoint or "").hostname in LOCAL_HOSTS


def _attributes(msg):
    """The message attributes as SendMessage takes them (no MD5 fields)."""
    out = {}
    for name, a in (msg.get("MessageAttributes") or {}).items():
        v = {"DataType": a["DataType"]}
        for k in ("StringValue", "BinaryValue"):
            if k in a:
                v[k] = a[k]
        out[name] = v
    return out


def move_messages(sqs, dlq_url, source_url, visibility=60, log=print):
    """Move what the DLQ holds now to source_url. Returns
    (moved: list of bodies, failed: int)."""
    attrs = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    budget = int(attrs.get("ApproximateNumberOfMessages", 0))
    fifo = dlq_url.endswith(".fifo")
    moved, failed, empty_polls = [], 0, 0
    log(f"redrive (local fallback): {budget} message(s) visible in {dlq_url}")
    while len(moved) + failed < budget and empty_polls < 3:
        resp = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=min(10, budget - len(moved) - failed),
            VisibilityTimeout=visibility,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        msgs = resp.get("Messages", [])
        if not msgs:
            empty_polls += 1
            continue
        empty_polls = 0
        entries = []
        for i, m in enumerate(msgs):
            e = {"Id": str(i), "MessageBody": m["Body"]}
            ma = _attributes(m)
            if ma:
                e["MessageAttributes"] = ma
            if fifo:
                e["MessageGroupId"] = m["Attributes"]["MessageGroupId"]
                e["MessageDeduplicationId"] = m["MessageId"]
            entries.append(e)
        sent = sqs.send_message_batch(QueueUrl=source_url, Entries=entries)
        ok = {s["Id"] for s in sent.get("Successful", [])}
        for f in sent.get("Failed", []):
            failed += 1
            log(f"redrive: NOT moved (stays in the DLQ): {msgs[int(f['Id'])]['MessageId']}: "
                f"{f.get('Code')} {f.get('Message', '')}")
        done = [(str(i), m) for i, m in enumerate(msgs) if str(i) in ok]
        if done:
            # Only now, with the copies accepted by the source queue.
            dele = sqs.delete_message_batch(
                QueueUrl=dlq_url,
                Entries=[{"Id": i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in done])
            for f in dele.get("Failed", []):
                log(f"redrive: moved but not deleted from the DLQ (it will be moved again): {f}")
            moved += [m["Body"] for _, m in done]
    log(f"redrive (local fallback): moved {len(moved)}, failed {failed}")
    return moved, failed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, help="the local emulator, e.g. http://127.0.0.1:4566")
    p.add_argument("--dlq-url", required=True)
    p.add_argument("--source-url", required=True)
    p.add_argument("--region", default="us-east-1")
    a = p.parse_args()
    if not is_local(a.endpoint):
        print(f"redrive_local: refusing {a.endpoint}: this fallback is for local emulators only; "
              "on AWS use `make redrive` (StartMessageMoveTask)", file=sys.stderr)
        return 2
    import boto3
    sqs = boto3.client("sqs", endpoint_url=a.endpoint, region_name=a.region)
    _, failed = move_messages(sqs, a.dlq_url, a.source_url)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
