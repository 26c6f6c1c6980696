//! A checkfu sandbox provider: {{ID}}.
//!
//! Scaffolded by `checkfu sandbox init --lang rust`. It speaks the wire
//! protocol (PROTOCOL.md) on stdin/stdout and answers every member, but
//! allocates nothing yet: each member refuses with the typed error the
//! contract names for its situation, and the conformance hooks declare no
//! token, so `checkfu sandbox test --provider-cmd target/debug/{{ID}}`
//! records all nine cases as skips and fails none.

use std::io::{BufRead, Write};

use serde_json::{json, Value};

const CONTRACT: &str = "checkfu.sandbox/v1";
const WIRE: &str = "checkfu.sandbox.wire/v1";
const PROVIDER_ID: &str = "{{ID}}";
const MAX_LINE: usize = 202_375_168;
/// Tokens your implementation backs; a case needing one left out is a
/// recorded skip.
const TOKENS: &[&str] = &[];

/// The envelope: claim only what you enforce.
fn capabilities() -> Value {
    let axis = "not_enforced";
    json!({
        "placement": "runner",
        "tiers": ["container"],
        "platforms": [{"os": "linux", "architecture": "amd64"}],
        "image_mode": "profile",
        "package_managers": [],
        "network_modes": ["none"],
        "retention_modes": ["ephemeral_zdr"],
        "snapshots": false,
        "enforcement": {"filesystem": axis, "process": axis, "network": axis, "memory": axis,
            "cpu": axis, "pids": axis, "disk": axis, "duration": axis, "privilege": axis},
        "max_mounts": 0,
        "provider_revision": format!("{PROVIDER_ID}-0.1.0"),
        "materialization_revision": format!("{PROVIDER_ID}-mat-0.1.0"),
    })
}

fn text(params: &Value, pointer: &str) -> String {
    params.pointer(pointer).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// `Ok(result)` or `Err(SandboxError)` for one member.
fn member(method: &str, params: &Value) -> Option<Result<Value, Value>> {
    let instance = || json!({"_tag": "SandboxInstanceNotFound", "instance_id": text(params, "/instance_id")});
    let snapshot = |p: &str| json!({"_tag": "SandboxSnapshotNotFound", "snapshot_id": text(params, p)});
    Some(match method {
        "sandbox/capabilities" => Ok(capabilities()),
        "sandbox/provision" => Err(json!({"_tag": "SandboxCapabilityUnavailable",
            "requirement": "base_image", "detail": format!("{PROVIDER_ID} does not provision instances yet")})),
        "sandbox/writeFile" | "sandbox/activate" | "sandbox/execute" | "sandbox/readFile"
        | "sandbox/snapshot" | "sandbox/release" | "sandbox/destroy" => Err(instance()),
        "sandbox/cloneSnapshot" => Err(snapshot("/source/snapshot_id")),
        "sandbox/resume" => Err(snapshot("/snapshot/snapshot_id")),
        "sandbox/destroySnapshot" => Err(snapshot("/snapshot_id")),
        "sandbox/cleanup" => Ok(json!({"instances": [], "snapshots": []})),
        "sandbox/rollback" => Err(json!({"_tag": "SandboxOperationFailed", "operation": "rollback",
            "reason": "invalid_request", "message": "unknown rollback handle", "field": "handle",
            "expected": "a handle this provider issued", "actual": text(params, "/handle")})),
        "conformance/describe" => Ok(json!({"name": PROVIDER_ID, "declared_tokens": TOKENS,
            "root_image": format!("docker.io/library/busybox@sha256:{}", "0".repeat(64)),
            "tier": "container", "platform": {"os": "linux", "architecture": "amd64"},
            "clock_now": "2026-01-01T00:00:00.000Z", "manual_clock": false})),
        "conformance/liveObjects" => Ok(json!({"instances": [], "snapshots": []})),
        "conformance/close" | "conformance/stopListener" => Ok(Value::Null),
        _ => return None,
    })
}

fn answer(method: &str, params: &Value) -> Value {
    if method == "initialize" {
        for (field, mine) in [("contract_revision", CONTRACT), ("wire_revision", WIRE)] {
            if params.get(field).and_then(Value::as_str) != Some(mine) {
                return json!({"error": {"code": -32001, "message": "revision mismatch",
                    "data": {"field": field, "expected": mine, "actual": params.get(field)}}});
            }
        }
        return json!({"result": {"contract_revision": CONTRACT, "wire_revision": WIRE,
            "provider_id": PROVIDER_ID, "provider_name": PROVIDER_ID,
            "capabilities": capabilities(), "members": [], "conformance": true,
            "limits": {"max_line_bytes": MAX_LINE, "stdin_credit_bytes": 0,
                "replay_window_bytes": 0, "stream_chunk_bytes": 65536, "resume_window_ms": 0}}});
    }
    match member(method, params) {
        Some(Ok(v)) => json!({"result": v}),
        Some(Err(e)) if method.starts_with("conformance/") => {
            json!({"error": {"code": -32010, "message": "hook failed", "data": {"message": e.to_string()}}})
        }
        Some(Err(e)) => json!({"error": {"code": -32000, "message": e["_tag"].clone(), "data": e}}),
        None => json!({"error": {"code": -32601, "message": format!("method not found: {method}")}}),
    }
}

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut initialized = false;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        if line.len() > MAX_LINE {
            return;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { return };
        let Some(id) = msg.get("id").cloned() else { continue };
        let method = msg["method"].as_str().unwrap_or("");
        let mut reply = if method != "initialize" && !initialized {
            json!({"error": {"code": -32002, "message": "initialize first"}})
        } else {
            answer(method, &msg["params"])
        };
        initialized |= method == "initialize" && reply.get("result").is_some();
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = id;
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}
