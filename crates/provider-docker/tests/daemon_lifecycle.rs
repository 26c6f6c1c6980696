//! Binds, commit, label sweeps, removal idempotence and snapshot archives
//! against the real daemon.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Instant;

use checkfu_sandbox_contained::{self as contained, ContainedError};
use checkfu_sandbox_docker::daemon::{self, BindMount, ExecOutcome, ExecRequest};
use checkfu_sandbox_docker::fixture;

async fn sh(docker: &bollard::Docker, id: &str, script: &str) -> (i64, String) {
    let r = daemon::exec_bounded(docker, id, &ExecRequest::new(&["sh", "-c", script]))
        .await
        .unwrap();
    match r.outcome {
        ExecOutcome::Exited {
            code,
            stdout,
            stderr,
        } => (
            code,
            format!(
                "{}{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_commit_archive_and_sweep() {
    let Some(docker) = common::docker_or_skip("binds_commit_archive_and_sweep").await else {
        return;
    };
    let mut cleanup = common::Cleanup::new("lifecycle");
    let data = cleanup.dir("data");
    let outputs = cleanup.dir("outputs");
    let restored = std::env::temp_dir().join(format!("checkfu-test-{}-restored", cleanup.value));
    cleanup.dirs.push(restored.clone());
    std::fs::write(data.join("input.txt"), b"staged").unwrap();
    let id = common::start_container(
        &docker,
        &cleanup,
        vec![
            BindMount {
                host_path: data.clone(),
                container_path: "/workspace/data".into(),
                read_only: true,
            },
            BindMount {
                host_path: outputs.clone(),
                container_path: "/mnt/session/outputs".into(),
                read_only: false,
            },
        ],
    )
    .await;

    // Container hardening as created.
    let info = daemon::inspect_container(&docker, &id)
        .await
        .unwrap()
        .unwrap();
    let hc = info.host_config.unwrap();
    assert_eq!(hc.network_mode.as_deref(), Some("none"));
    assert_eq!(hc.cap_drop.unwrap(), vec!["ALL".to_string()]);
    assert_eq!(
        hc.security_opt.unwrap(),
        vec!["no-new-privileges".to_string()]
    );
    let (_, caps) = sh(
        &docker,
        &id,
        "grep CapEff /proc/self/status; ls /sys/class/net",
    )
    .await;
    assert!(caps.contains("0000000000000000"), "{caps}");
    assert!(caps.contains("lo") && !caps.contains("eth0"), "{caps}");

    // Read-only bind refuses writes; read-write bind accepts them.
    assert_eq!(
        sh(&docker, &id, "cat /workspace/data/input.txt").await,
        (0, "staged".into())
    );
    let (code, _) = sh(&docker, &id, "echo x > /workspace/data/new").await;
    assert_ne!(code, 0);
    let (code, out) = sh(
        &docker,
        &id,
        "cd /mnt/session/outputs && echo result > out.txt && mkdir -p sub && \
         ln -s ../out.txt sub/rel && ln -s /etc/passwd escape && ln -s ../../../../../../etc/passwd up && \
         mkfifo fifo && echo ok",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "ok\n"));

    // Contained reads of what the workload wrote.
    let root = contained::open_root(&outputs).unwrap();
    let read = |p: &str| contained::read_beneath(root.as_fd(), Path::new(p), 1024);
    assert_eq!(read("out.txt").unwrap(), b"result\n");
    assert_eq!(read("sub/rel").unwrap(), b"result\n");
    assert!(matches!(
        read("escape"),
        Err(ContainedError::OutsideRoot { .. })
    ));
    assert!(matches!(
        read("up"),
        Err(ContainedError::OutsideRoot { .. })
    ));
    assert!(matches!(
        read("fifo"),
        Err(ContainedError::NotRegularFile { .. })
    ));

    // Snapshot archive of the output tree: links kept as links, FIFO skipped;
    // extraction refuses the escaping links.
    let (tar_bytes, summary) = checkfu_sandbox_docker::archive_dir(
        &outputs,
        &checkfu_sandbox_docker::ArchiveLimits::entries(1000),
        Vec::new(),
    )
    .unwrap();
    assert_eq!(summary.skipped, vec![Path::new("fifo").to_path_buf()]);
    assert!(matches!(
        checkfu_sandbox_docker::extract_archive(tar_bytes.as_slice(), &restored),
        Err(checkfu_sandbox_docker::ArchiveError::Refused { .. })
    ));
    assert!(!restored.exists());
    std::fs::remove_file(outputs.join("escape")).unwrap();
    std::fs::remove_file(outputs.join("up")).unwrap();
    let (tar_bytes, _) = checkfu_sandbox_docker::archive_dir(
        &outputs,
        &checkfu_sandbox_docker::ArchiveLimits::entries(1000),
        Vec::new(),
    )
    .unwrap();
    checkfu_sandbox_docker::extract_archive(tar_bytes.as_slice(), &restored).unwrap();
    assert_eq!(
        std::fs::read(restored.join("sub/rel")).unwrap(),
        b"result\n"
    );

    // Commit captures the container's own file system, not bind mounts.
    sh(&docker, &id, "echo in-layer > /tmp/layer.txt").await;
    let mut labels = cleanup.labels();
    labels.insert("checkfu.sandbox.kind".into(), "snapshot".into());
    let t = Instant::now();
    let image = daemon::commit_container(
        &docker,
        &id,
        Some(("checkfu-test-snapshot", &cleanup.value)),
        &labels,
    )
    .await
    .unwrap();
    eprintln!("timing: commit (pause) {:?}", t.elapsed());
    cleanup.images.push(image.clone());
    let img = docker.inspect_image(&image).await.unwrap();
    assert_eq!(
        img.config.unwrap().labels.unwrap()["checkfu.sandbox.kind"],
        "snapshot"
    );
    let pinned =
        fixture::resolve_image(&docker, &format!("checkfu-test-snapshot:{}", cleanup.value))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(pinned, format!("checkfu-test-snapshot@{image}"));
    // The container keeps running after a pausing commit.
    assert_eq!(sh(&docker, &id, "echo alive").await, (0, "alive\n".into()));

    // A container from the commit has the layer file but not the bind's.
    let spec = daemon::ContainerSpec {
        image: image.clone(),
        labels: cleanup.labels(),
        ..Default::default()
    };
    let clone = daemon::create_and_start(&docker, &spec).await.unwrap();
    assert_eq!(
        sh(&docker, &clone, "cat /tmp/layer.txt").await,
        (0, "in-layer\n".into())
    );
    let (_, ls) = sh(&docker, &clone, "ls /mnt/session/outputs").await;
    assert_eq!(ls, "");

    // Label sweep sees both containers and the image.
    let label = [(common::TEST_LABEL, cleanup.value.as_str())];
    assert_eq!(
        daemon::list_containers_by_labels(&docker, &label)
            .await
            .unwrap()
            .len(),
        2
    );
    let imgs = daemon::list_images_by_labels(&docker, &label)
        .await
        .unwrap();
    assert_eq!(imgs.len(), 1);
    assert_eq!(imgs[0].id, image);

    // Removing an image in use fails without force; removal is idempotent.
    assert!(daemon::remove_image(&docker, &image, false).await.is_err());
    daemon::remove_container(&docker, &clone).await.unwrap();
    daemon::remove_container(&docker, &clone).await.unwrap();
    daemon::remove_container(&docker, &id).await.unwrap();
    daemon::remove_image(&docker, &image, false).await.unwrap();
    daemon::remove_image(&docker, &image, false).await.unwrap();
    assert!(daemon::list_containers_by_labels(&docker, &label)
        .await
        .unwrap()
        .is_empty());
    assert!(daemon::list_images_by_labels(&docker, &label)
        .await
        .unwrap()
        .is_empty());
    // The fixture survives (it is shared).
    assert!(
        fixture::resolve_image(&docker, &common::fixture_ref(&docker).await)
            .await
            .unwrap()
            .is_some()
    );
}
