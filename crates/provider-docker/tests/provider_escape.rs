//! The workload plants symlinks meant to make the host read (or write)
//! outside the instance's directories: absolute, relative, dangling,
//! through a directory, and one it keeps swapping while the host reads.
//! A secret file planted on the host, outside the state directory, must
//! never come back through readFile, readFiles, listDir or listProjectDir,
//! and writeFile must never write through a planted link.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_runtime::staging::sha256_digest;
use common::provider_env::ProviderEnv;
use MountAccess::ReadWrite;

struct Secret {
    dir: std::path::PathBuf,
    file: std::path::PathBuf,
    bytes: Vec<u8>,
}

impl Secret {
    fn plant(test: &str) -> Secret {
        let dir = std::env::temp_dir().join(common::unique(&format!("checkfu-secret-{test}")));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret.txt");
        let bytes = format!("host secret {}\n", common::unique("token")).into_bytes();
        std::fs::write(&file, &bytes).unwrap();
        Secret { dir, file, bytes }
    }

    fn path(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    fn assert_absent(&self, what: &str, bytes: &[u8]) {
        let hay = String::from_utf8_lossy(bytes);
        let needle = String::from_utf8_lossy(&self.bytes);
        assert!(
            !hay.contains(needle.trim_end()),
            "{what} returned host bytes"
        );
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn failure_reason(f: &SandboxFailure) -> Option<FailureReason> {
    match f.error() {
        SandboxError::SandboxOperationFailed { reason, .. } => Some(*reason),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_symlinks_never_read_host_bytes() {
    let Some(env) = ProviderEnv::new("planted_symlinks_never_read_host_bytes").await else {
        return;
    };
    let secret = Secret::plant("read");
    let inst = env
        .active(
            env.request(
                "s",
                RetentionMode::EphemeralZdr,
                &[("/work", ReadWrite)],
                600,
            ),
            &[("/work/real.txt", b"real\n")],
        )
        .await;
    let id = inst.instance_id.as_str();
    let a = &env.adapter;
    let depth = "../".repeat(24);
    let rel_secret = format!("{depth}{}", secret.path().trim_start_matches('/'));
    let secret_dir = secret.dir.to_string_lossy().into_owned();
    let plant = format!(
        "set -e; cd /work; \
         ln -s {abs} abs; ln -s {rel} rel; ln -s /nonexistent/file dangling; \
         ln -s / rootdir; ln -s {dir} secretdir; ln -s real.txt inside; \
         mkdir -p sub; ln -s ../../../../../../../../../../../.. sub/up; \
         cp -P abs {out}/abs; ln -s {rel} {out}/rel; mkfifo {out}/fifo; \
         echo ok",
        abs = secret.path(),
        rel = rel_secret,
        dir = secret_dir,
        out = OUTPUT_PATH,
    );
    let r = env.run(id, &["sh", "-c", &plant]).await;
    assert_eq!(
        r.exit,
        ExitCause::ExitCode(0),
        "{}",
        String::from_utf8_lossy(&r.stderr_base64.0)
    );

    let secret_name = secret
        .file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let attempts = [
        "/work/abs".to_owned(),
        "/work/rel".to_owned(),
        "/work/dangling".to_owned(),
        format!("/work/rootdir{}", secret.path()),
        format!("/work/secretdir/{secret_name}"),
        format!("/work/sub/up{}", secret.path()),
        format!("{OUTPUT_PATH}/abs"),
        format!("{OUTPUT_PATH}/rel"),
    ];
    for path in &attempts {
        match a.read_file(id, path, 1 << 20).await {
            Ok(bytes) => {
                secret.assert_absent(path, &bytes);
                panic!("{path}: an escaping link was read");
            }
            Err(f) => assert!(
                matches!(
                    failure_reason(&f),
                    Some(FailureReason::OutsideRoot | FailureReason::NotFound)
                ),
                "{path}: {f}"
            ),
        }
    }
    // An in-root link is followed; a FIFO is refused without blocking.
    assert_eq!(
        a.read_file(id, "/work/inside", 64).await.unwrap(),
        b"real\n"
    );
    let t = Instant::now();
    let fifo = a
        .read_file(id, &format!("{OUTPUT_PATH}/fifo"), 64)
        .await
        .unwrap_err();
    assert_eq!(
        failure_reason(&fifo),
        Some(FailureReason::NotRegularFile),
        "{fifo}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));

    // readFiles: each member closed, none with host bytes.
    let batch: Vec<ReadFilesEntry> = attempts
        .iter()
        .chain(["/work/inside".to_owned(), format!("{OUTPUT_PATH}/fifo")].iter())
        .map(|p| ReadFilesEntry {
            path: p.clone().into(),
            maximum_bytes: 1 << 20,
        })
        .collect();
    let outcomes = a.read_files(id, batch).await.unwrap();
    for o in &outcomes {
        match o {
            ReadFileOutcome::Read {
                path,
                content_base64,
            } => {
                assert_eq!(path, "/work/inside");
                secret.assert_absent(&path.display(), &content_base64.0);
            }
            ReadFileOutcome::OutsideRoot { .. }
            | ReadFileOutcome::NotFound { .. }
            | ReadFileOutcome::NotRegularFile { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    // Listings name links as links and never hash through them.
    let secret_digest = sha256_digest(&secret.bytes);
    for root in ["/work", OUTPUT_PATH] {
        let listing = a.list_project_dir(id, root, 1000).await.unwrap();
        assert!(listing.complete);
        for e in &listing.entries {
            if let ProjectEntryKind::Regular { sha256, .. } = &e.kind {
                assert_ne!(*sha256, secret_digest, "{} hashed the secret", e.path);
            }
        }
        let abs = listing
            .entries
            .iter()
            .find(|e| e.path == format!("{root}/abs"));
        assert!(
            matches!(abs.map(|e| &e.kind), Some(ProjectEntryKind::Symlink { .. })),
            "{listing:?}"
        );
        let plain = a.list_dir(id, root, 1000).await.unwrap();
        for e in &plain.entries {
            assert_ne!(
                e.sha256.as_ref(),
                Some(&secret_digest),
                "{} hashed the secret",
                e.path
            );
        }
    }
    assert!(a
        .list_project_dir(id, "/work", 1000)
        .await
        .unwrap()
        .entries
        .iter()
        .any(|e| e.path == "/work/sub/up" && matches!(e.kind, ProjectEntryKind::Symlink { .. })));

    // writeFile never writes through a planted link: a linked directory is
    // refused, a linked name is replaced.
    let r = env
        .run(
            id,
            &[
                "sh",
                "-c",
                &format!("ln -s {secret_dir} {OUTPUT_PATH}/linkdir"),
            ],
        )
        .await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    let w = a
        .write_file(
            id,
            &format!("{OUTPUT_PATH}/linkdir/planted.txt"),
            b"x".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(failure_reason(&w), Some(FailureReason::OutsideRoot), "{w}");
    assert!(!secret.dir.join("planted.txt").exists());
    a.write_file(id, &format!("{OUTPUT_PATH}/abs"), b"replaced".to_vec())
        .await
        .unwrap();
    assert_eq!(std::fs::read(&secret.file).unwrap(), secret.bytes);
    assert_eq!(
        a.read_file(id, &format!("{OUTPUT_PATH}/abs"), 64)
            .await
            .unwrap(),
        b"replaced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_swapped_during_reads_never_leaks() {
    let Some(env) = ProviderEnv::new("a_link_swapped_during_reads_never_leaks").await else {
        return;
    };
    let secret = Secret::plant("swap");
    let inst = env
        .active(
            env.request(
                "s",
                RetentionMode::EphemeralZdr,
                &[("/work", ReadWrite)],
                600,
            ),
            &[("/work/real.txt", b"real\n")],
        )
        .await;
    let id = inst.instance_id.clone();
    let a = &env.adapter;
    let depth = "../".repeat(24);
    let swapper = format!(
        "cd /work; mkdir -p d; echo inner > d/f; \
         while :; do \
           ln -sfn {abs} swap; ln -sfn real.txt swap; \
           ln -sfn {depth}{rel} swap; ln -sfn real.txt swap; \
           ln -sfn {dir} swapdir; ln -sfn d swapdir; \
         done",
        abs = secret.path(),
        rel = secret.path().trim_start_matches('/'),
        dir = secret.dir.to_string_lossy(),
    );
    let process = a
        .open_process(SandboxProcessRequest {
            instance_id: id.clone(),
            executable: "sh".into(),
            arguments: vec!["-c".into(), swapper],
            working_directory: "/".into(),
            environment: Default::default(),
        })
        .await
        .unwrap();
    let secret_name = secret
        .file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (mut read, mut refused, mut listings) = (0, 0, 0);
    let t = Instant::now();
    for i in 0..600 {
        let path = if i % 2 == 0 {
            "/work/swap".to_owned()
        } else {
            format!("/work/swapdir/{secret_name}")
        };
        match a.read_file(&id, &path, 1 << 20).await {
            Ok(bytes) => {
                secret.assert_absent(&path, &bytes);
                assert_eq!(bytes, b"real\n", "{path}");
                read += 1;
            }
            Err(f) => {
                assert!(
                    matches!(
                        failure_reason(&f),
                        Some(FailureReason::OutsideRoot | FailureReason::NotFound)
                    ),
                    "{path}: {f}"
                );
                refused += 1;
            }
        }
        if i % 50 == 0 {
            let outcomes = a
                .read_files(
                    &id,
                    vec![
                        ReadFilesEntry {
                            path: "/work/swap".into(),
                            maximum_bytes: 1 << 20,
                        },
                        ReadFilesEntry {
                            path: format!("/work/swapdir/{secret_name}").into(),
                            maximum_bytes: 1 << 20,
                        },
                    ],
                )
                .await
                .unwrap();
            for o in outcomes {
                if let ReadFileOutcome::Read {
                    content_base64,
                    path,
                } = o
                {
                    secret.assert_absent(&path.display(), &content_base64.0);
                }
            }
            // A tree changing under the walk may fail the listing closed
            // (provider_error); a listing that succeeds never hashes the
            // secret.
            match a.list_project_dir(&id, "/work", 1000).await {
                Ok(listing) => {
                    listings += 1;
                    for e in listing.entries {
                        if let ProjectEntryKind::Regular { sha256, .. } = e.kind {
                            assert_ne!(sha256, sha256_digest(&secret.bytes), "{}", e.path);
                        }
                    }
                }
                Err(f) => assert_eq!(
                    failure_reason(&f),
                    Some(FailureReason::ProviderError),
                    "{f}"
                ),
            }
        }
    }
    process.handle.destroy().await.unwrap();
    eprintln!(
        "swap race: {read} reads of the in-root target, {refused} refusals, {listings} of 12 listings in {:?}",
        t.elapsed()
    );
    assert!(refused > 0, "the swapper never raced a read");
}
