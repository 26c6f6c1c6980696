//! `checkfu sandbox cleanup`: sweeps the orphans of the CLI's scope through
//! the runtime's cleanup.

use std::collections::BTreeSet;
use std::process::ExitCode;

use checkfu_sandbox_runtime::SandboxRuntime;

use super::fail::Failure;
use super::out::StdoutGone;
use super::{ProviderArg, ProviderChoice, ProviderFlags};

/// Flags of `checkfu sandbox cleanup`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "An instance is swept when it was created before now minus --older-than \
or its hard expiry has passed; a snapshot when its retention has passed or it was created before \
the cutoff (a pin never saves an expired snapshot); the checkpoint `run --durable` recorded for a \
swept snapshot is removed with it. Only objects of the CLI's scope are considered: for Docker, containers, images and \
state-directory records labelled checkfu.sandbox.scope=<scope> (`cli`, or $CHECKFU_SCOPE) under \
the CLI's state directory ($CHECKFU_STATE_DIR, else /var/lib/checkfu/sandbox for root, else \
$XDG_STATE_HOME/checkfu/sandbox or ~/.local/state/checkfu/sandbox); for Linux, the records of that \
scope under its linux/ subdirectory, each instance's processes, mounts and cgroups going with it. \
Nothing else is touched.

--dry-run lists what would be removed, computed by the runtime with the same rule from the \
provider's live objects (Docker: its inventory of labels and records), without removing anything. \
The memory oracle lives only inside one checkfu process, so a fresh one has nothing to sweep.

Examples:
  checkfu sandbox cleanup --provider docker                    # orphans older than 1h
  checkfu sandbox cleanup --provider docker --older-than 30m --dry-run
  CHECKFU_SCOPE=ci checkfu sandbox cleanup --provider docker --older-than 0s
  checkfu sandbox cleanup --provider docker --scope conf-4242-0   # what a killed `sandbox test` left
  checkfu sandbox cleanup --provider docker --all-scopes --dry-run
  checkfu sandbox cleanup --provider linux --scope conf-4242-0    # Linux: its temporary state directory too

--scope NAME (repeatable) sweeps those scopes instead of the CLI's; --all-scopes every scope a \
checkfu.sandbox.scope label names at the daemon. A conformance scope (conf-*) belongs to a \
`checkfu sandbox test` run, whose own teardown removes it; when its process died first, the \
scope is swept whole, whatever --older-than says: every instance and snapshot (counted by the \
runtime's cleanup, listed by its dry run) and then every support object (Docker: listener and \
warm-pool containers, images, its network; Linux: allowlist links; both: the target's state \
directory), each listed as `removed <object>` (`would remove` with --dry-run) and counted. A \
conformance scope whose process is still running is not swept nor listed: a `skipped conformance \
scope` line names it and its pid.

Exit status: 0; 1 when every --scope named was skipped as a live run's; 2 for a malformed \
duration or scope name; 125 when the provider failed; 141 when stdout was \
closed early (as a SIGPIPE death)."
)]
pub struct CleanupArgs {
    /// Provider to sweep.
    #[command(flatten)]
    pub provider: ProviderFlags,
    /// Orphan age: N followed by s, m, h or d (e.g. 30m, 2h, 1d, 1h30m).
    #[arg(long = "older-than", value_name = "DURATION", default_value = "1h", value_parser = parse_duration_seconds)]
    pub older_than: i64,
    /// List what would be removed without removing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Sweep this Docker or Linux scope instead of the CLI's (repeatable).
    #[arg(long = "scope", value_name = "NAME", conflicts_with = "all_scopes", value_parser = super::cleanup_scope::parse_scope)]
    pub scopes: Vec<String>,
    /// Sweep every Docker scope a label names at the daemon (Linux: every scope a conformance target left, and the CLI's).
    #[arg(long)]
    pub all_scopes: bool,
}

/// Units `--older-than` takes: seconds, minutes, hours and days, as
/// humantime spells them. Weeks, months and years are refused: humantime
/// counts a month as 30.44 days and a year as 365.25, which is no way to
/// state an orphan's age.
const DURATION_UNITS: &[&str] = &[
    "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes", "h", "hr",
    "hrs", "hour", "hours", "d", "day", "days",
];

/// The longest `--older-than`, in seconds (100 years of days).
const MAX_OLDER_THAN_SECONDS: u64 = 100 * 365 * 86_400;

