//! `dynamo::send_conditional` against a local DynamoDB (in-process
//! dynoxide): a refusal carries the item it was checked against even when
//! the request never asked for it, for both operations it accepts.
#![cfg(feature = "dynamodb")]

use lambda_idempotency::dynamo::{Conditional, Item, n, s, send_conditional};
use lambda_idempotency_testing::{client_for, create_table, start_dynoxide, unique_name};

/// Each request below is built without `return_values_on_condition_check_failure`:
/// `send_conditional` must set ALL_OLD itself, or the refusal comes back
/// `Refused(None)`, which an adapter cannot tell from a missing item.
#[tokio::test]
async fn refusals_return_the_old_item_without_the_request_asking_for_it() {
    let client = client_for(&start_dynoxide().await);
    let table = unique_name("conditional");
    create_table(&client, &table, "pk").await.unwrap();
    let old = Item::from([("pk".to_owned(), s("k1")), ("balance".to_owned(), n(40))]);

    let put = || {
        client
            .put_item()
            .table_name(&table)
            .set_item(Some(old.clone()))
            .condition_expression("attribute_not_exists(pk)")
    };
    assert_eq!(send_conditional(put()).await, Ok(Conditional::Committed));
    assert_eq!(
        send_conditional(put()).await,
        Ok(Conditional::Refused(Some(old.clone()))),
        "PutItem"
    );

    let update = client
        .update_item()
        .table_name(&table)
        .key("pk", s("k1"))
        .update_expression("SET balance = balance - :amount")
        .condition_expression("balance >= :amount")
        .expression_attribute_values(":amount", n(60));
    assert_eq!(
        send_conditional(update).await,
        Ok(Conditional::Refused(Some(old))),
        "UpdateItem"
    );

    // A refusal against no item is `Refused(None)`, and means exactly that.
    let absent = client
        .update_item()
        .table_name(&table)
        .key("pk", s("k2"))
        .update_expression("SET balance = :amount")
        .condition_expression("attribute_exists(pk)")
        .expression_attribute_values(":amount", n(1));
    assert_eq!(
        send_conditional(absent).await,
        Ok(Conditional::Refused(None))
    );
}
