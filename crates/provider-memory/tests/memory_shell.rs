//! The oracle's shell subset through execute and the observing members:
//! lists, redirections, expansion, `while`, the applets real workloads
//! send (`printf`, `dd`, `chmod`, `setsid`), files with holes, and
//! background jobs that outlive their command (decision 037, "oracle
//! shell subset").

mod common;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{FsNode, MemoryProvider};
use common::*;

const OUT: &str = "/mnt/session/outputs";

async fn sh(p: &MemoryProvider, id: &str, script: &str) -> SandboxCommandResult {
    run(p, id, &["sh", "-c", script]).await
}

fn code(r: &SandboxCommandResult) -> ExitCause {
    r.exit
}

async fn listing(p: &MemoryProvider, id: &str) -> Vec<DirEntry> {
    p.list_dir()
        .expect("list_dir")
        .list_dir(ListDirRequest {
            instance_id: id.into(),
            root: OUT.into(),
            max_entries: 100,
        })
        .await
        .unwrap()
        .entries
}

async fn size_listed(p: &MemoryProvider, id: &str, path: &str) -> u64 {
    listing(p, id)
        .await
        .into_iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("{path} is listed"))
        .size_bytes
}

#[tokio::test]
async fn lists_chains_redirections_and_expansion_behave_like_sh() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let cases: &[(&str, u8, &str)] = &[
        ("false && echo no; echo $?", 0, "1\n"),
        ("false || echo yes", 0, "yes\n"),
        ("true && false || echo both", 0, "both\n"),
        ("X='a  b'; echo $X \"$X\"", 0, "a b a  b\n"),
        ("X=1 env | grep -c X=1 || Y=2; echo ${Y}", 2, ""),
        ("X=1 env", 0, "HOME=/home/checkfu\nX=1\n"),
        ("echo \"$(echo inner; echo)\"-", 0, "inner-\n"),
        ("echo $(printf 'a b\\n')", 0, "a b\n"),
        ("cd /mnt/session/outputs && pwd; pwd", 0, "/mnt/session/outputs\n/mnt/session/outputs\n"),
        ("sh -c 'cd /tmp; exit 4'; echo $?; pwd", 0, "4\n/\n"),
        ("echo err >&2 2>/dev/null", 0, ""),
        ("echo one > /mnt/session/outputs/f; echo two >> /mnt/session/outputs/f; cat < /mnt/session/outputs/f", 0, "one\ntwo\n"),
        ("(echo sub)", 2, ""),
        ("echo a | cat", 2, ""),
        ("cd /nowhere", 2, ""),
        ("echo x > /nowhere/f", 2, ""),
        ("i=0; while false; do :; done; echo $?", 0, "0\n"),
        ("printf '%s-%03d|' a 7 b 12; printf '\\n'", 0, "a-007|b-012|\n"),
        ("exit 7; echo never", 7, ""),
    ];
    for (script, want, out) in cases {
        let r = sh(&p, &id, script).await;
        assert_eq!(
            code(&r),
            ExitCause::ExitCode(*want),
            "{script}: {}",
            stderr(&r)
        );
        if *want != 2 {
            let got = stdout(&r);
            // `env` prints every variable; compare the ones named here.
            let got = if script.ends_with("env") {
                got.lines()
                    .filter(|l| l.starts_with("X=") || l.starts_with("HOME="))
                    .map(|l| format!("{l}\n"))
                    .collect::<Vec<_>>()
                    .join("")
            } else {
                got
            };
            assert_eq!(got, *out, "{script}");
        }
    }
    // What leaves the subset names it, with status 2.
    let r = sh(&p, &id, "echo a | cat").await;
    assert_eq!(
        stderr(&r),
        "sh: syntax not supported by the memory oracle\n"
    );
    let r = sh(&p, &id, "echo x > /nowhere/f").await;
    assert_eq!(
        stderr(&r),
        "sh: can't create /nowhere/f: No such file or directory\n"
    );
}

#[tokio::test]
async fn printf_octal_escapes_name_a_file_by_its_exact_bytes() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let r = sh(
        &p,
        &id,
        "cd /mnt/session/outputs && echo good > good.txt && echo bad > \"$(printf \"bad-\\377\")\"",
    )
    .await;
    assert_eq!(code(&r), ExitCause::ExitCode(0), "{}", stderr(&r));
    let paths: Vec<Vec<u8>> = listing(&p, &id)
        .await
        .into_iter()
        .map(|e| e.path.as_bytes().to_vec())
        .collect();
    assert_eq!(
        paths,
        vec![
            b"/mnt/session/outputs/bad-\xff".to_vec(),
            b"/mnt/session/outputs/good.txt".to_vec()
        ]
    );
    // A non-UTF-8 argument reaches only redirections and cd.
    let r = sh(&p, &id, "cat \"$(printf 'bad-\\377')\"").await;
    assert_eq!(code(&r), ExitCause::ExitCode(2));
    assert!(stderr(&r).contains("not supported"), "{}", stderr(&r));
    let r = sh(
        &p,
        &id,
        "cd /mnt/session/outputs; cat < \"$(printf 'bad-\\377')\"",
    )
    .await;
    assert_eq!(stdout(&r), "bad\n", "{}", stderr(&r));
}

