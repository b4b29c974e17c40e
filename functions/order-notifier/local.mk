# The order notifier in the local loop (`make local`, `make smoke`): its
# notifications table, a local webhook to post to (webhook_sink.py, which
# prints every request with its Idempotency-Key), and its environment. The
# root Makefile includes every functions/*/local.mk.
NOTIFICATIONS_TABLE ?= notifications
# `make smoke` sets a free port (LOCAL_PORTS); `make local` uses this one.
NOTIFY_SINK_PORT    ?= 8011
LOCAL_PORTS         += NOTIFY_SINK_PORT
LOCAL_TABLES        += $(NOTIFICATIONS_TABLE):notification_id
# A literal URL: locally there is no SSM parameter to read (http:// is
# accepted for loopback hosts only). The sink listens where this points.
LOCAL_ENV           += NOTIFICATIONS_TABLE=$(NOTIFICATIONS_TABLE) NOTIFY_WEBHOOK_URL=http://127.0.0.1:$(NOTIFY_SINK_PORT)/notify
LOCAL_SERVICES      += functions/order-notifier/webhook_sink.py
