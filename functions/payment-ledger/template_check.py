"""What template.yaml must hold for payment-ledger: its entry in the template
checks (scripts/check_template.py loads every functions/*/template_check.py),
kept in this folder so that deleting the folder deletes its expectations too.
The keys are described above `STACK_OWNS` in scripts/check_template.py.
"""

# The logical id of the function in template.yaml.
FUNCTION = "PaymentLedgerFunction"

EXPECT = {
    "deploy_param": "DeployPaymentLedger",
    "owns": [
        "PaymentQueue", "PaymentDeadLetterQueue", "LedgerTable", "AccountsTable", "PaymentLedgerRole",
        "PaymentLedgerLogGroup", "PaymentLedgerFunction", "PaymentDeadLetterQueueAlarm",
        "PaymentLedgerErrorsAlarm", "PaymentLedgerSuspendedAlarm", "PaymentQueueAgeAlarm",
        "PaymentLedgerThrottlesAlarm", "PaymentLedgerVisibilityFailedAlarm",
    ],
    "outputs": ["PaymentQueueUrl", "PaymentDeadLetterQueueUrl", "LedgerTableName", "AccountsTableName",
                "PaymentLedgerFunctionName"],
    "params": ["LedgerBatchSize"],
    # TransactWriteItems is authorised per item: Put of the entry,
    # Update of the capture and ConditionCheck that it is not parked on
    # the ledger, Update of the balance.
    "tables": {
        "LedgerTable": ({"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}, "entry_id"),
        "AccountsTable": ({"dynamodb:UpdateItem"}, "account_id"),
    },
    "env_tables": {"LEDGER_TABLE": "LedgerTable", "ACCOUNTS_TABLE": "AccountsTable"},
    "env_vars": ["MAX_CONCURRENCY", "DEADLINE_MARGIN_MS", "METRICS_NAMESPACE", "MAX_RECEIVE_COUNT"],
    "fifo_param": False,
    # EMF outcome counts that mean "a person must act": events parked in
    # suspense (acknowledged, so neither the DLQ nor Errors would show them).
    "outcome_alarms": ["Suspended"],
    # The dashboard charts its EMF metrics under this namespace.
    "emf_namespace": "PaymentLedger",
}