#[tokio::test]
async fn dd_seek_leaves_a_hole_listed_at_its_size_and_never_stored() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let r = sh(
        &p,
        &id,
        "echo ok > /mnt/session/outputs/a.txt; \
         dd if=/dev/zero of=/mnt/session/outputs/s bs=1 count=0 seek=24G",
    )
    .await;
    assert_eq!(code(&r), ExitCause::ExitCode(0), "{}", stderr(&r));
    assert_eq!(
        stderr(&r),
        "0+0 records in\n0+0 records out\n0 bytes copied\n"
    );
    assert_eq!(
        p.node(&id, "/mnt/session/outputs/s"),
        Some(FsNode::File(Vec::new())),
        "the hole stores nothing"
    );
    let entries = listing(&p, &id).await;
    let s = entries
        .iter()
        .find(|e| e.path == "/mnt/session/outputs/s")
        .unwrap();
    assert_eq!(s.size_bytes, 24 << 30);
    assert_eq!(s.sha256, None, "over 16 MiB: not hashed (decision 018)");
    let e = read(&p, &id, OUT, "/mnt/session/outputs/s")
        .await
        .unwrap_err();
    assert!(
        matches!(e, SandboxError::SandboxFileTooLarge { actual_bytes, .. } if actual_bytes == 24 << 30),
        "{e:?}"
    );
    // A small hole reads as zeros and hashes as its whole body.
    sh(&p, &id, "printf ab > /mnt/session/outputs/h; dd of=/mnt/session/outputs/h bs=1 seek=6 count=0 status=none; printf z >> /mnt/session/outputs/h").await;
    let body = read(&p, &id, OUT, "/mnt/session/outputs/h").await.unwrap();
    assert_eq!(body.content_base64.as_slice(), b"ab\0\0\0\0z");
    let h = listing(&p, &id)
        .await
        .into_iter()
        .find(|e| e.path == "/mnt/session/outputs/h")
        .unwrap();
    assert_eq!(h.size_bytes, 7);
    assert_eq!(
        h.sha256,
        Some(Digest::from_sha256_bytes(sha2_of(b"ab\0\0\0\0z")))
    );
    // dd copies a file's bytes between offsets.
    let r = sh(
        &p,
        &id,
        "printf 0123456789 > /tmp/n; dd if=/tmp/n bs=2 skip=1 count=2 status=none",
    )
    .await;
    assert_eq!(stdout(&r), "2345");
}

fn sha2_of(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

#[tokio::test]
async fn chmod_makes_a_written_script_executable() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let r = sh(
        &p,
        &id,
        "echo \"#!/bin/sh\" > /mnt/session/outputs/x.sh; echo 'echo ran' >> /mnt/session/outputs/x.sh; \
         /mnt/session/outputs/x.sh; chmod 755 /mnt/session/outputs/x.sh && /mnt/session/outputs/x.sh",
    )
    .await;
    assert_eq!(code(&r), ExitCause::ExitCode(0), "{}", stderr(&r));
    assert_eq!(stdout(&r), "ran\n");
    assert!(
        stderr(&r).contains("Permission denied"),
        "before chmod: {}",
        stderr(&r)
    );
    let r = sh(&p, &id, "chmod u+x /mnt/session/outputs/x.sh").await;
    assert_eq!(code(&r), ExitCause::ExitCode(1));
    assert!(stderr(&r).contains("octal"), "{}", stderr(&r));
}

