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
    after_help = "Examples:\n  checkfu-bench                      # every figure, table on stdout\n  checkfu-bench --quick --out table.md\n  checkfu-bench --only 1 --only 3\n\nFigures: 1 runtime overhead (memory), 2 cold start (without and from a warm pool), 3 warm execute,\n4 readFile 16 MiB, 5 durable round trip, 6 cleanup of 100 and 1,000 orphans,\n7 16 concurrent lifecycles (without and from a warm pool), 8 wire overhead (memory oracle served\nby this binary on stdio: execute, openProcess stdout), 9 idle cost of a pooled container,\n10 allowlist activation (Docker: nftables rules loaded into the instance) vs network none,\n11 the daemonless linux provider (cold start vs docker run and unshare, ready-to-execute,\nwarm execute vs docker exec, 16 concurrent, durable round trip vs the Docker provider; root).\n\n  checkfu-bench --list                                   # every row name, nothing measured\n  checkfu-bench --quick --only 1 --check-doc docs/PERFORMANCE.md"
)]
struct Args {
    /// Fewer repetitions (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Run only this figure (1-11, repeatable).
    #[arg(long = "only", value_name = "N")]
    only: Vec<u8>,
    /// Also write the table to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the name of every row a full run produces (the catalogue),
    /// one per line, and measure nothing.
    #[arg(long)]
    list: bool,
    /// After the run, check that every figure the tables of FILE name (the
    /// first cell of rows of a `| figure |` table) is one this bench
    /// produces; exit 1 naming those it does not. Presence only, never
    /// timings.
    #[arg(long, value_name = "FILE")]
    check_doc: Option<PathBuf>,
    /// Serve the memory oracle over the wire protocol on stdin/stdout
    /// (figure 8 spawns this binary so).
    #[arg(long, hide = true)]
    serve_memory: bool,
}

/// What a figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Seconds of wall clock.
    Seconds,
    /// Bytes.
    Bytes,
    /// A number of things (processes).
    Count,
}

/// Median and p10/p90 of a sample, in `unit`.
#[derive(Debug, Clone, Copy)]
struct Stat {
    median: f64,
    p10: f64,
    p90: f64,
    n: usize,
    unit: Unit,
}

fn stat(xs: Vec<Duration>) -> Stat {
    stat_of(
        xs.into_iter().map(|d| d.as_secs_f64()).collect(),
        Unit::Seconds,
    )
}

fn stat_of(mut xs: Vec<f64>, unit: Unit) -> Stat {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    Stat {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
        n: xs.len(),
        unit,
    }
}

