//! `checkfu sandbox snapshots`: the snapshots a provider holds for one
//! scope, and whether each can be resumed (`run --resume`); and the
//! checkpoint store `run --durable` records into and `run --resume` and
//! `cleanup` read.

use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_contract::{op, SandboxError, SandboxProvider, Timestamp};
use checkfu_sandbox_runtime::SandboxRuntime;
use checkfu_sandbox_session::{Checkpoint, CheckpointStore};

use super::fail::Failure;
use super::out::StdoutGone;
use super::{ProviderArg, ProviderChoice, ProviderFlags};

/// The checkpoint store of the CLI: `checkpoints/` under the state
/// directory ([`super::backend::state_dir`]), shared by every provider and
/// scope (each checkpoint names its provider and its scope as the
/// snapshot's `workspace_id`).
pub fn store() -> CheckpointStore {
    CheckpointStore::new(super::backend::state_dir().join("checkpoints"))
}

/// Why `--resume` cannot be used with the memory oracle: its snapshots
/// live only inside the checkfu process that took them.
pub fn memory_refusal() -> Failure {
    Failure::from(SandboxError::invalid_request(
        op::RESUME,
        "provider",
        "a provider whose snapshots outlive the process (docker, linux, or a served one)",
        "memory (its snapshots live only inside the checkfu process that took them)",
    ))
}

/// Whether `choice` keeps snapshots beyond this process, so that a
/// checkpoint of it is worth recording.
pub fn outlives_process(choice: &ProviderChoice) -> bool {
    *choice != ProviderChoice::Builtin(ProviderArg::Memory)
}

/// Flags of `checkfu sandbox snapshots`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Lists the snapshots the provider holds for one scope (the CLI's: `cli`, \
or $CHECKFU_SCOPE; or --scope NAME), asked through the runtime (the provider's cleanup \
inventory, checked), joined with the checkpoints `run --durable` recorded in the state directory \
($CHECKFU_STATE_DIR/checkpoints, else under /var/lib/checkfu/sandbox for root). A snapshot is \
resumable when its checkpoint is recorded and its retention has not passed; an expired one is \
swept by the next `checkfu sandbox cleanup`, which also forgets its checkpoint.

The memory oracle's snapshots live only inside the checkfu process that took them, so a fresh \
process lists none.

Columns: SNAPSHOT, CREATED, EXPIRES, STATE (live | expired), RESUMABLE (yes | no).
--json prints one array: {snapshot_id, provider, scope, created_at, expires_at, expired, \
resumable, root_image, mounts} per snapshot (root_image and mounts null without a checkpoint).

Examples:
  checkfu sandbox run --provider docker --image IMAGE --durable -- sh -c 'echo hi > /mnt/session/outputs/a'
  checkfu sandbox snapshots --provider docker
  checkfu sandbox run --provider docker --resume SNAPSHOT --outputs out -- cat /mnt/session/outputs/a
  checkfu sandbox snapshots --provider linux --scope ci --json

Exit status: 0; 2 for --scope with a provider that has no scopes; 125 when the provider failed; \
141 when stdout was closed early."
)]
pub struct SnapshotsArgs {
    /// Provider whose snapshots to list.
    #[command(flatten)]
    pub provider: ProviderFlags,
    /// List this Docker or Linux scope instead of the CLI's.
    #[arg(long, value_name = "NAME")]
    pub scope: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One listed snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The snapshot id.
    pub snapshot_id: String,
    /// The provider id.
    pub provider: String,
    /// The scope (the snapshot's workspace id).
    pub scope: String,
    /// When it was captured, as the provider's record says (`None` when
    /// unreadable).
    pub created_at: Option<Timestamp>,
    /// Its retention deadline (`None` when unreadable: an unknown time
    /// counts as expired, decision 004).
    pub expires_at: Option<Timestamp>,
    /// Whether `expires_at` is at or before now.
    pub expired: bool,
    /// Whether `run --resume` can use it: a checkpoint is recorded and it
    /// has not expired.
    pub resumable: bool,
    /// The checkpoint's pinned root image.
    pub root_image: Option<String>,
    /// The checkpoint's mounts, as `PATH:ro|rw`.
    pub mounts: Option<Vec<String>>,
}

/// Runs the command.
pub fn run(args: SnapshotsArgs) -> ExitCode {
    let choice = match args.provider.choice() {
        Ok(c) => c,
        Err(e) => return Failure::usage(e.to_string()).report(),
    };
    let scope = match (&args.scope, &choice) {
        (None, _) => super::backend::scope(),
        (Some(s), ProviderChoice::Builtin(ProviderArg::Docker | ProviderArg::Linux)) => s.clone(),
        (Some(_), _) => {
            return Failure::usage(
                "--scope names a Docker or Linux scope: use --provider docker or --provider linux",
            )
            .report()
        }
    };
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let opened = super::until_stopped(open(&choice, &scope)).await;
        let (provider, backend) = match opened {
            Ok(Ok(b)) => b,
            Ok(Err(f)) => return f.report(),
            Err(code) => return code,
        };
        let enrollment = backend.as_ref().and_then(|b| b.enrollment.clone());
        let listed = super::until_stopped(list(provider, enrollment.as_ref(), &scope)).await;
        if let Some(b) = &backend {
            b.close().await;
        }
        let listed = match listed {
            Ok(Ok(l)) => l,
            Ok(Err(f)) => return f.report(),
            Err(code) => return code,
        };
        if !outlives_process(&choice) {
            eprintln!(
                "checkfu: the memory oracle's snapshots live only inside the checkfu process that \
took them"
            );
        }
        match print(&listed, args.json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(gone) => gone.exit(),
        }
    })
}

