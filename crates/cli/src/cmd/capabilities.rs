//! `checkfu sandbox capabilities`: what a provider claims, as the runtime
//! decodes it, and the conformance tokens that envelope can back.

use std::process::ExitCode;

use checkfu_sandbox_conformance::token::UnbackedToken;
use checkfu_sandbox_conformance::Token;
use checkfu_sandbox_contract::wire::{decode_capabilities, encode};
use checkfu_sandbox_contract::{SandboxFailure, SandboxProviderCapabilities};
use checkfu_sandbox_docker::PoolStatus;
use checkfu_sandbox_runtime::{Enrollment, SandboxRuntime};
use serde_json::{json, Value};

use std::sync::Arc;

use checkfu_sandbox_contract::SandboxProvider;

use super::fail::Failure;
use super::ProviderFlags;

/// Flags of `checkfu sandbox capabilities`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The envelope is encoded and decoded through the strict wire codec and \
registered with the runtime (its cross-field rules are checked) before it is shown. A token is \
backed when the envelope claims what the token's conformance cases need.

Examples:
  checkfu sandbox capabilities
  checkfu sandbox capabilities --provider docker --json

Exit status: 0; 125 when the provider cannot be reached or its envelope is refused; 141 when \
stdout was closed early (as a SIGPIPE death)."
)]
pub struct CapabilitiesArgs {
    /// Provider to describe.
    #[command(flatten)]
    pub provider: ProviderFlags,
    /// Print JSON: {"provider", "capabilities", "tokens": [{"token", "backed", "needs"}]},
    /// and for the built-in Docker provider "pool": {"size", "closed", "shapes"}.
    #[arg(long)]
    pub json: bool,
}

/// The envelope of `provider` as the runtime accepted it, decoded from
/// its wire form.
///
/// # Errors
/// The decode error or the runtime's refusal of the envelope.
pub fn decoded_envelope(
    provider: Arc<dyn SandboxProvider>,
    enrollment: Option<&Enrollment>,
) -> Result<SandboxProviderCapabilities, SandboxFailure> {
    let mut runtime = SandboxRuntime::default();
    let id = provider.provider_id().to_owned();
    runtime.register_as(provider, enrollment)?;
    let adapter = runtime.adapter(&id)?;
    Ok(decode_capabilities(&encode(adapter.envelope()))?)
}

/// Each token with whether `envelope` backs it and, if not, what it needs.
pub fn tokens(envelope: &SandboxProviderCapabilities) -> Vec<(Token, Result<(), UnbackedToken>)> {
    Token::ALL
        .into_iter()
        .map(|t| (t, t.backed_by(envelope)))
        .collect()
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| match i {
                    Value::Object(o) if o.contains_key("os") && o.contains_key("architecture") => {
                        format!(
                            "{}/{}",
                            render_value(&o["os"]),
                            render_value(&o["architecture"])
                        )
                    }
                    other => render_value(other),
                })
                .collect();
            if parts.is_empty() {
                "(none)".into()
            } else {
                parts.join(", ")
            }
        }
        other => other.to_string(),
    }
}

/// The envelope as `field  value` rows, nested objects flattened with dots.
pub fn table_rows(envelope: &SandboxProviderCapabilities) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if let Value::Object(map) = serde_json::to_value(envelope).unwrap_or(Value::Null) {
        for (key, value) in map {
            match value {
                Value::Object(inner) => {
                    for (k, v) in inner {
                        rows.push((format!("{key}.{k}"), render_value(&v)));
                    }
                }
                other => rows.push((key, render_value(&other))),
            }
        }
    }
    rows
}

/// Runs the command.
pub fn run(args: CapabilitiesArgs) -> ExitCode {
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let choice = match args.provider.choice() {
        Ok(c) => c,
        Err(e) => return Failure::usage(e.to_string()).report(),
    };
    runtime.block_on(async move {
        let opened = super::until_stopped(super::backend::open(&choice)).await;
        let backend = match opened {
            Ok(Ok(b)) => b,
            Ok(Err(f)) => return f.report(),
            Err(code) => return code,
        };
        let id = backend.provider.provider_id().to_owned();
        let decoded = decoded_envelope(backend.provider.clone(), backend.enrollment.as_ref());
        let pool = backend.docker.as_ref().map(|d| d.pool_status());
        backend.close().await;
        let envelope = match decoded {
            Ok(e) => e,
            Err(f) => return Failure::sandbox(&f).report(),
        };
        let text = render(&id, &envelope, pool.as_ref(), args.json);
        match super::out::print(&text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(gone) => gone.exit(),
        }
    })
}

/// What the command prints: the JSON document, or the table. The Docker
/// provider's warm pool is shown beside the envelope, never inside it: the
/// envelope is the contract's and is compared for equality on every
/// re-check, the pool's counts change with every provision.
fn render(
    provider_id: &str,
    envelope: &SandboxProviderCapabilities,
    pool: Option<&PoolStatus>,
    json: bool,
) -> String {
    use std::fmt::Write as _;
    let tokens = tokens(envelope);
    let mut s = String::new();
    if json {
        let tokens: Vec<Value> = tokens
            .iter()
            .map(|(t, backed)| match backed {
                Ok(()) => json!({"token": t.as_str(), "backed": true}),
                Err(e) => json!({"token": t.as_str(), "backed": false, "needs": e.needs}),
            })
            .collect();
        let mut doc = json!({
            "provider": provider_id,
            "capabilities": envelope,
            "tokens": tokens,
        });
        if let (Some(pool), Value::Object(map)) = (pool, &mut doc) {
            map.insert("pool".into(), json!(pool));
        }
        let _ = writeln!(
            s,
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        );
    } else {
        let rows = table_rows(envelope);
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let _ = writeln!(s, "provider  {provider_id}\n");
        for (k, v) in rows {
            let _ = writeln!(s, "{k:<width$}  {v}");
        }
        let _ = writeln!(s, "\nconformance tokens:");
        let width = Token::ALL
            .iter()
            .map(|t| t.as_str().len())
            .max()
            .unwrap_or(0);
        for (t, backed) in tokens {
            let _ = match backed {
                Ok(()) => writeln!(s, "  {:<width$}  backed", t.as_str()),
                Err(e) => writeln!(s, "  {:<width$}  not backed: needs {}", t.as_str(), e.needs),
            };
        }
        if let Some(pool) = pool {
            let _ = writeln!(
                s,
                "\nwarm pool (not part of the envelope):\n  size per shape  {}{}",
                pool.size,
                if pool.size == 0 { " (off)" } else { "" }
            );
            for shape in &pool.shapes {
                let _ = writeln!(
                    s,
                    "  shape {}  ready {}  filling {}  hits {}  misses {}  mounts {}  image {}",
                    shape.shape,
                    shape.ready,
                    shape.filling,
                    shape.hits,
                    shape.misses,
                    shape.mounts,
                    shape.image
                );
            }
        }
    }
    s
}
