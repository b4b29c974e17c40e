# The payment ledger in the local loop (`make local`, `make smoke`): its two
# tables, created by the local DynamoDB, and its environment. The root
# Makefile includes every functions/*/local.mk.
LEDGER_TABLE   ?= ledger
ACCOUNTS_TABLE ?= accounts
LOCAL_TABLES   += $(LEDGER_TABLE):entry_id $(ACCOUNTS_TABLE):account_id
LOCAL_ENV      += LEDGER_TABLE=$(LEDGER_TABLE) ACCOUNTS_TABLE=$(ACCOUNTS_TABLE)