/// Parses a duration such as `30s`, `30m`, `2h`, `1d` or `1h30m` into
/// seconds, through humantime. A number needs its unit (`0` alone
/// excepted): on a command that deletes, `7` meant as days must not sweep
/// everything older than seven seconds.
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_duration_seconds(text: &str) -> Result<i64, String> {
    let bad = || format!("expected N followed by s, m, h or d (e.g. 30m), actual {text:?}");
    let units_known = text
        .split(|c: char| c.is_ascii_digit() || c.is_whitespace())
        .filter(|unit| !unit.is_empty())
        .all(|unit| DURATION_UNITS.contains(&unit));
    if !units_known {
        return Err(bad());
    }
    let seconds = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        match text.parse::<u64>() {
            Ok(0) => 0,
            _ => {
                return Err(format!(
                "a number needs its unit: s, m, h or d (e.g. {text}s or {text}d), actual {text:?}"
            ))
            }
        }
    } else {
        humantime::parse_duration(text)
            .map_err(|_| bad())?
            .as_secs()
    };
    if seconds > MAX_OLDER_THAN_SECONDS {
        return Err(bad());
    }
    i64::try_from(seconds).map_err(|_| bad())
}

/// Runs the command.
pub fn run(args: CleanupArgs) -> ExitCode {
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
        let swept = super::until_stopped(sweep(
            &args,
            &choice,
            backend.provider.clone(),
            backend.enrollment.as_ref(),
        ))
        .await;
        backend.close().await;
        match swept {
            Ok(Ok(Ok(()))) => ExitCode::SUCCESS,
            Ok(Ok(Err(gone))) => gone.exit(),
            Ok(Err(f)) => f.report(),
            Err(code) => code,
        }
    })
}

/// How far back one sweep reaches.
#[derive(Debug, Clone, Copy)]
enum Reach<'a> {
    /// Objects created before now minus `--older-than` (and the expired).
    OlderThan,
    /// Every object of this conformance scope, whatever its age: the scope
    /// belongs to a `checkfu sandbox test` whose process died first.
    WholeScope(&'a str),
}

type Printed = Result<Result<(), StdoutGone>, Failure>;

/// Sweeps (or lists) every scope asked for and prints; the inner result
/// is stdout's.
async fn sweep(
    args: &CleanupArgs,
    choice: &ProviderChoice,
    provider: std::sync::Arc<dyn checkfu_sandbox_contract::SandboxProvider>,
    enrollment: Option<&checkfu_sandbox_runtime::Enrollment>,
) -> Printed {
    if args.scopes.is_empty() && !args.all_scopes {
        return sweep_provider(
            args,
            provider,
            enrollment,
            Reach::OlderThan,
            &mut BTreeSet::new(),
        )
        .await;
    }
    if matches!(choice, ProviderChoice::Builtin(ProviderArg::Linux)) {
        return sweep_linux_scopes(args).await;
    }
    if !matches!(choice, ProviderChoice::Builtin(ProviderArg::Docker)) {
        return Err(Failure::usage(
            "--scope and --all-scopes name Docker or Linux scopes: use --provider docker or \
--provider linux",
        ));
    }
    use checkfu_sandbox_docker::conformance as conf;
    let scopes: Vec<String> = if args.all_scopes {
        let probe = super::backend::open_docker_scope(&super::backend::scope()).await?;
        conf::labelled_scopes(probe.docker())
            .await
            .map_err(Failure::checkfu)?
            .into_iter()
            .collect()
    } else {
        args.scopes.clone()
    };
    let mut live = Live::default();
    for scope in scopes {
        if live.skips(&scope) {
            continue;
        }
        if !scope.starts_with(conf::CONFORMANCE_SCOPE_PREFIX) {
            let provider = super::backend::open_docker_scope(&scope).await?;
            let arc = std::sync::Arc::new(provider);
            let mut seen = BTreeSet::new();
            if let Err(gone) = sweep_provider(args, arc, None, Reach::OlderThan, &mut seen).await? {
                return Ok(Err(gone));
            }
            continue;
        }
        // The target kept its records in a state directory of its own.
        let state = conf::conformance_state_dirs(&scope)
            .into_iter()
            .next()
            .unwrap_or_else(super::backend::state_dir);
        let provider = super::backend::open_docker_scope_at(&scope, state).await?;
        let before = conf::scope_support_objects(&provider)
            .await
            .map_err(|e| Failure::checkfu(format!("conformance scope {scope}: {e}")))?;
        let arc = std::sync::Arc::new(provider.clone());
        let reach = Reach::WholeScope(&scope);
        if let Err(gone) = sweep_provider(args, arc, None, reach, &mut BTreeSet::new()).await? {
            return Ok(Err(gone));
        }
        if args.dry_run {
            if let Err(gone) = print_support(&scope, "would remove", &before) {
                return Ok(Err(gone));
            }
            continue;
        }
        let problems = conf::sweep_conformance_scope(&provider).await;
        let after = conf::scope_support_objects(&provider)
            .await
            .map_err(|e| Failure::checkfu(format!("conformance scope {scope}: {e}")))?;
        let removed: Vec<String> = before.into_iter().filter(|o| !after.contains(o)).collect();
        if let Err(gone) = print_support(&scope, "removed", &removed) {
            return Ok(Err(gone));
        }
        if !problems.is_empty() {
            return Err(Failure::checkfu(format!(
                "conformance scope {scope}: {}",
                problems.join("; ")
            )));
        }
    }
    live.answer(args)
}