/// The provider of `scope`: the Docker or Linux provider of that scope,
/// else the provider `choice` names (with its backend, to close).
async fn open(
    choice: &ProviderChoice,
    scope: &str,
) -> Result<(Arc<dyn SandboxProvider>, Option<super::backend::Backend>), Failure> {
    match choice {
        ProviderChoice::Builtin(ProviderArg::Docker) => Ok((
            Arc::new(super::backend::open_docker_scope(scope).await?),
            None,
        )),
        ProviderChoice::Builtin(ProviderArg::Linux) => Ok((
            Arc::new(super::backend::open_linux(
                scope,
                super::backend::linux_state_dir(),
            )?),
            None,
        )),
        _ => {
            let backend = super::backend::open(choice).await?;
            Ok((backend.provider.clone(), Some(backend)))
        }
    }
}

/// The snapshots `provider` holds, joined with the checkpoints of its id
/// and `scope`, oldest first.
///
/// # Errors
/// The runtime's registration or inventory failure; a store that cannot
/// be read.
pub async fn list(
    provider: Arc<dyn SandboxProvider>,
    enrollment: Option<&checkfu_sandbox_runtime::Enrollment>,
    scope: &str,
) -> Result<Vec<Listed>, Failure> {
    let provider_id = provider.provider_id().to_owned();
    let mut runtime = SandboxRuntime::new(super::backend::clock());
    runtime
        .register_as(provider, enrollment)
        .map_err(|e| Failure::sandbox(&e.into()))?;
    let adapter = runtime.adapter(&provider_id)?;
    let inventory = adapter.cleanup_inventory().await?;
    let now = runtime.clock().now();
    let store = store();
    let (checkpoints, unreadable) = store
        .list()
        .map_err(|e| Failure::checkfu(format!("checkpoints {}: {e}", store.dir().display())))?;
    for problem in unreadable {
        eprintln!("checkfu: skipping checkpoint {problem}");
    }
    let mine =
        |c: &&Checkpoint| c.snapshot.provider == provider_id && c.snapshot.workspace_id == scope;
    let mut listed: Vec<Listed> = inventory
        .snapshots
        .iter()
        .map(|candidate| {
            let checkpoint = checkpoints
                .iter()
                .filter(mine)
                .find(|c| c.snapshot.snapshot_id == candidate.id);
            let expired = candidate.expires_at.is_none_or(|t| t <= now);
            Listed {
                snapshot_id: candidate.id.clone(),
                provider: provider_id.clone(),
                scope: scope.to_owned(),
                created_at: candidate.created_at,
                expires_at: candidate.expires_at,
                expired,
                resumable: checkpoint.is_some() && !expired,
                root_image: checkpoint.map(|c| c.root_image.as_str().to_owned()),
                mounts: checkpoint.map(|c| {
                    c.mounts
                        .iter()
                        .map(|m| {
                            let access = match m.access {
                                checkfu_sandbox_contract::MountAccess::ReadOnly => "ro",
                                checkfu_sandbox_contract::MountAccess::ReadWrite => "rw",
                            };
                            format!("{}:{access}", m.path)
                        })
                        .collect()
                }),
            }
        })
        .collect();
    listed.sort_by(|a, b| (a.created_at, &a.snapshot_id).cmp(&(b.created_at, &b.snapshot_id)));
    Ok(listed)
}

impl Listed {
    /// The JSON object `--json` prints.
    pub fn to_json(&self) -> serde_json::Value {
        let when = |t: Option<Timestamp>| t.map(|t| t.to_string());
        serde_json::json!({
            "snapshot_id": self.snapshot_id,
            "provider": self.provider,
            "scope": self.scope,
            "created_at": when(self.created_at),
            "expires_at": when(self.expires_at),
            "expired": self.expired,
            "resumable": self.resumable,
            "root_image": self.root_image,
            "mounts": self.mounts,
        })
    }
}

fn print(listed: &[Listed], json: bool) -> Result<(), StdoutGone> {
    if json {
        let values: Vec<serde_json::Value> = listed.iter().map(Listed::to_json).collect();
        let text = serde_json::to_string_pretty(&values).unwrap_or_else(|_| "[]".into());
        return super::out::print(&format!("{text}\n"));
    }
    let when = |t: Option<Timestamp>| t.map_or_else(|| "unknown".to_owned(), |t| t.to_string());
    let mut text = String::new();
    for l in listed {
        text.push_str(&format!(
            "{}  {}  {}  {}  {}\n",
            l.snapshot_id,
            when(l.created_at),
            when(l.expires_at),
            if l.expired { "expired" } else { "live" },
            if l.resumable { "yes" } else { "no" },
        ));
    }
    super::out::print(&text)
}
