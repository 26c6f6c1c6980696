//! The command that runs in an instance: its init checked by pid and start
//! time; started by that init when this provider started it
//! ([`checkfu_sandbox_hostexec::command::prepare_in_init`], decision 046),
//! else entering from the host with the init's namespaces, root and
//! cgroups ([`checkfu_sandbox_hostexec::command::prepare`]); either way as
//! the workload user under the default filter.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::command::{self as hostexec, Credentials, Prepared, Program, Target};

use super::errors::provider_error;
use super::inner::Inner;
use crate::cgroup::InstanceCgroups;
use crate::store::InstanceRecord;

impl Inner {
    /// The command for `program` in the instance of `rec`, with the
    /// image's environment, `HOME`, `HOSTNAME` (the instance's host name)
    /// and the program's environment over them. stdio is chosen when it
    /// is spawned.
    pub(super) fn command(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        program: Program<'_>,
    ) -> Result<Prepared, SandboxError> {
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
        let env = self.environment(rec, program);
        let credentials = Credentials {
            uid: self.workload_user.uid(),
            gid: self.workload_user.uid(),
            groups: Vec::new(),
        };
        let channel = self
            .inits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&rec.instance_id)
            .filter(|(started, _)| *started == init)
            .map(|(_, channel)| channel.clone());
        if let Some(channel) = channel {
            // The init this provider started: it starts the command
            // itself, already inside the instance and under the default
            // filter, which the command inherits (decision 046).
            return hostexec::prepare_in_init(
                operation,
                channel,
                credentials,
                Vec::new(),
                program,
                &env,
            );
        }
        let io = |what: &str, e: std::io::Error| provider_error(operation, format!("{what}: {e}"));
        let namespaces = ["ipc", "uts", "net", "pid", "mnt"]
            .iter()
            .map(|ns| hostexec::open_namespace(init.pid, ns))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io("opening the instance's namespaces", e))?;
        let root =
            hostexec::open_root(init.pid).map_err(|e| io("opening the instance's root", e))?;
        let (cgroups, command_cgroups) = match self.cgroup_version {
            Some(v) => {
                let groups = InstanceCgroups::new(v, &self.scope, &rec.instance_id);
                let opened = groups
                    .open_join_files()
                    .and_then(|c| Ok((c, groups.open_command_join_files()?)));
                opened.map_err(|e| io("opening the instance's cgroups", e))?
            }
            None => (Vec::new(), Vec::new()),
        };
        let target = Target {
            namespaces,
            root,
            cgroups,
            command_cgroups,
            credentials,
            filters: self.seccomp.to_vec(),
        };
        hostexec::prepare(operation, target, program, &env).map(Prepared::from)
    }

    /// The command's environment, as `Command::env_clear` and `env` would
    /// build it: the image's, `HOME`, `HOSTNAME` (the instance's host
    /// name), then the program's own; later settings win, keys in byte
    /// order.
    fn environment(&self, rec: &InstanceRecord, program: Program<'_>) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for kv in &rec.image_env {
            if let Some((k, v)) = kv.split_once('=') {
                env.insert(k.to_owned(), v.to_owned());
            }
        }
        let home = if self.workload_user.uid() == 0 {
            "/root"
        } else {
            "/home/checkfu"
        };
        env.insert("HOME".into(), home.into());
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
        env
    }
}
