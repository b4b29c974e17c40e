"""The Powertools for AWS Lambda (Python) baseline of `make bench` (section
`peer`): the order consumer written the way the Powertools documentation
suggests, SQS batch + idempotency, run by awslambdaric against the bench's
Runtime API emulator and its local DynamoDB (dynoxide).

- `BatchProcessor(event_type=EventType.SQS)` + `process_partial_response`:
  a failed record is reported in `batchItemFailures`, the others acked.
- `@idempotent_function` keyed on the event's `eventId` (in the SQS body),
  with `DynamoDBPersistenceLayer` (table IDEMPOTENCY_TABLE, hash key `id`,
  the default attribute names).
- Inside it, the business write: one conditional UpdateItem on the orders
  table (TABLE_NAME), modelled on src/orders/store.rs but not identical to
  it: the same status guard and `last_event_seq = :seq - 1` contiguity, the
  same status, seq, event id, type, time and history attributes; no content
  hash, no processed_hashes, no per-kind payload attributes, and a refusal
  is classified only as "already applied" (acked) or "not yet" (failed,
  redelivered), not Stale/Duplicate/Conflict/Rejected as the Rust consumer
  does.

boto3 reaches dynoxide through AWS_ENDPOINT_URL_DYNAMODB, which it honours.
"""

import json
import os
from datetime import datetime, timezone

import boto3
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

TABLE = os.environ["TABLE_NAME"]
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    # The record as the idempotent function sees it is the SQS record;
    # the eventId is inside its JSON body.
    event_key_jmespath="powertools_json(body).eventId",
    raise_on_no_idempotency_key=True,
)
processor = BatchProcessor(event_type=EventType.SQS)
dynamodb = boto3.client("dynamodb")

# The state machine of src/orders/domain.rs: which statuses an event may
# apply to (None: the order must not exist yet) and the status it leads to.
REQUIRES = {
    "OrderPlaced": None,
    "OrderPaid": ["PLACED"],
    "OrderShipped": ["PAID"],
    "OrderDelivered": ["SHIPPED"],
    "OrderCancelled": ["PLACED", "PAID"],
}
TARGET = {
    "OrderPlaced": "PLACED",
    "OrderPaid": "PAID",
    "OrderShipped": "SHIPPED",
    "OrderDelivered": "DELIVERED",
    "OrderCancelled": "CANCELLED",
}


class NotYet(Exception):
    """The order is not ready for this event: fail the record (redelivered)."""


def apply(event: dict) -> str:
    kind, seq = event["type"], int(event["seq"])
    values = {
        ":to": {"S": TARGET[kind]},
        ":seq": {"N": str(seq)},
        ":eid": {"S": event["eventId"]},
        ":type": {"S": kind},
        ":now": {"S": datetime.now(timezone.utc).isoformat()},
        ":nil": {"L": []},
        ":eidl": {"L": [{"S": event["eventId"]}]},
    }
    requires = REQUIRES[kind]
    if requires is None:
        condition = "attribute_not_exists(order_id)"
        if seq != 1:
            values[":prev"] = {"N": str(seq - 1)}
            condition += " AND last_event_seq = :prev"
    else:
        names = []
        for i, status in enumerate(requires):
            values[f":from{i}"] = {"S": status}
            names.append(f":from{i}")
        values[":prev"] = {"N": str(seq - 1)}
        condition = f"#st IN ({', '.join(names)}) AND last_event_seq = :prev"
    try:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"order_id": {"S": event["orderId"]}},
            UpdateExpression=(
                "SET #st = :to, last_event_seq = :seq, last_event_id = :eid, "
                "last_event_type = :type, updated_at = :now, "
                "history = list_append(if_not_exists(history, :nil), :eidl)"
            ),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return "applied"
    except dynamodb.exceptions.ConditionalCheckFailedException as e:
        item = e.response.get("Item") or {}
        stored = int(item.get("last_event_seq", {}).get("N", "0"))
        if stored >= seq:
            return "already applied"
        raise NotYet(f"{event['orderId']} seq {seq}: order at seq {stored}") from e


@idempotent_function(
    data_keyword_argument="record",
    config=config,
    persistence_store=persistence,
)
def record_handler(record: SQSRecord) -> str:
    return apply(json.loads(record.body))


def handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(
        event=event,
        record_handler=record_handler,
        processor=processor,
        context=context,
    )
