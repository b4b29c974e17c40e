"""What template.yaml must hold for order-api: its entry in the template
checks (scripts/check_template.py loads every functions/*/template_check.py),
kept in this folder so that deleting the folder deletes its expectations too.
The keys are described above `STACK_OWNS` in scripts/check_template.py.

Fed by an API Gateway HTTP API, not by a queue or a stream: no event
source mapping, no SQS, no stream, no SSM. It writes the orders table (the
order consumer's) and its own idempotency table.
"""

# The logical id of the function in template.yaml.
FUNCTION = "OrderApiFunction"

EXPECT = {
    "deploy_param": "DeployOrderApi",
    "owns": [
        "IdempotencyTable", "OrderApiRole", "OrderApiLogGroup", "OrderApiFunction", "OrderHttpApi",
        # SAM's stage of the HTTP API (named after the API, not the function).
        "OrderHttpApiApiGatewayDefaultStage",
        "OrderApi5xxAlarm", "OrderApiErrorsAlarm", "OrderApiThrottlesAlarm", "OrderApiInternalAlarm",
    ],
    "outputs": ["OrderApiUrl", "OrderApiFunctionName", "IdempotencyTableName"],
    "params": ["ApiFunctionTimeout", "IdempotencyTtlSeconds", "ApiThrottlingRateLimit", "ApiThrottlingBurstLimit"],
    # No other function reads single items or deletes any: with the API
    # off no role may (lower case: compared with the lowered action).
    "action_prefixes": ["dynamodb:getitem", "dynamodb:deleteitem"],
    "source": "http",
    # The claim (PutItem), the completed key and the order (Updates in
    # one TransactWriteItems, authorised per item), the release
    # (DeleteItem), and GET's GetItem.
    "tables": {
        "IdempotencyTable": ({"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}, "idempotency_key"),
        "OrdersTable": ({"dynamodb:UpdateItem", "dynamodb:GetItem"}, "order_id"),
    },
    "env_tables": {"TABLE_NAME": "OrdersTable", "IDEMPOTENCY_TABLE": "IdempotencyTable"},
    "env_vars": ["IDEMPOTENCY_TTL_SECONDS", "API_AUTH", "METRICS_NAMESPACE"],
    "fifo_param": False,
    # 500s: a deployment problem (missing table, IAM) no retry fixes.
    "outcome_alarms": ["Internal"],
    # The HTTP API (SAM's AWS::Serverless::HttpApi) and exactly these
    # routes, each integrated with the function (payload format 2.0).
    "http_api": "OrderHttpApi",
    "routes": {("POST", "/orders"), ("GET", "/orders/{orderId}")},
    # API Gateway gives up on an integration after 30 s: the function
    # must answer first (its timeout, default and parameter maximum).
    "max_timeout": 29,
    # Keys expire in code after IDEMPOTENCY_TTL_SECONDS (1..31536000);
    # DynamoDB's TTL on this attribute deletes them afterwards.
    "ttl": ("IdempotencyTable", "expires_at"),
    "ttl_env": ("IDEMPOTENCY_TTL_SECONDS", "IdempotencyTtlSeconds", 1, 31536000),
    # The dashboard charts its EMF line under this namespace: one count per
    # request's outcome, and ColdStart (its own metrics, not the record
    # outcomes of the queue and stream consumers).
    "emf_namespace": "OrderApi",
    "emf_metrics": {
        "Created", "Replayed", "Shown", "KeyReused", "InProgress", "Invalid", "Forbidden", "NotFound",
        "Unavailable", "Internal", "ColdStart",
    },
    # What `make deploy` (scripts/check_deploy_params.py) says before the
    # build, formatted with the deployment's parameter values.
    # ApiFunctionTimeout's range (below API Gateway's 30 s) and
    # IdempotencyTtlSeconds' (what the function accepts) are checked there
    # with every other parameter constraint.
    "deploy_note": (
        "order-api: timeout {ApiFunctionTimeout} s, keys answer for {IdempotencyTtlSeconds} s; "
        "no authorizer (add one before exposing it, docs/api.md); its URL is the stack output OrderApiUrl"
    ),
}