fn show(s: &Stat) -> String {
    let unit = |x: f64| match s.unit {
        Unit::Seconds if x >= 1.0 => format!("{x:.2} s"),
        Unit::Seconds if x >= 1e-3 => format!("{:.2} ms", x * 1e3),
        Unit::Seconds => format!("{:.2} µs", x * 1e6),
        Unit::Bytes => format!("{:.2} MiB", x / f64::from(1u32 << 20)),
        Unit::Count => format!("{x:.0}"),
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

/// The providers the lifecycle figures (2 and 7) run against: a row-name
/// tag (`2`, `2p`, ...) and the label in the row name. Another provider's
/// rows are one entry here and one [`DockerBench`]-like subject in its
/// figure function.
const SUBJECTS: [(&str, &str); 2] = [("", "docker, no pool"), ("p", "docker, warm pool")];

/// The phases of one lifecycle, in order (figure 2 and 7 phase rows).
const PHASES: [&str; 4] = ["1 provision", "2 activate", "3 execute", "4 release"];

const FIG_1A: &str = "1a execute `true` (memory): validated vs direct";
const FIG_1B: &str = "1b readFile 1 KiB (memory): validated vs direct";
const FIG_1C: &str = "1c provision+activate+destroy (memory): validated vs direct";
const FIG_3: &str = "3 warm execute `true`";
const FIG_4: &str = "4 readFile of a 16 MiB file";
const FIG_5: &str = "5 durable round trip (release with snapshot, resume, read one file)";
const FIG_6: &str = "6 cleanup of 1,000 orphans vs of 100 (growth)";
const FIG_8A: &str = "8a execute `true` (memory): stdio wire vs in process, both validated";
const FIG_8A_DIFF: &str = "8a · wire overhead per execute (difference of medians)";
const FIG_8B: &str = "8b openProcess stdout 64 MiB (memory): stdio wire vs in process";
const FIG_9_MEMORY: &str = "9 idle pooled container: memory";
const FIG_9_PIDS: &str = "9 · idle pooled container: processes";
const FIG_10: &str =
    "10 provision+activate+release, allowlist (1 destination, rules loaded and read back)";

fn fig_2(tag: &str, label: &str) -> String {
    format!("2{tag} cold start ({label}): provision+activate+execute(`true`)+release")
}

fn fig_2_phase(tag: &str, phase: &str) -> String {
    format!("2{tag} · phase {phase}")
}

fn fig_7(tag: &str, label: &str) -> String {
    format!("7{tag} 16 concurrent lifecycles ({label})")
}

fn fig_7_phase(tag: &str, phase: &str) -> String {
    format!("7{tag} · phase {phase} (each of 16)")
}

/// Every row name a full run produces, in table order.
fn catalogue() -> Vec<String> {
    let mut names: Vec<String> = [FIG_1A, FIG_1B, FIG_1C].map(String::from).to_vec();
    for (tag, label) in SUBJECTS {
        names.push(fig_2(tag, label));
        names.extend(PHASES.iter().map(|p| fig_2_phase(tag, p)));
    }
    names.extend([FIG_3, FIG_4, FIG_5, FIG_6].map(String::from));
    for (tag, label) in SUBJECTS {
        names.push(fig_7(tag, label));
        names.extend(PHASES.iter().map(|p| fig_7_phase(tag, p)));
    }
    names.extend(
        [
            FIG_8A,
            FIG_8A_DIFF,
            FIG_8B,
            FIG_9_MEMORY,
            FIG_9_PIDS,
            FIG_10,
        ]
        .map(String::from),
    );
    names.extend(linux::ROWS.map(String::from));
    names
}

/// The figure names in the first cell of every row of every `| figure |`
/// table of a markdown document.
fn documented_figures(doc: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_table = false;
    for line in doc.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let first = line
            .trim_matches('|')
            .split('|')
            .next()
            .unwrap_or("")
            .trim();
        if first == "figure" {
            in_table = true;
            continue;
        }
        if in_table && !first.chars().all(|c| c == '-' || c == ':') {
            names.push(first.to_owned());
        }
    }
    names
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

/// As [`time`], with `setup` run (untimed) before each repetition.
async fn time_after<S, SFut, F, Fut, T>(reps: usize, mut setup: S, mut f: F) -> Result<Stat, String>
where
    S: FnMut() -> SFut,
    SFut: Future<Output = Result<(), String>>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut xs = Vec::with_capacity(reps);
    for _ in 0..reps {
        setup().await?;
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
        figure: FIG_1A.into(),
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
        figure: FIG_1B.into(),
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
        figure: FIG_1C.into(),
        ours,
        baseline: Some(("direct provider calls".into(), base)),
    });
    adapter.destroy(&id).await.map_err(f)?;
    Ok(())
}

/// One provider the lifecycle figures run against: its adapter, the image
/// its instances start from, and the phase durations recorded so far.
struct DockerBench {
    adapter: Adapter,
    provider: DockerProvider,
    image: ImageReference,
    clock: Arc<dyn Clock>,
    phases: std::sync::Mutex<BTreeMap<&'static str, Vec<Duration>>>,
    _state: tempfile::TempDir,
}

