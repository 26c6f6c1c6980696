//! Running a command on an instance's tree: the plan of an execute or a
//! launch, and appending to a file while it exists.

use super::*;

impl Inner {
    /// Appends to the regular file at `physical` in `instance_id`'s tree,
    /// while both exist.
    fn appender(&self, instance_id: &str, physical: crate::fs::Name) -> Appender {
        let state = Arc::downgrade(&self.state);
        let instance_id = instance_id.to_string();
        Appender(Box::new(move |chunk: &[u8]| {
            let Some(state) = state.upgrade() else {
                return;
            };
            // A poisoned lock only means a panic elsewhere; the tree is sound.
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(record) = st.instances.get_mut(&instance_id) {
                if let Some(FsNode::File(bytes)) = record.fs.get_mut(&physical) {
                    bytes.extend_from_slice(chunk);
                }
            }
        }))
    }

    /// Prepares the openProcess child's behaviour on the instance's tree.
    pub(super) fn plan(
        &self,
        record: &mut InstanceRecord,
        external: &BTreeMap<(String, u16), Vec<u8>>,
        request: &SandboxProcessRequest,
    ) -> Plan {
        let name = request
            .executable
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let args = &request.arguments;
        let cwd = request.working_directory.clone();
        let mut argv = vec![request.executable.clone()];
        argv.extend(args.iter().cloned());
        // The streaming built-ins only when the command would start at
        // all; anything else (a missing working directory, a path that is
        // not a binary) is the launch's answer below.
        let streams = crate::probe::launch_refusal(&record.fs, &cwd, &argv, &request.environment)
            .is_none()
            && crate::probe::names_built_in(
                &record.fs,
                &cwd,
                &request.executable,
                request
                    .environment
                    .get("PATH")
                    .map_or(Some(crate::image::PATH), |p| Some(p.as_str())),
            );
        match name.as_str() {
            _ if !streams => {}
            "cat" => {
                let mut files: Vec<&String> = args
                    .iter()
                    .filter(|a| *a == "-" || !a.starts_with('-'))
                    .collect();
                let dash = "-".to_string();
                if files.is_empty() {
                    files.push(&dash);
                }
                let sources = files
                    .into_iter()
                    .map(|f| {
                        if f == "-" {
                            return CatSource::Stdin;
                        }
                        match record.fs.resolve(&cwd, f, true) {
                            Ok((_, Some(FsNode::File(b)))) => CatSource::Bytes(b.clone()),
                            Ok((_, Some(FsNode::Special(SpecialKind::ZeroDevice)))) => {
                                CatSource::Zero
                            }
                            Ok((_, Some(FsNode::Special(SpecialKind::Fifo)))) => CatSource::Blocks,
                            Ok((_, Some(FsNode::Special(SpecialKind::NullDevice)))) => {
                                CatSource::Bytes(vec![])
                            }
                            Ok((_, Some(FsNode::Directory))) => {
                                CatSource::Error(format!("cat: {f}: Is a directory\n"))
                            }
                            Ok((_, Some(_))) => {
                                CatSource::Error(format!("cat: {f}: Permission denied\n"))
                            }
                            Ok((_, None)) | Err(WalkError::NotFound) => {
                                CatSource::Error(format!("cat: {f}: No such file or directory\n"))
                            }
                            Err(_) => CatSource::Error(format!("cat: {f}: cannot open\n")),
                        }
                    })
                    .collect();
                return Plan::Cat(sources);
            }
            "sleep" => {
                if let Some(s) = args.first().and_then(|a| a.parse::<f64>().ok()) {
                    if s.is_finite() && s >= 0.0 {
                        return Plan::Sleep(Duration::from_millis((s * 1000.0).round() as u64));
                    }
                }
            }
            "head" if args.len() >= 2 && args[0] == "-c" => {
                if let Ok(n) = args[1].parse::<u64>() {
                    match args.get(2).map(String::as_str) {
                        None | Some("-") => return Plan::HeadStdin(n),
                        Some(f) => {
                            if let Ok((_, Some(FsNode::Special(SpecialKind::ZeroDevice)))) =
                                record.fs.resolve(&cwd, f, true)
                            {
                                return Plan::HeadZero(n);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        // Everything else runs to completion now, with stdin closed.
        let mut env = base_environment();
        env.extend(request.environment.clone());
        let sealed = record.state == InstanceState::Active && !self.has(Fault::SealIgnored);
        let mut exec = Exec {
            fs: &mut record.fs,
            mounts: &record.request.mounts,
            sealed,
            cwd,
            env,
            stdin: None,
            stdout: Sink::new(SINK_SAFETY_CAP_BYTES, OutputStream::Stdout),
            stderr: Sink::new(SINK_SAFETY_CAP_BYTES, OutputStream::Stderr),
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
        if let Some(target) = cat_redirect_target(request).filter(|_| streams) {
            // The shell creates or truncates the file before `cat` runs.
            let created = exec.write_file(&target, Vec::new());
            drop(exec);
            let physical = created.and_then(|()| {
                record
                    .fs
                    .resolve(&request.working_directory, &target, true)
                    .map(|(physical, _)| physical)
                    .map_err(|_| "No such file or directory")
            });
            return match physical {
                Ok(physical) => Plan::CatToFile(self.appender(&request.instance_id, physical)),
                Err(msg) => Plan::Finished {
                    stdout: Vec::new(),
                    stderr: format!("sh: can't create {target}: {msg}\n").into_bytes(),
                    code: 2,
                    delay: Duration::ZERO,
                },
            };
        }
        let outcome = exec.launch(&argv, &request.environment);
        let delay = Duration::from_millis(exec.elapsed_millis);
        match outcome {
            Ok(code) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code,
                delay,
            },
            Err(Abort::TimedOut) => Plan::Blocks,
            Err(Abort::Signalled(n)) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code: 128 + n,
                delay,
            },
            Err(Abort::Overflow(_)) => Plan::Finished {
                stdout: std::mem::take(&mut exec.stdout.buf),
                stderr: std::mem::take(&mut exec.stderr.buf),
                code: 1,
                delay,
            },
        }
    }
}
