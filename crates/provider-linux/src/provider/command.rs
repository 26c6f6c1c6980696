//! The command that enters an instance: its init checked by pid and start
//! time, its namespaces, root and cgroups opened, the workload user and
//! the default filter ([`checkfu_sandbox_hostexec::command::prepare`]).

use std::collections::BTreeMap;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::command::{self as hostexec, Credentials, Program, Target};

use super::errors::provider_error;
use super::inner::Inner;
use crate::cgroup::InstanceCgroups;
use crate::store::InstanceRecord;

impl Inner {
    /// A `Command` for `program` in the instance of `rec`, with the
    /// image's environment, `HOME`, `HOSTNAME` (the instance's host name)
    /// and the program's environment over them. stdio is left to the
    /// caller.
    pub(super) fn command(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        program: Program<'_>,
    ) -> Result<tokio::process::Command, SandboxError> {
        let init = rec.init.ok_or_else(|| {
            provider_error(
                operation,
                format!("{} has no running init", rec.instance_id),
            )
        })?;
        if super::instances::start_ticks(init.pid) != Some(init.start_ticks) {
            return Err(provider_error(
                operation,
                format!(
                    "the init of {} (pid {}) is gone: the instance is no longer running",
                    rec.instance_id, init.pid
                ),
            ));
        }
        let io = |what: &str, e: std::io::Error| provider_error(operation, format!("{what}: {e}"));
        let namespaces = ["ipc", "uts", "net", "pid", "mnt"]
            .iter()
            .map(|ns| hostexec::open_namespace(init.pid, ns))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io("opening the instance's namespaces", e))?;
        let root =
            hostexec::open_root(init.pid).map_err(|e| io("opening the instance's root", e))?;
        let cgroups = match self.cgroup_version {
            Some(v) => InstanceCgroups::new(v, &self.scope, &rec.instance_id)
                .open_join_files()
                .map_err(|e| io("opening the instance's cgroups", e))?,
            None => Vec::new(),
        };
        let uid = self.workload_user.uid();
        // The command's environment, as `Command::env_clear` and `env`
        // would build it: later settings win, keys in byte order.
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for kv in &rec.image_env {
            if let Some((k, v)) = kv.split_once('=') {
                env.insert(k.to_owned(), v.to_owned());
            }
        }
        env.insert(
            "HOME".into(),
            if uid == 0 { "/root" } else { "/home/checkfu" }.into(),
        );
        // The instance's UTS name, as `docker exec` gives a container's.
        env.insert(
            "HOSTNAME".into(),
            super::instances::INSTANCE_HOSTNAME.into(),
        );
        env.extend(
            program
                .environment
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let target = Target {
            namespaces,
            root,
            cgroups,
            credentials: Credentials {
                uid,
                gid: uid,
                groups: Vec::new(),
            },
            filters: vec![self.seccomp.clone()],
        };
        hostexec::prepare(operation, target, program, &env)
    }
}
