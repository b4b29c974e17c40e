"""What template.yaml must hold for order-consumer: its entry in the template
checks (scripts/check_template.py loads every functions/*/template_check.py),
kept in this folder so that deleting the folder deletes its expectations too.
The keys are described above `STACK_OWNS` in scripts/check_template.py.
"""

# The logical id of the function in template.yaml.
FUNCTION = "OrderConsumerFunction"

EXPECT = {
    "deploy_param": "DeployOrderConsumer",
    # The orders table it writes is the stack's (STACK_OWNS): the order API
    # writes it too and the order notifier reads its stream.
    "owns": [
        "OrderQueue", "DeadLetterQueue", "OrderConsumerRole", "OrderConsumerLogGroup",
        "OrderConsumerFunction", "DeadLetterQueueAlarm", "FunctionErrorsAlarm",
        "OrderQueueAgeAlarm", "OrderConsumerThrottlesAlarm", "OrderConsumerEarlyAlarm",
        "OrderConsumerConflictAlarm", "OrderConsumerVisibilityFailedAlarm",
    ],
    "outputs": ["QueueUrl", "QueueArn", "DeadLetterQueueUrl", "DeadLetterQueueArn",
                "FunctionName", "LogGroupName"],
    "tables": {"OrdersTable": ({"dynamodb:UpdateItem"}, "order_id")},
    "env_tables": {"TABLE_NAME": "OrdersTable"},
    "env_vars": ["MAX_CONCURRENCY", "DEADLINE_MARGIN_MS", "DEDUPE_CACHE_SIZE", "METRICS_NAMESPACE",
                 "MAX_RECEIVE_COUNT"],
    "fifo_param": True,
    "emf_namespace": "OrderConsumer",
}