/// The conformance scopes skipped because their run is alive, and
/// whether any scope was swept.
#[derive(Debug, Default)]
struct Live {
    skipped: usize,
    swept: usize,
}

impl Live {
    /// True (and the skip line printed) when `scope` is a live run's.
    fn skips(&mut self, scope: &str) -> bool {
        match super::cleanup_scope::live_owner(scope) {
            Some(pid) => {
                eprintln!("{}", super::cleanup_scope::skipped_line(scope, pid));
                self.skipped += 1;
                true
            }
            None => {
                self.swept += 1;
                false
            }
        }
    }

    /// Success, unless every `--scope` named was skipped (a refusal, 1).
    fn answer(&self, args: &CleanupArgs) -> Printed {
        if !args.all_scopes && self.skipped > 0 && self.swept == 0 {
            return Err(Failure::refused(format!(
                "nothing swept: {} conformance scope(s) named belong to running `checkfu sandbox \
test` processes",
                self.skipped
            )));
        }
        Ok(Ok(()))
    }
}

/// Prints a conformance scope's support objects (`verb object` lines)
/// and their count by kind.
fn print_support(scope: &str, verb: &str, objects: &[String]) -> Result<(), StdoutGone> {
    let listing: String = objects.iter().map(|o| format!("{verb} {o}\n")).collect();
    super::out::print(&listing)?;
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for o in objects {
        let kind = ["container", "image", "network", "link", "state directory"]
            .into_iter()
            .find(|k| o.starts_with(&format!("{k} ")))
            .unwrap_or("object");
        match kinds.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind.to_owned(), 1)),
        }
    }
    let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}(s)")).collect();
    let by_kind = if by_kind.is_empty() {
        String::new()
    } else {
        format!(": {}", by_kind.join(", "))
    };
    if verb == "removed" {
        eprintln!(
            "checkfu: removed conformance scope {scope} ({} support object(s){by_kind})",
            objects.len()
        );
    } else {
        eprintln!(
            "checkfu: {verb} {} support object(s) of conformance scope {scope}{by_kind}",
            objects.len()
        );
    }
    Ok(())
}

/// `--scope`/`--all-scopes` for the Linux provider: the CLI's state
/// directory under each scope asked for, and every state directory a
/// conformance target of such a scope left in the temporary directory
/// (swept first: it holds the records, then removed). A conformance scope
/// is swept whole, and an instance both directories see (its cgroup is the
/// scope's) is listed and counted once.
async fn sweep_linux_scopes(args: &CleanupArgs) -> Printed {
    use checkfu_sandbox_linux::conformance::{
        conformance_state_dirs, scope_support_objects, sweep_conformance_scope,
        CONFORMANCE_SCOPE_PREFIX,
    };
    let left = conformance_state_dirs();
    let mut scopes: Vec<String> = if args.all_scopes {
        let mut all: Vec<String> = left.iter().map(|(s, _)| s.clone()).collect();
        all.push(super::backend::scope());
        all
    } else {
        args.scopes.clone()
    };
    scopes.sort();
    scopes.dedup();
    let mut live = Live::default();
    for scope in scopes {
        if live.skips(&scope) {
            continue;
        }
        let conformance = scope.starts_with(CONFORMANCE_SCOPE_PREFIX);
        let mut dirs: Vec<(std::path::PathBuf, bool)> = left
            .iter()
            .filter(|(s, _)| *s == scope)
            .map(|(_, d)| (d.clone(), true))
            .collect();
        dirs.push((super::backend::linux_state_dir(), false));
        let reach = if conformance {
            Reach::WholeScope(&scope)
        } else {
            Reach::OlderThan
        };
        let support = |dir: std::path::PathBuf| {
            let scope = scope.clone();
            async move {
                let provider = super::backend::open_linux(&scope, dir)?;
                scope_support_objects(&provider)
                    .await
                    .map_err(|e| Failure::checkfu(format!("conformance scope {scope}: {e}")))
            }
        };
        let before = if conformance {
            support(super::backend::linux_state_dir()).await?
        } else {
            Vec::new()
        };
        let mut seen = BTreeSet::new();
        let mut problems = Vec::new();
        for (dir, of_target) in dirs {
            let provider = super::backend::open_linux(&scope, dir)?;
            let arc = std::sync::Arc::new(provider.clone());
            if let Err(gone) = sweep_provider(args, arc, None, reach, &mut seen).await? {
                return Ok(Err(gone));
            }
            if of_target && !args.dry_run {
                problems.extend(sweep_conformance_scope(&provider).await);
            }
        }
        if !conformance {
            continue;
        }
        let (verb, objects) = if args.dry_run {
            ("would remove", before)
        } else {
            let after = support(super::backend::linux_state_dir()).await?;
            let removed = before.into_iter().filter(|o| !after.contains(o)).collect();
            ("removed", removed)
        };
        if let Err(gone) = print_support(&scope, verb, &objects) {
            return Ok(Err(gone));
        }
        if !problems.is_empty() {
            return Err(Failure::checkfu(format!(
                "conformance scope {scope}: {}",
                problems.join("; ")
            )));
        }
    }
    live.answer(args)
}

