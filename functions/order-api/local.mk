# The order API in the local loop (`make local`, `make smoke`): its
# idempotency table (expiry is checked in code, so no TTL is needed
# locally), and its environment. The root Makefile includes every
# functions/*/local.mk.
IDEMPOTENCY_TABLE ?= idempotency
LOCAL_TABLES      += $(IDEMPOTENCY_TABLE):idempotency_key
# API_AUTH=none: `cargo lambda watch` serves the order API without API
# Gateway, so no authorizer sets a principal; locally every caller is one
# anonymous principal. Only here: the template's API_AUTH is iam or jwt, and
# the function's default (unset) is iam, which refuses such requests (403).
LOCAL_ENV         += IDEMPOTENCY_TABLE=$(IDEMPOTENCY_TABLE) API_AUTH=none