async fn docker_bench(name: &str, pool_size: usize) -> Result<DockerBench, String> {
    let state = tempfile::tempdir().map_err(fail("state dir"))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = DockerProvider::connect(DockerConfig {
        pool_size,
        ..DockerConfig::new(
            state.path().to_path_buf(),
            format!("bench-{name}-{}", std::process::id()),
            clock.clone(),
        )
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

    /// The request every lifecycle of figures 2 and 7 provisions.
    fn lifecycle_request(&self) -> SandboxProvisionRequest {
        self.request(RetentionMode::EphemeralZdr, vec![], 3600)
    }

    /// Untimed: brings the warm pool (if any) back to its size.
    async fn prewarm(&self) -> Result<(), String> {
        self.provider
            .prewarm(&self.lifecycle_request())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
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
            .provision(self.lifecycle_request())
            .await
            .map_err(f)?;
        lap(PHASES[0]);
        self.adapter.activate(&i.instance_id).await.map_err(f)?;
        lap(PHASES[1]);
        self.adapter
            .execute(&i.instance_id, true_cmd())
            .await
            .map_err(f)?;
        lap(PHASES[2]);
        self.adapter
            .release(&i.instance_id, None)
            .await
            .map_err(f)?;
        lap(PHASES[3]);
        Ok(())
    }

    fn take_phases(&self) -> BTreeMap<&'static str, Vec<Duration>> {
        std::mem::take(&mut *self.phases.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sixteen lifecycles at once.
    async fn sixteen(self: &Arc<Self>) -> Result<(), String> {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let b = self.clone();
            set.spawn(async move { b.lifecycle().await });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(fail("join"))??;
        }
        Ok(())
    }

    /// Everything of the bench's scope: the pool, then every instance and
    /// snapshot.
    async fn sweep(&self) -> Result<(), String> {
        let mut problems = self.provider.drain_pool().await;
        let now = self.clock.now().add_seconds(10 * 365 * 86400);
        if let Err(e) = self.adapter.cleanup(now, now, vec![]).await {
            problems.push(e.to_string());
        }
        problems.extend(self.provider.destroy_all().await);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// `docker run --rm <image> true` sixteen times at once.
async fn sixteen_docker_runs(image_id: &str) -> Result<(), String> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let id = image_id.to_owned();
        set.spawn(
            async move { docker_cli(&["run", "--rm", "--network", "none", &id, "true"]).await },
        );
    }
    while let Some(r) = set.join_next().await {
        r.map_err(fail("join"))??;
    }
    Ok(())
}

/// Memory in use (as `docker stats` computes it: usage less inactive file
/// pages) and processes of a running container.
async fn idle_cost(
    docker: &checkfu_sandbox_docker::Docker,
    id: &str,
) -> Result<(f64, f64), String> {
    use futures_util::StreamExt as _;
    let opts = checkfu_sandbox_docker::bollard::query_parameters::StatsOptionsBuilder::new()
        .stream(false)
        .one_shot(false)
        .build();
    let s = docker
        .stats(id, Some(opts))
        .next()
        .await
        .ok_or_else(|| format!("no stats for {id}"))?
        .map_err(fail("stats"))?;
    let mem = s.memory_stats.unwrap_or_default();
    let inactive = mem
        .stats
        .as_ref()
        .and_then(|m| {
            m.get("total_inactive_file")
                .or_else(|| m.get("inactive_file"))
                .copied()
        })
        .unwrap_or(0);
    let used = mem.usage.unwrap_or(0).saturating_sub(inactive);
    let pids = s.pids_stats.and_then(|p| p.current).unwrap_or(0);
    Ok((used as f64, pids as f64))
}

/// Figure 9: what a pooled container costs while it waits, against an
/// idle container the docker CLI started from the same image.
async fn figure9(b: &DockerBench, image_id: &str, rows: &mut Vec<Row>) -> Result<(), String> {
    b.prewarm().await?;
    let pooled = checkfu_sandbox_docker::daemon::list_containers_by_labels(
        b.provider.docker(),
        &[
            (
                checkfu_sandbox_docker::labels::LABEL_SCOPE,
                b.provider.scope(),
            ),
            (
                checkfu_sandbox_docker::labels::LABEL_KIND,
                checkfu_sandbox_docker::labels::KIND_POOL,
            ),
        ],
    )
    .await
    .map_err(fail("listing the pool"))?;
    if pooled.is_empty() {
        return Err("figure 9: the pool holds no container".into());
    }
    // Let the freshly started shells settle before sampling.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut mem, mut pids) = (Vec::new(), Vec::new());
    for c in &pooled {
        let (m, p) = idle_cost(b.provider.docker(), c.id.as_deref().unwrap_or_default()).await?;
        mem.push(m);
        pids.push(p);
    }
    let idle = String::from_utf8_lossy(
        &docker_cli(&["run", "-d", "--network", "none", image_id, "sleep", "3600"]).await?,
    )
    .trim()
    .to_owned();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sampled = idle_cost(b.provider.docker(), &idle).await;
    docker_cli(&["rm", "-f", &idle]).await?;
    let (base_mem, base_pids) = sampled?;
    let baseline = "idle `docker run -d <fixture> sleep 3600`";
    rows.push(Row {
        figure: FIG_9_MEMORY.into(),
        ours: stat_of(mem, Unit::Bytes),
        baseline: Some((baseline.into(), stat_of(vec![base_mem], Unit::Bytes))),
    });
    rows.push(Row {
        figure: FIG_9_PIDS.into(),
        ours: stat_of(pids, Unit::Count),
        baseline: Some((baseline.into(), stat_of(vec![base_pids], Unit::Count))),
    });
    Ok(())
}

/// Pool size of the warm-pool subject of figure 2 (the provider's default).
const POOL_FIGURE_2: usize = checkfu_sandbox_docker::DEFAULT_POOL_SIZE;
/// Pool size of the warm-pool subject of figure 7 (one per lifecycle).
const POOL_FIGURE_7: usize = 16;

async fn figures_docker(
    which: &dyn Fn(u8) -> bool,
    quick: bool,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let b = docker_bench("plain", 0).await?;
    let result = figures_docker_on(&b, which, quick, rows).await;
    let swept = b.sweep().await;
    result.and(swept)
}

async fn figures_docker_on(
    b: &DockerBench,
    which: &dyn Fn(u8) -> bool,
    quick: bool,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let image_id = format!("sha256:{}", b.image.digest().hex());
    let reps = |full: usize| if quick { (full / 4).max(3) } else { full };

    if which(2) || which(9) {
        let pooled = docker_bench("pool", POOL_FIGURE_2).await?;
        let measured = async {
            let mut base = None;
            if which(2) {
                eprintln!("figure 2: cold start");
                base = Some(
                    time(reps(12), || async {
                        docker_cli(&["run", "--rm", "--network", "none", &image_id, "true"]).await
                    })
                    .await?,
                );
            }
            for ((tag, label), subject) in SUBJECTS.iter().zip([b, &pooled]) {
                let Some(base) = base else { break };
                let ours =
                    time_after(reps(12), || subject.prewarm(), || subject.lifecycle()).await?;
                rows.push(Row {
                    figure: fig_2(tag, label),
                    ours,
                    baseline: Some(("`docker run --rm <fixture> true`".into(), base)),
                });
                for (phase, xs) in subject.take_phases() {
                    rows.push(Row {
                        figure: fig_2_phase(tag, phase),
                        ours: stat(xs),
                        baseline: None,
                    });
                }
            }
            if which(9) {
                eprintln!("figure 9: idle cost of a pooled container");
                figure9(&pooled, &image_id, rows).await?;
            }
            Ok::<(), String>(())
        }
        .await;
        let swept = pooled.sweep().await;
        measured?;
        swept?;
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
            let container = b
                .provider
                .container_of(&id)
                .ok_or_else(|| format!("no container for {id}"))?;
            let ours = time(reps(40), || async {
                b.adapter.execute(&id, true_cmd()).await.map_err(f)
            })
            .await?;
            let base = time(reps(40), || async {
                docker_cli(&["exec", &container, "true"]).await
            })
            .await?;
            rows.push(Row {
                figure: FIG_3.into(),
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
                figure: FIG_4.into(),
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
        let round = std::sync::atomic::AtomicU32::new(0);
        let base = time(reps(6), || async {
            // The container runs to its exit before the commit, so the
            // state is written whatever the machine's load (a detached
            // `sleep` container raced the commit under load).
            let c = format!(
                "checkfu-bench-{}-{}",
                std::process::id(),
                round.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            docker_cli(&[
                "run",
                "--name",
                &c,
                "--network",
                "none",
                &image_id,
                "sh",
                "-c",
                "echo state > /state",
            ])
            .await?;
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
            figure: FIG_5.into(),
            ours,
            baseline: Some(("`docker commit` + `docker run` of the image".into(), base)),
        });
        // A release of a durable instance settles a snapshot of its own; sweep it.
        let now = b.clock.now().add_seconds(10 * 365 * 86400);
        b.adapter.cleanup(now, now, vec![]).await.map_err(f)?;
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
            figure: FIG_6.into(),
            ours: per[&1000],
            baseline: Some(("cleanup of 100 orphans".into(), per[&100])),
        });
    }
    if which(10) {
        eprintln!("figure 10: allowlist activation");
        if let checkfu_sandbox_docker::egress::EgressSupport::Unavailable(why) =
            b.provider.egress_support()
        {
            eprintln!("figure 10 not measured: allowlist egress unavailable: {why}");
        } else {
            // A documentation address (RFC 5737): rules only, no traffic.
            let allowlist = NetworkPolicy::Allowlist {
                destinations: vec![NetworkDestination {
                    host: "192.0.2.1".into(),
                    port: 443,
                }],
            };
            let cycle = |policy: NetworkPolicy| {
                let b = &b;
                async move {
                    let mut r = b.request(RetentionMode::EphemeralZdr, vec![], 3600);
                    r.profile.network_policy = policy;
                    let i = b.adapter.provision(r).await.map_err(f)?;
                    b.adapter.activate(&i.instance_id).await.map_err(f)?;
                    b.adapter.release(&i.instance_id, None).await.map_err(f)?;
                    Ok::<_, String>(())
                }
            };
            let ours = time(reps(12), || cycle(allowlist.clone())).await?;
            let base = time(reps(12), || cycle(NetworkPolicy::None)).await?;
            rows.push(Row {
                figure: FIG_10.into(),
                ours,
                baseline: Some(("the same with network `none`".into(), base)),
            });
        }
    }
    if which(7) {
        eprintln!("figure 7: 16 concurrent lifecycles");
        let base = time(reps(3), || sixteen_docker_runs(&image_id)).await?;
        let pooled = Arc::new(docker_bench("pool16", POOL_FIGURE_7).await?);
        let plain = Arc::new(docker_bench("plain16", 0).await?);
        let measured = async {
            for ((tag, label), subject) in SUBJECTS.iter().zip([&plain, &pooled]) {
                let ours = time_after(reps(3), || subject.prewarm(), || subject.sixteen()).await?;
                rows.push(Row {
                    figure: fig_7(tag, label),
                    ours,
                    baseline: Some(("16 concurrent `docker run --rm`".into(), base)),
                });
                for (phase, xs) in subject.take_phases() {
                    rows.push(Row {
                        figure: fig_7_phase(tag, phase),
                        ours: stat(xs),
                        baseline: None,
                    });
                }
            }
            Ok::<(), String>(())
        }
        .await;
        let swept = (pooled.sweep().await, plain.sweep().await);
        measured?;
        swept.0?;
        swept.1?;
    }
    Ok(())
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
        figure: FIG_8A.into(),
        ours,
        baseline: Some(("in-process provider".into(), base)),
    });
    rows.push(Row {
        figure: FIG_8A_DIFF.into(),
        ours: Stat {
            median: ours.median - base.median,
            p10: ours.p10 - base.p10,
            p90: ours.p90 - base.p90,
            n: ours.n,
            unit: Unit::Seconds,
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
        figure: FIG_8B.into(),
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

/// `--check-doc`: every figure `path` names must be one the bench produces.
fn check_doc(path: &std::path::Path, known: &[String]) -> ExitCode {
    let doc = match std::fs::read_to_string(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("checkfu-bench: {}: {e}", path.display());
            return ExitCode::from(125);
        }
    };
    let named = documented_figures(&doc);
    let stale: Vec<&String> = named
        .iter()
        .filter(|n| !known.iter().any(|k| k == *n))
        .collect();
    if named.is_empty() {
        eprintln!(
            "checkfu-bench: {} has no `| figure |` table",
            path.display()
        );
        return ExitCode::from(1);
    }
    if stale.is_empty() {
        eprintln!(
            "checkfu-bench: all {} figures {} names are produced by this bench",
            named.len(),
            path.display()
        );
        ExitCode::SUCCESS
    } else {
        for n in &stale {
            eprintln!(
                "checkfu-bench: {} names a figure the bench no longer produces: {n}",
                path.display()
            );
        }
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let which = |n: u8| args.only.is_empty() || args.only.contains(&n);
    if args.list {
        for name in catalogue() {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
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
        if (2..=7).chain([9, 10]).any(which) {
            figures_docker(&which, args.quick, &mut rows).await?;
        }
        if which(11) {
            linux::figure11(args.quick, &mut rows).await?;
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
            let known = catalogue();
            // A row this run produced that the catalogue lacks would let
            // `--list` and `--check-doc` drift from what the bench measures.
            let uncatalogued: Vec<&str> = rows
                .iter()
                .map(|r| r.figure.as_str())
                .filter(|name| !known.iter().any(|k| k == name))
                .collect();
            if !uncatalogued.is_empty() {
                eprintln!(
                    "checkfu-bench: rows missing from the catalogue: {}",
                    uncatalogued.join("; ")
                );
                return ExitCode::from(1);
            }
            if let Some(path) = &args.check_doc {
                return check_doc(path, &known);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("checkfu-bench: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_names_each_row_once() {
        let names = catalogue();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
    }

    #[test]
    fn documented_figures_are_the_first_cells_of_figure_tables_only() {
        let doc = "text\n\n| figure | ours |\n|---|---|\n| 1a x | 1 µs |\n| 2 · phase 1 provision | 2 ms |\n\n| other | y |\n|---|---|\n| not a figure | z |\n";
        assert_eq!(
            documented_figures(doc),
            vec!["1a x".to_string(), "2 · phase 1 provision".to_string()]
        );
    }

    #[test]
    fn a_stale_figure_fails_the_check_and_a_known_one_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("doc.md");
        let known = catalogue();
        std::fs::write(
            &path,
            format!("| figure | ours |\n|---|---|\n| {} | 1 µs |\n", known[0]),
        )
        .expect("write");
        assert_eq!(check_doc(&path, &known), ExitCode::SUCCESS);
        std::fs::write(
            &path,
            "| figure | ours |\n|---|---|\n| 2 cold start: gone | 1 µs |\n",
        )
        .expect("write");
        assert_eq!(check_doc(&path, &known), ExitCode::from(1));
    }
}
