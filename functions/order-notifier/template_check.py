"""What template.yaml must hold for order-notifier: its entry in the template
checks (scripts/check_template.py loads every functions/*/template_check.py),
kept in this folder so that deleting the folder deletes its expectations too.
The keys are described above `STACK_OWNS` in scripts/check_template.py.

Fed by the orders table's stream, not by a queue: its checks are the
stream's (bisect, bounded retries, an on-failure destination).
"""

# The logical id of the function in template.yaml.
FUNCTION = "OrderNotifierFunction"

EXPECT = {
    "deploy_param": "DeployOrderNotifier",
    "owns": [
        "NotificationsTable", "NotifierFailureQueue", "OrderNotifierRole", "OrderNotifierLogGroup",
        "OrderNotifierFunction", "NotifierFailureQueueAlarm", "OrderNotifierIteratorAgeAlarm",
        "OrderNotifierRejectedAlarm", "OrderNotifierUnreadableAlarm", "OrderNotifierErrorsAlarm",
        "OrderNotifierThrottlesAlarm",
    ],
    "outputs": ["NotificationsTableName", "NotifierFailureQueueUrl", "OrderNotifierFunctionName"],
    # The orders table's stream has no other reader (see the template).
    "owned_properties": [("OrdersTable", "StreamSpecification")],
    # With the notifier off, no SSM parameter is named, granted or read.
    "params": ["NotifyWebhookUrlParameter", "NotifierBatchSize"],
    "action_prefixes": ["ssm:"],
    "source": "stream",
    "tables": {"NotificationsTable": ({"dynamodb:UpdateItem"}, "notification_id")},
    "streams": {
        "OrdersTable": {
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        }
    },
    "env_tables": {"NOTIFICATIONS_TABLE": "NotificationsTable"},
    "env_vars": ["NOTIFY_WEBHOOK_URL_PARAMETER", "MAX_CONCURRENCY", "DEADLINE_MARGIN_MS", "METRICS_NAMESPACE"],
    "fifo_param": False,
    # The webhook URL is a secret: the environment names its SSM
    # parameter (this variable, a Ref of this template parameter), never
    # holds the URL itself.
    "secret_parameter": ("NOTIFY_WEBHOOK_URL_PARAMETER", "NotifyWebhookUrlParameter"),
    "forbidden_env": ["NOTIFY_WEBHOOK_URL"],
    # Final refusals (HTTP 422) are counted under this EMF metric.
    "rejected_metric": "Rejected",
    # Stream records it can never read, recorded and skipped: each may
    # be a notification owed, so each pages.
    "outcome_alarms": ["Unreadable"],
    # The dashboard charts its EMF metrics under this namespace.
    "emf_namespace": "OrderNotifier",
    # What `make deploy` (scripts/check_deploy_params.py) says before the
    # build, formatted with the deployment's parameter values: the SSM
    # parameter must exist before the first invocation, and with the
    # notifier off none is needed.
    "deploy_note": (
        "order-notifier reads its webhook URL from the SSM SecureString parameter "
        "{NotifyWebhookUrlParameter} at cold start: create it first (docs/deployment.md), "
        "or deploy with DeployOrderNotifier=false"
    ),
    "off_note": "DeployOrderNotifier=false: no SSM parameter is needed",
}
