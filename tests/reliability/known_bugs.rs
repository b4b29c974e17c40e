//! Failing tests for bugs the reliability suite found in `src/`. They are
//! `#[ignore]`d so the suite stays green until the fix lands; run them with
//!
//! ```sh
//! cargo nextest run --test reliability --run-ignored only
//! ```
//!
//! and remove the `#[ignore]` with the fix.
//!
//! BUG-1: a cancellation that overtakes the payment loses the payment.
//! `OrderCancelled` is guarded by `#st IN (:PLACED, :PAID) AND last_event_seq
//! < :seq` (src/store.rs, `Requires::StatusIn` branch of `apply`; the
//! transition table in src/domain.rs `EventKind::requires`). For the stream
//! Placed(1) → Paid(2) → Cancelled(3), if Cancelled(3) is delivered while the
//! order is still PLACED (Paid(2) not applied yet, e.g. it is being retried),
//! the guard holds and Cancelled applies. When Paid(2) then arrives,
//! `classify_refusal` (src/domain.rs) sees seq 2 < last_event_seq 3 and calls
//! it Stale, which is acknowledged: SQS deletes it. The final item is
//! CANCELLED with history [placed, cancelled] and no payment_id/paid_amount:
//! a paid order whose payment is gone from the table (nobody refunds it),
//! while the same messages delivered in seq order give history [placed,
//! paid, cancelled]. The final state depends on delivery order, and an
//! acknowledged message's effect is never committed.

use std::time::Duration;

use crate::convergence::check_convergence;
use crate::harness::Harness;
use crate::model::{Lifecycle, Order, Workload, ack_audit, assert_no_violations};
use crate::sqs::{DrainOpts, Queue, QueueConfig, drain};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "BUG-1: a cancellation that overtakes the payment loses the payment (see known_bugs.rs)"]
async fn bug1_cancellation_overtaking_the_payment_loses_the_payment() {
    let h = Harness::start(1, 1, |c| c).await;
    let order = Order::new("bug1-0".into(), Lifecycle::CancelledAfterPayment, 1, 1);
    let workload = Workload {
        orders: vec![order.clone()],
    };
    let queue = Queue::new(QueueConfig::default());
    let (audit, acked_uncommitted) = ack_audit(&h.db);
    let opts = DrainOpts {
        audit: Some(audit),
        max_wall: Duration::from_secs(30),
        ..Default::default()
    };
    // Delivery order Placed(1), Cancelled(3), Paid(2): the payment was slow
    // (a retry, a redelivery), the cancellation was not.
    for i in [0, 2, 1] {
        queue.send(order.events[i].body.clone(), None);
        drain(&queue, &h.envs, opts.clone()).await.unwrap();
    }
    h.finish("bug1").await;
    // OrderPaid was acknowledged (as Stale) without ever being applied...
    assert_no_violations("acknowledged-but-not-committed", &acked_uncommitted);
    // ...and the order's payment is not in the table.
    workload.assert_converged(&h.db).await;
}

#[test]
#[ignore = "BUG-1: finds the cancellation/payment race at random (see known_bugs.rs)"]
fn bug1_convergence_with_cancellations_after_payment() {
    check_convergence(
        file!(),
        &[Lifecycle::CancelledAfterPayment, Lifecycle::Delivered],
        16,
    );
}
