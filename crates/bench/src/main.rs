//! `checkfu-bench`: measures the seam side by side with a baseline taken in
//! the same run, and prints a markdown table (figure, ours, baseline,
//! ratio). Medians over repetitions, with the spread as p10–p90.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::{DockerConfig, DockerProvider};
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
use clap::Parser;

mod linux;

/// Measure the sandbox seam against baselines taken in the same run.
#[derive(Debug, Parser)]
#[command(
    name = "checkfu-bench",
    after_help = "Examples:\n  checkfu-bench                      # every figure, table on stdout\n  checkfu-bench --quick --out table.md\n  checkfu-bench --only 1 --only 3\n\nFigures: 1 runtime overhead (memory), 2 cold start, 3 warm execute, 4 readFile 16 MiB,\n5 durable round trip, 6 cleanup of 100 and 1,000 orphans, 7 16 concurrent lifecycles,\n8 wire overhead (memory oracle served by this binary on stdio: execute, openProcess stdout),\n9 the daemonless linux provider (cold start vs docker run and unshare, ready-to-execute,\nwarm execute vs docker exec, 16 concurrent, durable round trip vs the Docker provider; root)."
)]
struct Args {
    /// Fewer repetitions (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Run only this figure (1-9, repeatable).
    #[arg(long = "only", value_name = "N")]
    only: Vec<u8>,
    /// Also write the table to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Serve the memory oracle over the wire protocol on stdin/stdout
    /// (figure 8 spawns this binary so).
    #[arg(long, hide = true)]
    serve_memory: bool,
}

/// Median and p10/p90 of a sample, in seconds.
#[derive(Debug, Clone, Copy)]
struct Stat {
    median: f64,
    p10: f64,
    p90: f64,
    n: usize,
}

fn stat(mut xs: Vec<Duration>) -> Stat {
    xs.sort();
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize].as_secs_f64();
    Stat {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
        n: xs.len(),
    }
}

fn show(s: &Stat) -> String {
    let unit = |x: f64| {
        if x >= 1.0 {
            format!("{x:.2} s")
        } else if x >= 1e-3 {
            format!("{:.2} ms", x * 1e3)
        } else {
            format!("{:.2} µs", x * 1e6)
        }
    };
    format!(
        "{} ({}–{}, n={})",
        unit(s.median),
        unit(s.p10),
        unit(s.p90),
        s.n
    )
}

struct Row {
    figure: String,
    ours: Stat,
    baseline: Option<(String, Stat)>,
}

async fn time<F, Fut, T>(reps: usize, mut f: F) -> Result<Stat, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut xs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f().await?;
        xs.push(start.elapsed());
    }
    Ok(stat(xs))
}

fn fail<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

