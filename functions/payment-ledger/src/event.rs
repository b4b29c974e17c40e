//! The payment ledger's wire contract: one SQS body, parsed and validated
//! into a [`LedgerEvent`], or a specific [`ParseError`]. Shares the body
//! reading (size limit, JSON, SNS/EventBridge unwrapping) and the validated
//! newtypes with the order consumer.

use serde_json::Value;
use sha2::{Digest, Sha256};

use lambda_idempotency::wire::{
    Amount, Currency, Id, ParseError, Timestamp, as_object, invalid, parse_wrapped, req_amount_at,
    req_currency_at, req_id, req_str,
};

/// What the event does to the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Movement {
    /// Money in: `+amount` on the account, a new capture entry.
    Captured,
    /// Money back out of an earlier capture: `-amount`, a new refund entry.
    Refunded { refund_id: Id },
}

/// A validated ledger event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEvent {
    pub event_id: Id,
    pub movement: Movement,
    pub payment_id: Id,
    pub account_id: Id,
    pub amount: Amount,
    pub currency: Currency,
    pub occurred_at: Timestamp,
}

impl LedgerEvent {
    /// The wire name used in the `type` field.
    pub fn type_name(&self) -> &'static str {
        match self.movement {
            Movement::Captured => "PaymentCaptured",
            Movement::Refunded { .. } => "PaymentRefunded",
        }
    }

    /// The ledger entry this event creates: its idempotency key. The
    /// business id (payment, refund), not the eventId, so a producer that
    /// re-publishes the same capture under a new eventId is still a
    /// duplicate.
    pub fn entry_id(&self) -> String {
        match &self.movement {
            Movement::Captured => capture_entry_id(self.payment_id.as_str()),
            Movement::Refunded { refund_id } => format!("refund:{refund_id}"),
        }
    }

    /// Where an event that can never be posted is parked: its entry id under
    /// `suspense:`, so that one payment or refund is parked at most once,
    /// whichever eventId carries it (as its entry would be written once).
    pub fn suspense_entry_id(&self) -> String {
        format!("suspense:{}", self.entry_id())
    }

    /// The capture entry a refund draws on (for a capture, its own entry).
    pub fn capture_entry_id(&self) -> String {
        capture_entry_id(self.payment_id.as_str())
    }

    /// Where the capture a refund draws on is parked, if it could not be
    /// posted: derived from the paymentId alone, like the capture entry, so
    /// a refund's transaction can check it without a read.
    pub fn capture_suspense_entry_id(&self) -> String {
        format!("suspense:{}", self.capture_entry_id())
    }

    /// The signed amount the entry holds and the balance moves by.
    pub fn signed_amount(&self) -> i128 {
        let a = i128::from(self.amount.get());
        match self.movement {
            Movement::Captured => a,
            Movement::Refunded { .. } => -a,
        }
    }

    /// `ClientRequestToken` for one attempt at the transaction: derived
    /// from the event's content and `attempt` (unique per apply call), at
    /// most 36 characters. The SDK's own retries of that call resend the
    /// same token, so a retry of a transaction whose answer was lost is a
    /// no-op that reports success: this attempt did commit it. A
    /// redelivery is another attempt with another token, so the entry's
    /// condition judges it and it is counted as what it is, a Duplicate;
    /// with a token per event, DynamoDB would answer a redelivery within 10
    /// minutes with a success indistinguishable from a first commit.
    pub fn request_token(&self, attempt: &str) -> String {
        let mut h = Sha256::new();
        for part in [
            attempt,
            self.event_id.as_str(),
            self.type_name(),
            &self.entry_id(),
            self.payment_id.as_str(),
            self.account_id.as_str(),
            &self.amount.get().to_string(),
            self.currency.as_str(),
            self.occurred_at.as_str(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

pub fn capture_entry_id(payment_id: &str) -> String {
    format!("pay:{payment_id}")
}

/// Parse one SQS message body (plain, SNS- or EventBridge-wrapped).
pub fn parse_body(body: Option<&str>) -> Result<LedgerEvent, ParseError> {
    parse_wrapped(body, parse_event)
}

fn parse_event(value: &Value) -> Result<LedgerEvent, ParseError> {
    let obj = as_object(value, "(event)")?;
    let type_name = req_str(obj, "", "type")?;
    let refund = match type_name {
        "PaymentCaptured" => false,
        "PaymentRefunded" => true,
        _ => {
            return Err(ParseError::UnknownType {
                path: "type".into(),
            });
        }
    };
    let event_id = req_id(obj, "", "eventId")?;
    let payment_id = req_id(obj, "", "paymentId")?;
    let movement = if refund {
        Movement::Refunded {
            refund_id: req_id(obj, "", "refundId")?,
        }
    } else {
        Movement::Captured
    };
    let account_id = req_id(obj, "", "accountId")?;
    let amount = req_amount_at(obj, "", "amount")?;
    let currency = req_currency_at(obj, "", "currency")?;
    let occurred_at = Timestamp::try_from(req_str(obj, "", "occurredAt")?)
        .map_err(|reason| invalid("occurredAt", reason))?;
    Ok(LedgerEvent {
        event_id,
        movement,
        payment_id,
        account_id,
        amount,
        currency,
        occurred_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capture() -> Value {
        json!({"eventId": "evt-1", "type": "PaymentCaptured", "paymentId": "p1",
               "accountId": "acct-1", "amount": 500, "currency": "INR",
               "occurredAt": "2026-11-29T10:15:00Z"})
    }

    fn parse(v: &Value) -> Result<LedgerEvent, ParseError> {
        parse_body(Some(&v.to_string()))
    }

    #[test]
    fn parses_captures_and_refunds() {
        let c = parse(&capture()).expect("capture");
        assert_eq!(c.entry_id(), "pay:p1");
        assert_eq!(c.signed_amount(), 500);
        let mut r = capture();
        r["type"] = json!("PaymentRefunded");
        r["refundId"] = json!("r1");
        r["amount"] = json!(200);
        let r = parse(&r).expect("refund");
        assert_eq!(r.entry_id(), "refund:r1");
        assert_eq!(r.capture_entry_id(), "pay:p1");
        // The key the capture is parked under, whichever event parked it.
        assert_eq!(r.capture_suspense_entry_id(), c.suspense_entry_id());
        assert_eq!(r.capture_suspense_entry_id(), "suspense:pay:p1");
        assert_eq!(r.signed_amount(), -200);
    }

    #[test]
    fn bad_input_gets_a_specific_error() {
        let mut v = capture();
        v["type"] = json!("PaymentRefunded");
        assert_eq!(
            parse(&v),
            Err(ParseError::MissingField {
                path: "refundId".into()
            })
        );
        for (field, bad) in [
            ("amount", json!(0)),
            ("amount", json!(-5)),
            ("amount", json!(2.5)),
            ("currency", json!("inr")),
            ("accountId", json!("")),
            ("occurredAt", json!("yesterday")),
        ] {
            let mut v = capture();
            v[field] = bad.clone();
            assert!(parse(&v).is_err(), "{field} = {bad}");
        }
        let mut v = capture();
        v["type"] = json!("PaymentTeleported");
        assert!(matches!(parse(&v), Err(ParseError::UnknownType { path }) if path == "type"));
        assert_eq!(parse_body(None), Err(ParseError::MissingBody));
    }

    #[test]
    fn the_request_token_follows_the_attempt_the_event_and_its_content() {
        let a = parse(&capture()).unwrap();
        let t = a.request_token("attempt-1");
        assert_eq!(t.len(), 32, "ClientRequestToken allows at most 36");
        assert_eq!(parse(&capture()).unwrap().request_token("attempt-1"), t);
        assert_ne!(
            a.request_token("attempt-2"),
            t,
            "a redelivery is another attempt"
        );
        let mut changed = capture();
        changed["amount"] = json!(501);
        assert_ne!(parse(&changed).unwrap().request_token("attempt-1"), t);
        let mut other_event = capture();
        other_event["eventId"] = json!("evt-2");
        assert_ne!(parse(&other_event).unwrap().request_token("attempt-1"), t);
    }

    #[test]
    fn sns_wrapped_events_are_unwrapped() {
        let sns = json!({"Type": "Notification", "MessageId": "m-1", "TopicArn": "arn:aws:sns:eu-west-1:1:t",
                         "Message": capture().to_string()});
        assert_eq!(parse(&sns), parse(&capture()));
    }
}