#[tokio::test]
async fn a_background_writer_grows_its_file_between_observations_until_destroyed() {
    let (p, clock) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    let before = clock.now();
    let r = sh(
        &p,
        &id,
        "cd /mnt/session/outputs; echo ok > a.txt; \
         setsid sh -c 'while :; do echo x >> log.txt; done' </dev/null >/dev/null 2>&1 & sleep 1",
    )
    .await;
    assert_eq!(code(&r), ExitCause::ExitCode(0), "{}", stderr(&r));
    assert_eq!((stdout(&r).as_str(), stderr(&r).as_str()), ("", ""));
    assert_eq!(
        clock.now(),
        before.add_millis(1_000),
        "only the sleep took time"
    );
    // One iteration ran with the command; every observation adds one.
    assert_eq!(
        p.node(&id, "/mnt/session/outputs/log.txt"),
        Some(FsNode::File(b"x\n".to_vec()))
    );
    let listed = size_listed(&p, &id, "/mnt/session/outputs/log.txt").await;
    assert_eq!(listed, 4);
    let body = read(&p, &id, OUT, "/mnt/session/outputs/log.txt")
        .await
        .unwrap();
    assert_eq!(body.content_base64.as_slice(), b"x\nx\nx\n");
    let r = run(&p, &id, &["cat", "/mnt/session/outputs/log.txt"]).await;
    assert_eq!(stdout(&r), "x\nx\nx\nx\n");
    // A snapshot keeps the tree, not the writer.
    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap()
        .value;
    let resumed = p
        .resume(ResumeRequest {
            request: request(RetentionMode::Durable),
            snapshot: snap,
        })
        .await
        .unwrap()
        .value
        .instance_id;
    let a = size_listed(&p, &resumed, "/mnt/session/outputs/log.txt").await;
    let b = size_listed(&p, &resumed, "/mnt/session/outputs/log.txt").await;
    assert_eq!((a, b), (8, 8), "the snapshot's copy has no job");
    // Destroying the instance ends its job with it.
    p.destroy(DestroyRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();
    assert_eq!(p.node(&id, "/mnt/session/outputs/log.txt"), None);
}

#[tokio::test]
async fn a_job_goes_on_with_what_followed_its_loop() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    // The loop ends once `stop` exists; then the job writes `done`.
    let r = sh(
        &p,
        &id,
        "cd /mnt/session/outputs; \
         (while ls stop; do :; done) 2>/dev/null; \
         sh -c 'while cat go >/dev/null 2>&1; do echo t >> ticks; done; echo done > end' &",
    )
    .await;
    assert_eq!(
        code(&r),
        ExitCause::ExitCode(2),
        "a subshell in ( ) is refused"
    );
    let r = sh(
        &p,
        &id,
        "cd /mnt/session/outputs; touch go; \
         sh -c 'while cat go >/dev/null 2>&1; do echo t >> ticks; done; echo done > end' &",
    )
    .await;
    assert_eq!(code(&r), ExitCause::ExitCode(0), "{}", stderr(&r));
    assert_eq!(size_listed(&p, &id, "/mnt/session/outputs/ticks").await, 4);
    run(&p, &id, &["rm", "/mnt/session/outputs/go"]).await;
    let names: Vec<SandboxPath> = listing(&p, &id).await.into_iter().map(|e| e.path).collect();
    assert!(
        names.contains(&"/mnt/session/outputs/end".into()),
        "{names:?}"
    );
    let end = read(&p, &id, OUT, "/mnt/session/outputs/end")
        .await
        .unwrap();
    assert_eq!(end.content_base64.as_slice(), b"done\n");
    let ticks = read(&p, &id, OUT, "/mnt/session/outputs/ticks")
        .await
        .unwrap();
    assert_eq!(ticks.content_base64.len(), 6, "the job has ended");
}

#[tokio::test]
async fn an_endless_foreground_loop_runs_until_the_timeout() {
    let (p, clock) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let before = clock.now();
    let mut c = command(&["sh", "-c", "while :; do :; done"]);
    c.timeout_seconds = 3;
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(r.exit, ExitCause::TimedOut);
    assert_eq!(clock.now(), before.add_millis(3_000));
    let r = sh(&p, &id, "while sleep 1; do echo t; done").await;
    assert_eq!(r.exit, ExitCause::TimedOut);
    assert_eq!(stdout(&r).len(), 2 * 60, "one line per second of 60");
}

#[tokio::test]
async fn redirections_apply_left_to_right_and_input_is_read_once() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    // `2>&1 >file`: errors go where output went before, output to the file.
    let r = sh(
        &p,
        &id,
        "cat /nope 2>&1 >/tmp/o; echo out >/tmp/o 2>/dev/null; cat /tmp/o",
    )
    .await;
    assert_eq!(
        stdout(&r),
        "cat: /nope: No such file or directory\nout\n",
        "{}",
        stderr(&r)
    );
    assert_eq!(stderr(&r), "");
    // The shell's input goes to its first reader; `<` feeds one command.
    let mut c = command(&["sh", "-c", "echo f > /tmp/f; cat < /tmp/f; cat; cat"]);
    c.stdin_base64 = Some(Bytes(b"in\n".to_vec()));
    let r = exec_cmd(&p, &id, c).await.unwrap();
    assert_eq!(stdout(&r), "f\nin\n", "{}", stderr(&r));
    // A file that is truncated keeps its mode; `>|` is `>`.
    let r = sh(
        &p,
        &id,
        "echo '#!/bin/sh' > /tmp/x; chmod 700 /tmp/x; echo '#!/bin/sh' >| /tmp/x; echo 'echo kept' >> /tmp/x; /tmp/x",
    )
    .await;
    assert_eq!(stdout(&r), "kept\n", "{}", stderr(&r));
}
