//! The order consumer's binary itself: what it does before it serves
//! anything. (Kept here when the batch tests moved to the library's
//! crates/lambda-idempotency/tests/engine: it is about this function.)

#[test]
fn the_binary_refuses_to_start_without_table_name() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_order-consumer"))
        .env_remove("TABLE_NAME")
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .output()
        .expect("run the binary");
    assert!(!out.status.success(), "must not start");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("TABLE_NAME is required"),
        "clear message, got: {text}"
    );
}