async fn docker_cli(args: &[&str]) -> Result<Vec<u8>, String> {
    let out = tokio::process::Command::new("docker")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(fail("docker"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn profile(retention: RetentionMode) -> SandboxProfile {
    SandboxProfile {
        profile_id: "bench".into(),
        profile_version: 1,
        profile_digest: Digest::parse(&format!("sha256:{}", "b".repeat(64)))
            .expect("literal digest"),
        retention,
        network_policy: NetworkPolicy::None,
        max_duration_seconds: 600,
        resources: Resources::default(),
        packages: Vec::new(),
    }
}

fn request(
    adapter: &Adapter,
    image: &ImageReference,
    retention: RetentionMode,
    mounts: Vec<SandboxMount>,
    expires_in: i64,
    clock: &dyn Clock,
) -> SandboxProvisionRequest {
    SandboxProvisionRequest {
        provider: adapter.provider_id().into(),
        placement: adapter.envelope().placement,
        workspace_id: "bench".into(),
        session_id: "bench".into(),
        run_id: "bench".into(),
        attempt_id: "1".into(),
        lease_id: "bench".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: profile(retention),
        platform: adapter.envelope().platforms[0],
        root_image: image.clone(),
        mounts,
        expires_at: clock.now().add_seconds(expires_in),
    }
}

fn true_cmd() -> SandboxCommand {
    SandboxCommand {
        executable: "true".into(),
        arguments: vec![],
        working_directory: "/".into(),
        environment: Default::default(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    }
}

fn f(e: SandboxFailure) -> String {
    e.to_string()
}

/// Figure 1: the runtime's validation against direct calls on the memory
/// oracle.
async fn figure1(reps: usize, rows: &mut Vec<Row>) -> Result<(), String> {
    let clock =
        ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").map_err(fail("clock"))?);
    let memory = MemoryProvider::new(clock.clone());
    let direct: Arc<dyn SandboxProvider> = Arc::new(memory.clone());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    rt.register(direct.clone());
    let adapter = rt.adapter("memory").map_err(f)?;
    let image = ImageReference::parse(&format!("bench@sha256:{}", "0".repeat(64)))
        .map_err(fail("image"))?;
    let req = request(
        &adapter,
        &image,
        RetentionMode::EphemeralZdr,
        vec![],
        3600,
        &clock,
    );
    let inst = adapter.provision(req.clone()).await.map_err(f)?;
    adapter.activate(&inst.instance_id).await.map_err(f)?;
    adapter
        .write_file(&inst.instance_id, "/mnt/session/outputs/f", vec![7u8; 1024])
        .await
        .map_err(f)?;
    let id = inst.instance_id.clone();

    let ours = time(reps, || async {
        adapter.execute(&id, true_cmd()).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        direct
            .execute(ExecuteRequest {
                instance_id: id.clone(),
                command: true_cmd(),
            })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: "1a execute `true` (memory): validated vs direct".into(),
        ours,
        baseline: Some(("direct provider call".into(), base)),
    });

    let ours = time(reps, || async {
        adapter
            .read_file(&id, "/mnt/session/outputs/f", 1 << 20)
            .await
            .map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        direct
            .read_file(ReadFileRequest {
                instance_id: id.clone(),
                path: "/mnt/session/outputs/f".into(),
                allowed_root: "/mnt/session/outputs".into(),
                maximum_bytes: 1 << 20,
            })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: "1b readFile 1 KiB (memory): validated vs direct".into(),
        ours,
        baseline: Some(("direct provider call".into(), base)),
    });

    let ours = time(reps, || async {
        let i = adapter.provision(req.clone()).await.map_err(f)?;
        adapter.activate(&i.instance_id).await.map_err(f)?;
        adapter.destroy(&i.instance_id).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        let h = direct
            .provision(req.clone())
            .await
            .map_err(|e| e.to_string())?;
        let id = h.value.instance_id.clone();
        direct
            .activate(ActivateRequest {
                instance_id: id.clone(),
            })
            .await
            .map_err(|e| e.to_string())?;
        direct
            .destroy(DestroyRequest { instance_id: id })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: "1c provision+activate+destroy (memory): validated vs direct".into(),
        ours,
        baseline: Some(("direct provider calls".into(), base)),
    });
    adapter.destroy(&id).await.map_err(f)?;
    Ok(())
}

struct DockerBench {
    adapter: Adapter,
    provider: DockerProvider,
    image: ImageReference,
    clock: Arc<dyn Clock>,
    phases: std::sync::Mutex<BTreeMap<&'static str, Vec<Duration>>>,
    _state: tempfile::TempDir,
}

async fn docker_bench() -> Result<DockerBench, String> {
    let state = tempfile::tempdir().map_err(fail("state dir"))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = DockerProvider::connect(DockerConfig {
        state_dir: state.path().to_path_buf(),
        scope: format!("bench-{}", std::process::id()),
        clock: clock.clone(),
    })
    .await
    .map_err(fail("docker"))?;
    let reference = checkfu_sandbox_docker::fixture::ensure_fixture(
        provider.docker(),
        std::path::Path::new(checkfu_sandbox_docker::fixture::DEFAULT_BUSYBOX_PATH),
        &mut |line: &str| eprintln!("fixture: {line}"),
    )
    .await
    .map_err(fail("fixture"))?;
    let image = ImageReference::parse(&reference).map_err(fail("fixture reference"))?;
    let mut rt = SandboxRuntime::new(clock.clone());
    rt.register(Arc::new(provider.clone()));
    let adapter = rt.adapter("docker").map_err(f)?;
    Ok(DockerBench {
        adapter,
        provider,
        image,
        clock,
        phases: Default::default(),
        _state: state,
    })
}

impl DockerBench {
    fn request(
        &self,
        retention: RetentionMode,
        mounts: Vec<SandboxMount>,
        expires_in: i64,
    ) -> SandboxProvisionRequest {
        request(
            &self.adapter,
            &self.image,
            retention,
            mounts,
            expires_in,
            self.clock.as_ref(),
        )
    }

    /// One cold lifecycle, recording each phase's duration.
    async fn lifecycle(&self) -> Result<(), String> {
        let mut t = Instant::now();
        let mut lap = |phase: &'static str| {
            let now = Instant::now();
            self.phases
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(phase)
                .or_default()
                .push(now - t);
            t = now;
        };
        let i = self
            .adapter
            .provision(self.request(RetentionMode::EphemeralZdr, vec![], 3600))
            .await
            .map_err(f)?;
        lap("1 provision");
        self.adapter.activate(&i.instance_id).await.map_err(f)?;
        lap("2 activate");
        self.adapter
            .execute(&i.instance_id, true_cmd())
            .await
            .map_err(f)?;
        lap("3 execute");
        self.adapter
            .release(&i.instance_id, None)
            .await
            .map_err(f)?;
        lap("4 release");
        Ok(())
    }

    async fn container_of(&self, instance_id: &str) -> Result<String, String> {
        let out = docker_cli(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=checkfu.sandbox.instance_id={instance_id}"),
        ])
        .await?;
        let id = String::from_utf8_lossy(&out).trim().to_owned();
        if id.is_empty() {
            Err(format!("no container for {instance_id}"))
        } else {
            Ok(id)
        }
    }

    async fn sweep(&self) -> Result<(), String> {
        let now = self.clock.now().add_seconds(10 * 365 * 86400);
        self.adapter
            .cleanup(now, now, vec![])
            .await
            .map_err(f)
            .map(|_| ())
    }
}

async fn figures_docker(
    which: &dyn Fn(u8) -> bool,
    quick: bool,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let b = docker_bench().await?;
    let image_id = format!("sha256:{}", b.image.digest().hex());
    let reps = |full: usize| if quick { (full / 4).max(3) } else { full };

    if which(2) {
        eprintln!("figure 2: cold start");
        let ours = time(reps(12), || b.lifecycle()).await?;
        let base = time(reps(12), || async {
            docker_cli(&["run", "--rm", "--network", "none", &image_id, "true"]).await
        })
        .await?;
        rows.push(Row {
            figure: "2 cold start: provision+activate+execute(`true`)+release".into(),
            ours,
            baseline: Some(("`docker run --rm <fixture> true`".into(), base)),
        });
        let phases = std::mem::take(&mut *b.phases.lock().unwrap_or_else(|p| p.into_inner()));
        for (phase, xs) in phases {
            rows.push(Row {
                figure: format!("2 · phase {phase}"),
                ours: stat(xs),
                baseline: None,
            });
        }
    }
    if which(3) || which(4) {
        let i = b
            .adapter
            .provision(b.request(RetentionMode::EphemeralZdr, vec![], 3600))
            .await
            .map_err(f)?;
        b.adapter.activate(&i.instance_id).await.map_err(f)?;
        let id = i.instance_id.clone();
        if which(3) {
            eprintln!("figure 3: warm execute");
            let container = b.container_of(&id).await?;
            let ours = time(reps(40), || async {
                b.adapter.execute(&id, true_cmd()).await.map_err(f)
            })
            .await?;
            let base = time(reps(40), || async {
                docker_cli(&["exec", &container, "true"]).await
            })
            .await?;
            rows.push(Row {
                figure: "3 warm execute `true`".into(),
                ours,
                baseline: Some(("`docker exec <container> true`".into(), base)),
            });
        }
        if which(4) {
            eprintln!("figure 4: readFile 16 MiB");
            let bytes: Vec<u8> = (0..bounds::MAX_FILE_BYTES)
                .map(|i| (i % 251) as u8)
                .collect();
            b.adapter
                .write_file(&id, "/mnt/session/outputs/big", bytes.clone())
                .await
                .map_err(f)?;
            let host = checkfu_sandbox_docker::Layout::new(b.provider.state_dir().to_path_buf())
                .outputs_dir(&id)
                .join("big");
            let host_text = host.to_string_lossy().into_owned();
            let ours = time(reps(20), || async {
                let got = b
                    .adapter
                    .read_file(&id, "/mnt/session/outputs/big", bounds::MAX_FILE_BYTES)
                    .await
                    .map_err(f)?;
                if got.len() as u64 == bounds::MAX_FILE_BYTES {
                    Ok(())
                } else {
                    Err("short read".to_string())
                }
            })
            .await?;
            let base = time(reps(20), || async {
                let out = tokio::process::Command::new("cat")
                    .arg(&host_text)
                    .output()
                    .await
                    .map_err(fail("cat"))?;
                if out.stdout.len() as u64 == bounds::MAX_FILE_BYTES {
                    Ok(())
                } else {
                    Err("short cat".to_string())
                }
            })
            .await?;
            rows.push(Row {
                figure: "4 readFile of a 16 MiB file".into(),
                ours,
                baseline: Some(("`cat` of the same host file".into(), base)),
            });
        }
        b.adapter.release(&id, None).await.map_err(f)?;
    }
    if which(5) {
        eprintln!("figure 5: durable round trip");
        let mounts = vec![SandboxMount {
            path: "/work".into(),
            access: MountAccess::ReadWrite,
        }];
        let ours = time(reps(6), || async {
            let i = b
                .adapter
                .provision(b.request(RetentionMode::Durable, mounts.clone(), 3600))
                .await
                .map_err(f)?;
            b.adapter.activate(&i.instance_id).await.map_err(f)?;
            b.adapter
                .write_file(
                    &i.instance_id,
                    "/mnt/session/outputs/state",
                    b"state".to_vec(),
                )
                .await
                .map_err(f)?;
            let disposition = b
                .adapter
                .release(&i.instance_id, Some(b.clock.now().add_seconds(3600)))
                .await
                .map_err(f)?;
            let ReleaseDisposition::Released { snapshot: snap } = disposition else {
                return Err("a durable release settled no snapshot".to_string());
            };
            let j = b
                .adapter
                .resume(
                    b.request(RetentionMode::Durable, mounts.clone(), 3600),
                    snap.clone(),
                )
                .await
                .map_err(f)?;
            let got = b
                .adapter
                .read_file(&j.instance_id, "/mnt/session/outputs/state", 1024)
                .await
                .map_err(f)?;
            b.adapter.destroy(&j.instance_id).await.map_err(f)?;
            b.adapter
                .destroy_snapshot(&snap.snapshot_id)
                .await
                .map_err(f)?;
            if got == b"state" {
                Ok(())
            } else {
                Err("state lost".to_string())
            }
        })
        .await?;
        let base = time(reps(6), || async {
            let c = String::from_utf8_lossy(
                &docker_cli(&[
                    "run",
                    "-d",
                    "--network",
                    "none",
                    &image_id,
                    "sh",
                    "-c",
                    "echo state > /state; sleep 600",
                ])
                .await?,
            )
            .trim()
            .to_owned();
            let img = String::from_utf8_lossy(&docker_cli(&["commit", &c]).await?)
                .trim()
                .to_owned();
            let out =
                docker_cli(&["run", "--rm", "--network", "none", &img, "cat", "/state"]).await?;
            docker_cli(&["rm", "-f", &c]).await?;
            docker_cli(&["rmi", &img]).await?;
            if out == b"state\n" {
                Ok(())
            } else {
                Err("baseline state lost".to_string())
            }
        })
        .await?;
        rows.push(Row {
            figure: "5 durable round trip (release with snapshot, resume, read one file)".into(),
            ours,
            baseline: Some(("`docker commit` + `docker run` of the image".into(), base)),
        });
        // A release of a durable instance settles a snapshot of its own; sweep it.
        b.sweep().await?;
    }
    if which(6) {
        let mut per = BTreeMap::new();
        for n in [100usize, 1000] {
            eprintln!("figure 6: cleanup of {n} orphans");
            let mut took = Vec::new();
            for _ in 0..reps(5) {
                for _ in 0..n {
                    b.adapter
                        .provision(b.request(RetentionMode::EphemeralZdr, vec![], 1))
                        .await
                        .map_err(f)?;
                }
                let start = Instant::now();
                let now = b.clock.now().add_seconds(3600);
                let swept = b.adapter.cleanup(now, now, vec![]).await.map_err(f)?;
                took.push(start.elapsed());
                if swept.instances.len() < n {
                    return Err(format!("cleanup swept {} of {n}", swept.instances.len()));
                }
            }
            per.insert(n, stat(took));
        }
        rows.push(Row {
            figure: "6 cleanup of 1,000 orphans vs of 100 (growth)".into(),
            ours: per[&1000],
            baseline: Some(("cleanup of 100 orphans".into(), per[&100])),
        });
    }
    if which(7) {
        eprintln!("figure 7: 16 concurrent lifecycles");
        let b = Arc::new(b);
        let ours = time(reps(3), || {
            let b = b.clone();
            async move {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..16 {
                    let b = b.clone();
                    set.spawn(async move { b.lifecycle().await });
                }
                while let Some(r) = set.join_next().await {
                    r.map_err(fail("join"))??;
                }
                Ok(())
            }
        })
        .await?;
        let id = image_id.clone();
        let base = time(reps(3), || {
            let id = id.clone();
            async move {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..16 {
                    let id = id.clone();
                    set.spawn(async move {
                        docker_cli(&["run", "--rm", "--network", "none", &id, "true"]).await
                    });
                }
                while let Some(r) = set.join_next().await {
                    r.map_err(fail("join"))??;
                }
                Ok(())
            }
        })
        .await?;
        rows.push(Row {
            figure: "7 16 concurrent lifecycles".into(),
            ours,
            baseline: Some(("16 concurrent `docker run --rm`".into(), base)),
        });
        let phases = std::mem::take(&mut *b.phases.lock().unwrap_or_else(|p| p.into_inner()));
        for (phase, xs) in phases {
            rows.push(Row {
                figure: format!("7 · phase {phase} (each of 16)"),
                ours: stat(xs),
                baseline: None,
            });
        }
        b.sweep().await?;
        return Ok(());
    }
    b.sweep().await
}

/// A runtime adapter over `provider`, with one active instance.
async fn active(
    provider: Arc<dyn SandboxProvider>,
) -> Result<(SandboxRuntime, Adapter, String), String> {
    let clock = Arc::new(SystemClock);
    let mut rt = SandboxRuntime::new(clock.clone());
    let id = provider.provider_id().to_owned();
    rt.register(provider);
    let adapter = rt.adapter(&id).map_err(f)?;
    let image = ImageReference::parse(&format!("bench@sha256:{}", "0".repeat(64)))
        .map_err(fail("image"))?;
    let req = request(
        &adapter,
        &image,
        RetentionMode::EphemeralZdr,
        vec![],
        3600,
        clock.as_ref(),
    );
    let inst = adapter.provision(req).await.map_err(f)?;
    adapter.activate(&inst.instance_id).await.map_err(f)?;
    Ok((rt, adapter, inst.instance_id))
}

/// Reads a process's stdout to its end and waits for its exit; the bytes read.
async fn drain(adapter: &Adapter, id: &str, bytes: u64) -> Result<u64, String> {
    use futures_util::AsyncReadExt;
    let mut p = adapter
        .open_process(SandboxProcessRequest {
            instance_id: id.into(),
            executable: "head".into(),
            arguments: vec!["-c".into(), bytes.to_string(), "/dev/zero".into()],
            working_directory: "/".into(),
            environment: Default::default(),
        })
        .await
        .map_err(f)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = p.output.read(&mut buf).await.map_err(fail("stdout"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    p.handle.wait().await.map_err(|e| e.to_string())?;
    if total != bytes {
        return Err(format!(
            "openProcess stdout: expected {bytes} bytes, actual {total}"
        ));
    }
    Ok(total)
}

/// Figure 8: the wire seam's cost on the memory oracle, served by this
/// binary over stdio, against the same oracle in process; both through
/// the runtime.
async fn figure8(reps: usize, rows: &mut Vec<Row>) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(fail("current_exe"))?;
    let mut command = tokio::process::Command::new(exe);
    command.arg("--serve-memory");
    let client = checkfu_sandbox_wire::WireClient::spawn(
        command,
        checkfu_sandbox_wire::WireOptions::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let (_wrt, wire, wire_id) = active(Arc::new(client.clone())).await?;
    let (_lrt, local, local_id) = active(Arc::new(MemoryProvider::with_system_clock())).await?;
    let ours = time(reps, || async {
        wire.execute(&wire_id, true_cmd()).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        local.execute(&local_id, true_cmd()).await.map_err(f)
    })
    .await?;
    rows.push(Row {
        figure: "8a execute `true` (memory): stdio wire vs in process, both validated".into(),
        ours,
        baseline: Some(("in-process provider".into(), base)),
    });
    rows.push(Row {
        figure: "8a · wire overhead per execute (difference of medians)".into(),
        ours: Stat {
            median: ours.median - base.median,
            p10: ours.p10 - base.p10,
            p90: ours.p90 - base.p90,
            n: ours.n,
        },
        baseline: None,
    });
    const BYTES: u64 = 64 << 20;
    let stream_reps = (reps / 100).clamp(3, 10);
    let ours = time(stream_reps, || drain(&wire, &wire_id, BYTES)).await?;
    let base = time(stream_reps, || drain(&local, &local_id, BYTES)).await?;
    let mib_s = |s: &Stat| BYTES as f64 / (1 << 20) as f64 / s.median;
    eprintln!(
        "figure 8b: openProcess stdout {:.0} MiB/s over the wire, {:.0} MiB/s in process",
        mib_s(&ours),
        mib_s(&base)
    );
    rows.push(Row {
        figure: format!(
            "8b openProcess stdout 64 MiB (memory): stdio wire ({:.0} MiB/s) vs in process ({:.0} MiB/s)",
            mib_s(&ours),
            mib_s(&base)
        ),
        ours,
        baseline: Some(("in-process provider".into(), base)),
    });
    wire.destroy(&wire_id).await.map_err(f)?;
    local.destroy(&local_id).await.map_err(f)?;
    client.close().await;
    Ok(())
}

fn table(rows: &[Row]) -> String {
    let mut s = String::from("| figure | ours (median, p10–p90) | baseline | baseline (median, p10–p90) | ratio |\n|---|---|---|---|---|\n");
    for r in rows {
        match &r.baseline {
            Some((name, b)) => s.push_str(&format!(
                "| {} | {} | {} | {} | {:.2}× |\n",
                r.figure,
                show(&r.ours),
                name,
                show(b),
                r.ours.median / b.median
            )),
            None => s.push_str(&format!(
                "| {} | {} | — | — | — |\n",
                r.figure,
                show(&r.ours)
            )),
        }
    }
    s
}

fn main() -> ExitCode {
    let args = Args::parse();
    let which = |n: u8| args.only.is_empty() || args.only.contains(&n);
    if args.serve_memory {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build();
        let served =
            checkfu_sandbox_wire::Served::new(Arc::new(MemoryProvider::with_system_clock()));
        return match rt.map(|rt| rt.block_on(checkfu_sandbox_wire::serve_stdio(served))) {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => {
                eprintln!("checkfu-bench: serve: {e}");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("checkfu-bench: {e}");
                ExitCode::from(125)
            }
        };
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("checkfu-bench: {e}");
            return ExitCode::from(125);
        }
    };
    let result = rt.block_on(async {
        let mut rows = Vec::new();
        if which(1) {
            eprintln!("figure 1: runtime overhead on the memory oracle");
            figure1(if args.quick { 500 } else { 5000 }, &mut rows).await?;
        }
        if which(8) {
            eprintln!("figure 8: wire overhead on the memory oracle");
            figure8(if args.quick { 500 } else { 5000 }, &mut rows).await?;
        }
        if (2..=7).any(which) {
            figures_docker(&which, args.quick, &mut rows).await?;
        }
        if which(9) {
            linux::figure9(args.quick, &mut rows).await?;
        }
        Ok::<_, String>(rows)
    });
    match result {
        Ok(rows) => {
            let t = table(&rows);
            print!("{t}");
            if let Some(path) = &args.out {
                if let Err(e) = std::fs::write(path, &t) {
                    eprintln!("checkfu-bench: {}: {e}", path.display());
                    return ExitCode::from(125);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("checkfu-bench: {e}");
            ExitCode::from(1)
        }
    }
}
