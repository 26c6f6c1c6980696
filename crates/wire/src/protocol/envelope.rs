//! JSON-RPC 2.0 envelopes: the message shape, errors, and decoding and
//! encoding one line.

use super::*;

/// The literal `"2.0"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum JsonRpcVersion {
    /// JSON-RPC 2.0.
    #[serde(rename = "2.0")]
    V2,
}

/// One line on the wire: a request (`id` and `method`), a notification
/// (`method`, no `id`) or a response (`id` and exactly one of `result`,
/// `error`). Ids are non-negative integers chosen by the sender of the
/// request; each side numbers its own requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// Request or response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Request or notification method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request or notification params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// Success result (`null` for members that return nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RpcError {
    /// One of [`code`].
    pub code: i64,
    /// Human text.
    pub message: String,
    /// For [`code::SANDBOX_ERROR`]: the `SandboxError` object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// A closed sandbox error as `{code: -32000, data: <SandboxError>}`.
    pub fn sandbox(e: &SandboxError) -> Self {
        RpcError {
            code: code::SANDBOX_ERROR,
            message: e.to_string(),
            data: serde_json::to_value(e).ok(),
        }
    }

    /// A plain protocol error with no data.
    pub fn plain(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A classified incoming line.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to answer.
    Request {
        /// Its id.
        id: u64,
        /// Its method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A response to one of our requests.
    Response {
        /// The id we sent.
        id: u64,
        /// The result or the error.
        outcome: Result<Value, RpcError>,
    },
}

/// Why a line is not a protocol message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineViolation {
    /// Not JSON, or not the message shape.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Both `result` and `error`, or a response without an id.
    #[error("ambiguous message: {0}")]
    Ambiguous(&'static str),
}

/// Classifies one line (without its newline). Never panics; the work is
/// linear in the line's length.
///
/// # Errors
/// [`LineViolation`] for anything that is not a request, notification or
/// response of this protocol.
pub fn decode_line(line: &[u8]) -> Result<Incoming, LineViolation> {
    let msg: Message =
        serde_json::from_slice(line).map_err(|e| LineViolation::Malformed(e.to_string()))?;
    match (msg.id, msg.method) {
        (Some(id), Some(method)) => {
            if msg.result.is_some() || msg.error.is_some() {
                return Err(LineViolation::Ambiguous(
                    "a request carrying result or error",
                ));
            }
            Ok(Incoming::Request {
                id,
                method,
                params: msg.params.unwrap_or(Value::Null),
            })
        }
        (None, Some(method)) => {
            if msg.result.is_some() || msg.error.is_some() {
                return Err(LineViolation::Ambiguous(
                    "a notification carrying result or error",
                ));
            }
            Ok(Incoming::Notification {
                method,
                params: msg.params.unwrap_or(Value::Null),
            })
        }
        (Some(id), None) => {
            if msg.params.is_some() {
                return Err(LineViolation::Ambiguous("a response carrying params"));
            }
            match msg.error {
                Some(_) if msg.result.is_some() => Err(LineViolation::Ambiguous(
                    "a response with both result and error",
                )),
                Some(error) => Ok(Incoming::Response {
                    id,
                    outcome: Err(error),
                }),
                None => Ok(Incoming::Response {
                    id,
                    outcome: Ok(msg.result.unwrap_or(Value::Null)),
                }),
            }
        }
        (None, None) => Err(LineViolation::Ambiguous("neither a method nor an id")),
    }
}

/// Encodes a request line (with its newline).
pub fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: Some(id),
        method: Some(method.into()),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// Encodes a notification line (with its newline).
pub fn notification_line(method: &str, params: Value) -> Vec<u8> {
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: None,
        method: Some(method.into()),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// Encodes a response line (with its newline).
pub fn response_line(id: u64, outcome: Result<Value, RpcError>) -> Vec<u8> {
    let (result, error) = match outcome {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    line(&Message {
        jsonrpc: JsonRpcVersion::V2,
        id: Some(id),
        method: None,
        params: None,
        result: Some(result.unwrap_or(Value::Null)).filter(|_| error.is_none()),
        error,
    })
}

fn line(m: &Message) -> Vec<u8> {
    let mut out = serde_json::to_vec(m).unwrap_or_default();
    out.push(b'\n');
    out
}
