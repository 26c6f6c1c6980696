//! Background jobs of the shell subset advance when a member observes
//! their instance (decision 037, "oracle shell subset"): execute, readFile,
//! readFiles, listDir and listProjectDir each take one step of every job
//! first, so a listing and a later read can see a file still being
//! written.

use super::*;

/// Bound of a job's standard output and error in one step, in bytes: they
/// go nowhere (the command that started the job has returned), and a job
/// writing more in one step ends as on a broken pipe.
const JOB_STREAM_BYTES: u64 = 1024 * 1024;

impl Inner {
    /// Advances every background job of `instance_id` by one step.
    pub(super) fn observe(&self, st: &mut State, instance_id: &str) {
        let State {
            instances,
            external,
            ..
        } = st;
        let Some(record) = instances.get_mut(instance_id) else {
            return;
        };
        if record.fs.jobs.is_empty() {
            return;
        }
        let jobs = std::mem::take(&mut record.fs.jobs);
        let sealed = record.state == InstanceState::Active && !self.has(Fault::SealIgnored);
        let mut exec = Exec {
            fs: &mut record.fs,
            mounts: &record.request.mounts,
            sealed,
            cwd: "/".to_string(),
            env: BTreeMap::new(),
            stdin: None,
            stdout: Sink::new(JOB_STREAM_BYTES, OutputStream::Stdout),
            stderr: Sink::new(JOB_STREAM_BYTES, OutputStream::Stderr),
            elapsed_millis: 0,
            timeout_millis: u64::MAX,
            net: NetView {
                policy: &record.request.profile.network_policy,
                loopback: &record.listeners,
                external,
                none_leaks: self.has(Fault::NetworkNoneReachesListener),
                allowlist_ignored: self.has(Fault::AllowlistIgnored),
            },
        };
        let jobs = step_jobs(&mut exec, jobs);
        record.fs.jobs = jobs;
    }
}
