//! Figures 2–7, 9 and 10: the Docker provider, cold and pooled, against
//! the docker CLI.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::{DockerConfig, DockerProvider};

use crate::catalogue::*;
use crate::common::{docker_cli, f, fail, sixteen, true_cmd, Subject};
use crate::stats::{stat, stat_of, time, time_after, Row, Unit};

/// One provider the lifecycle figures run against: the subject (its
/// adapter, image and clock), the provider itself, and the phase durations
/// recorded so far.
pub(crate) struct DockerBench {
    subject: Subject,
    provider: DockerProvider,
    phases: std::sync::Mutex<BTreeMap<&'static str, Vec<Duration>>>,
}

impl std::ops::Deref for DockerBench {
    type Target = Subject;

    fn deref(&self) -> &Subject {
        &self.subject
    }
}

pub(crate) async fn docker_bench(name: &str, pool_size: usize) -> Result<DockerBench, String> {
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
    let subject = Subject::new(Arc::new(provider.clone()), "docker", image, clock, state)?;
    Ok(DockerBench {
        subject,
        provider,
        phases: Default::default(),
    })
}

impl DockerBench {
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
        sixteen(|| {
            let b = self.clone();
            async move { b.lifecycle().await }
        })
        .await
    }

    /// Everything of the bench's scope: the pool, then every instance and
    /// snapshot.
    pub(crate) async fn sweep(&self) -> Result<(), String> {
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
pub(crate) async fn sixteen_docker_runs(image_id: &str) -> Result<(), String> {
    sixteen(|| {
        let id = image_id.to_owned();
        async move {
            docker_cli(&["run", "--rm", "--network", "none", &id, "true"])
                .await
                .map(drop)
        }
    })
    .await
}

/// Memory in use (as `docker stats` computes it: usage less inactive file
/// pages) and processes of a running container.
pub(crate) async fn idle_cost(
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
pub(crate) async fn figure9(
    b: &DockerBench,
    image_id: &str,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
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
pub(crate) const POOL_FIGURE_2: usize = checkfu_sandbox_docker::DEFAULT_POOL_SIZE;
/// Pool size of the warm-pool subject of figure 7 (one per lifecycle).
pub(crate) const POOL_FIGURE_7: usize = 16;

pub(crate) async fn figures_docker(
    which: &dyn Fn(u8) -> bool,
    quick: bool,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let b = docker_bench("plain", 0).await?;
    let result = figures_docker_on(&b, which, quick, rows).await;
    let swept = b.sweep().await;
    result.and(swept)
}

pub(crate) async fn figures_docker_on(
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
        let ours = time(reps(6), || b.round_trip(&mounts)).await?;
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
