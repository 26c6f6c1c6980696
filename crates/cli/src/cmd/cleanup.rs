//! `checkfu sandbox cleanup`: sweeps the orphans of the CLI's scope through
//! the runtime's cleanup.

use std::process::ExitCode;

use checkfu_sandbox_contract::{CleanupResult, Timestamp};
use checkfu_sandbox_docker::Inventory;
use checkfu_sandbox_runtime::SandboxRuntime;

use super::backend::Backend;
use super::fail::Failure;
use super::out::StdoutGone;
use super::ProviderArg;

/// Flags of `checkfu sandbox cleanup`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "An instance is swept when it was created before now minus --older-than \
or its hard expiry has passed; a snapshot when its retention has passed or it was created before \
the cutoff. Only objects of the CLI's scope are considered: for Docker, containers, images and \
state-directory records labelled checkfu.sandbox.scope=<scope> (`cli`, or $CHECKFU_SCOPE) under \
the CLI's state directory ($CHECKFU_STATE_DIR, else /var/lib/checkfu/sandbox for root, else \
$XDG_STATE_HOME/checkfu/sandbox or ~/.local/state/checkfu/sandbox). Nothing else is touched.

--dry-run lists what would be removed, computed with the same rule from the provider's live \
objects (Docker: its inventory of labels and records), without removing anything. The memory \
oracle lives only inside one checkfu process, so it never has anything to sweep.

Examples:
  checkfu sandbox cleanup --provider docker                    # orphans older than 1h
  checkfu sandbox cleanup --provider docker --older-than 30m --dry-run
  CHECKFU_SCOPE=ci checkfu sandbox cleanup --provider docker --older-than 0s

Exit status: 0; 2 for a malformed duration; 125 when the provider failed; 141 when stdout was \
closed early (as a SIGPIPE death)."
)]
pub struct CleanupArgs {
    /// Provider to sweep.
    #[arg(long, value_enum, default_value_t = ProviderArg::Memory)]
    pub provider: ProviderArg,
    /// Orphan age: N followed by s, m, h or d (e.g. 30m, 2h, 1d).
    #[arg(long = "older-than", value_name = "DURATION", default_value = "1h", value_parser = parse_duration_seconds)]
    pub older_than: i64,
    /// List what would be removed without removing it.
    #[arg(long)]
    pub dry_run: bool,
}

/// Parses `30s`, `30m`, `2h`, `1d` (or plain seconds) into seconds.
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_duration_seconds(text: &str) -> Result<i64, String> {
    let bad = || format!("expected N followed by s, m, h or d (e.g. 30m), actual {text:?}");
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        Some(_) => (text, 's'),
        None => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let factor = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(factor)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .ok_or_else(bad)
}

/// What the provider's cleanup would remove from `inventory` at `now` with
/// cutoff `orphaned_before` and no pins: the rule of the contract's
/// `CleanupRequest`, with unknown times counting as orphaned and expired
/// as the Docker provider counts them.
pub fn would_remove(
    inventory: &Inventory,
    now: Timestamp,
    orphaned_before: Timestamp,
) -> CleanupResult {
    let swept = |t: &checkfu_sandbox_docker::ObjectTimes| {
        let orphaned = t.created_at.is_none_or(|c| c < orphaned_before);
        let expired = t.expires_at.is_none_or(|e| e <= now);
        orphaned || expired
    };
    CleanupResult {
        instances: inventory
            .instances
            .iter()
            .filter(|(_, t)| swept(t))
            .map(|(id, _)| id.clone())
            .collect(),
        snapshots: inventory
            .snapshots
            .iter()
            .filter(|(_, t)| swept(t))
            .map(|(id, _)| id.clone())
            .collect(),
    }
}

/// Runs the command.
pub fn run(args: CleanupArgs) -> ExitCode {
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        match sweep(&args).await {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(gone)) => gone.exit(),
            Err(f) => f.report(),
        }
    })
}

/// Sweeps (or lists) and prints; the inner result is stdout's.
async fn sweep(args: &CleanupArgs) -> Result<Result<(), StdoutGone>, Failure> {
    let backend = Backend::open(args.provider).await?;
    let mut runtime = SandboxRuntime::new(backend.clock());
    runtime.register(backend.provider());
    let adapter = runtime.adapter(backend.id())?;
    let now = runtime.clock().now();
    let orphaned_before = now.add_seconds(-args.older_than);
    let (verb, result) = if args.dry_run {
        let result = match &backend {
            Backend::Docker(d) => would_remove(&d.inventory().await?, now, orphaned_before),
            Backend::Memory(_) => CleanupResult::default(),
        };
        ("would remove", result)
    } else {
        (
            "removed",
            adapter.cleanup(now, orphaned_before, Vec::new()).await?,
        )
    };
    let mut listing = String::new();
    for id in &result.instances {
        listing.push_str(&format!("{verb} instance {id}\n"));
    }
    for id in &result.snapshots {
        listing.push_str(&format!("{verb} snapshot {id}\n"));
    }
    if let Err(gone) = super::out::print(&listing) {
        return Ok(Err(gone));
    }
    eprintln!(
        "checkfu: {verb} {} instance(s) and {} snapshot(s) of provider {} created before {orphaned_before}",
        result.instances.len(),
        result.snapshots.len(),
        backend.id()
    );
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_sandbox_docker::ObjectTimes;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_seconds("30m"), Ok(1_800));
        assert_eq!(parse_duration_seconds("2h"), Ok(7_200));
        assert_eq!(parse_duration_seconds("1d"), Ok(86_400));
        assert_eq!(parse_duration_seconds("0s"), Ok(0));
        assert_eq!(parse_duration_seconds("45"), Ok(45));
        for bad in ["", "m", "1w", "-1h", "1.5h", "h1", "99999999999999999d"] {
            assert!(parse_duration_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dry_run_uses_the_cleanup_rule() {
        let t = |s: &str| Timestamp::parse(s).unwrap();
        let now = t("2030-01-01T12:00:00.000Z");
        let cutoff = t("2030-01-01T11:00:00.000Z");
        let mut inv = Inventory::default();
        let fresh = ObjectTimes {
            created_at: Some(t("2030-01-01T11:30:00.000Z")),
            expires_at: Some(t("2030-01-02T00:00:00.000Z")),
        };
        inv.instances.insert("fresh".into(), fresh);
        inv.instances.insert(
            "old".into(),
            ObjectTimes {
                created_at: Some(t("2030-01-01T10:00:00.000Z")),
                ..fresh
            },
        );
        inv.instances.insert(
            "expired".into(),
            ObjectTimes {
                expires_at: Some(now),
                ..fresh
            },
        );
        inv.snapshots
            .insert("unknown".into(), ObjectTimes::default());
        inv.snapshots.insert("kept".into(), fresh);
        let r = would_remove(&inv, now, cutoff);
        assert_eq!(r.instances, vec!["expired", "old"]);
        assert_eq!(r.snapshots, vec!["unknown"]);
    }
}