/// The runtime's cleanup (or its dry run) of one provider, printed: one
/// `verb instance|snapshot <id>` line per object not in `seen` (which it
/// then joins), and their count.
async fn sweep_provider(
    args: &CleanupArgs,
    provider: std::sync::Arc<dyn checkfu_sandbox_contract::SandboxProvider>,
    enrollment: Option<&checkfu_sandbox_runtime::Enrollment>,
    reach: Reach<'_>,
    seen: &mut BTreeSet<String>,
) -> Printed {
    let provider_id = provider.provider_id().to_owned();
    let mut runtime = SandboxRuntime::new(super::backend::clock());
    runtime
        .register_as(provider, enrollment)
        .map_err(|e| Failure::sandbox(&e.into()))?;
    let adapter = runtime.adapter(&provider_id)?;
    let now = runtime.clock().now();
    let orphaned_before = match reach {
        Reach::OlderThan => now.add_seconds(-args.older_than),
        Reach::WholeScope(_) => now,
    };
    let (verb, result) = if args.dry_run {
        let would = adapter.cleanup_dry_run(now, orphaned_before, Vec::new());
        ("would remove", would.await?)
    } else {
        let swept = adapter.cleanup(now, orphaned_before, Vec::new());
        ("removed", swept.await?)
    };
    if !args.dry_run {
        // A swept snapshot can no longer be resumed: forget its checkpoint.
        let store = super::snapshots::store();
        for id in &result.snapshots {
            if let Err(e) = store.forget(id) {
                eprintln!("checkfu: checkpoint of snapshot {id}: cannot remove it: {e}");
            }
        }
    }
    let instances: Vec<&String> = result
        .instances
        .iter()
        .filter(|id| seen.insert((*id).clone()))
        .collect();
    let snapshots: Vec<&String> = result
        .snapshots
        .iter()
        .filter(|id| seen.insert((*id).clone()))
        .collect();
    let mut listing = String::new();
    for id in &instances {
        listing.push_str(&format!("{verb} instance {id}\n"));
    }
    for id in &snapshots {
        listing.push_str(&format!("{verb} snapshot {id}\n"));
    }
    if let Err(gone) = super::out::print(&listing) {
        return Ok(Err(gone));
    }
    let reached = match reach {
        Reach::OlderThan => format!("created before {orphaned_before}"),
        Reach::WholeScope(scope) => format!("in conformance scope {scope}, whatever their age"),
    };
    eprintln!(
        "checkfu: {verb} {} instance(s) and {} snapshot(s) of provider {provider_id} {reached}",
        instances.len(),
        snapshots.len(),
    );
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_seconds("30m"), Ok(1_800));
        assert_eq!(parse_duration_seconds("2h"), Ok(7_200));
        assert_eq!(parse_duration_seconds("1d"), Ok(86_400));
        assert_eq!(parse_duration_seconds("1h30m"), Ok(5_400));
        assert_eq!(parse_duration_seconds("0s"), Ok(0));
        assert_eq!(parse_duration_seconds("0"), Ok(0));
        let bare = parse_duration_seconds("45").unwrap_err();
        assert!(
            bare.contains("needs its unit") && bare.contains("\"45\""),
            "{bare}"
        );
        for bad in [
            "",
            "m",
            "1w",
            "2months",
            "-1h",
            "1.5h",
            "h1",
            "99999999999999999d",
        ] {
            assert!(parse_duration_seconds(bad).is_err(), "{bad}");
        }
    }
}
