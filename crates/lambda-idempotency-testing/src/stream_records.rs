//! Read a table's DynamoDB stream from an in-process dynoxide, shaped as
//! Lambda delivers the records (the Streams API record plus
//! `eventSourceARN`). Shared by the tests and `make demo`; depends on nothing
//! else of theirs.

use serde_json::{Value, json};

fn req<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a Streams API request")
}

/// Every record of `table`'s stream so far, oldest first.
pub fn read(db: &dynoxide::Database, table: &str) -> Vec<Value> {
    let streams = db
        .list_streams(req(json!({"TableName": table})))
        .expect("ListStreams");
    let Some(arn) = streams.streams.first().map(|s| s.stream_arn.clone()) else {
        return Vec::new();
    };
    let shards = db
        .describe_stream(req(json!({"StreamArn": arn})))
        .expect("DescribeStream")
        .stream_description
        .shards;
    let mut out = Vec::new();
    for shard in shards {
        let mut iterator = db
            .get_shard_iterator(req(json!({"StreamArn": arn, "ShardId": shard.shard_id,
                                           "ShardIteratorType": "TRIM_HORIZON"})))
            .expect("GetShardIterator")
            .shard_iterator;
        while let Some(it) = iterator.take() {
            let page = db
                .get_records(req(json!({"ShardIterator": it})))
                .expect("GetRecords");
            if page.records.is_empty() {
                break;
            }
            for r in page.records {
                let mut v = serde_json::to_value(r).expect("a stream record");
                v["eventSourceARN"] = json!(arn);
                out.push(v);
            }
            iterator = page.next_shard_iterator;
        }
    }
    out
}
