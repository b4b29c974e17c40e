"""The Powertools for AWS Lambda (Python) baseline of the order API in
`make bench` (section `api-peer`): `POST /orders` behind an API Gateway HTTP
API (payload format 2.0), written the way the Powertools documentation
suggests, run by awslambdaric against the bench's Runtime API emulator and
its local DynamoDB (dynoxide).

- `@idempotent` on the handler, keyed on the caller and the
  `Idempotency-Key` header (`requestContext.authorizer.iam.userArn`,
  `headers."idempotency-key"`), with the request body as the validated
  payload (`powertools_json(body)`: the same key with another body is
  refused), `DynamoDBPersistenceLayer` (table IDEMPOTENCY_TABLE, hash key
  `id`, the default attribute names), its defaults otherwise (no local
  cache, one hour expiry).
- Inside it, the business write: one conditional PutItem of the order
  (PLACED, seq 1) on the orders table (TABLE_NAME), modelled on what
  functions/order-api writes through the order consumer's store, not
  identical to it (no content hash, no processed hashes).
- What `@idempotent` raises (another body under the key, a request still in
  progress) becomes the 422 and 409 the Rust order API answers, so that the
  two speak the same HTTP; validation of the body is minimal.

boto3 reaches dynoxide through AWS_ENDPOINT_URL_DYNAMODB, which it honours.
"""

import json
import os
import uuid
from datetime import datetime, timezone

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

TABLE = os.environ["TABLE_NAME"]
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    event_key_jmespath='[requestContext.authorizer.iam.userArn, headers."idempotency-key"]',
    payload_validation_jmespath="powertools_json(body)",
    raise_on_no_idempotency_key=True,
)
dynamodb = boto3.client("dynamodb")


def problem(status: int, title: str) -> dict:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/problem+json"},
        "body": json.dumps({"status": status, "title": title}),
    }


@idempotent(config=config, persistence_store=persistence)
def create_order(event, context):
    order = json.loads(event["body"])
    order_id = f"ord_{uuid.uuid4().hex}"
    now = datetime.now(timezone.utc).isoformat()
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "order_id": {"S": order_id},
            "status": {"S": "PLACED"},
            "customer_id": {"S": str(order["customerId"])},
            "amount": {"N": str(int(order["amount"]))},
            "currency": {"S": str(order["currency"])},
            "last_event_seq": {"N": "1"},
            "last_event_id": {"S": f"{order_id}-placed"},
            "last_event_type": {"S": "OrderPlaced"},
            "updated_at": {"S": now},
            "history": {"L": [{"S": f"{order_id}-placed"}]},
        },
        ConditionExpression="attribute_not_exists(order_id)",
    )
    return {
        "statusCode": 201,
        "headers": {
            "content-type": "application/json",
            "location": f"/orders/{order_id}",
        },
        "body": json.dumps(
            {
                "orderId": order_id,
                "status": "PLACED",
                "customerId": order["customerId"],
                "amount": order["amount"],
                "currency": order["currency"],
                "createdAt": now,
            }
        ),
    }


def handler(event, context):
    try:
        return create_order(event, context)
    except IdempotencyValidationError:
        return problem(422, "this Idempotency-Key was used with another request")
    except IdempotencyAlreadyInProgressError:
        return problem(409, "a request with this Idempotency-Key is in progress")
