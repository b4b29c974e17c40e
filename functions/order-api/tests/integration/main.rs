//! The order API's integration tests: the real handler code, fed requests
//! shaped as API Gateway sends them, against a real DynamoDB-compatible
//! server (in-process dynoxide, or `AWS_ENDPOINT_URL_DYNAMODB`).

mod api;
