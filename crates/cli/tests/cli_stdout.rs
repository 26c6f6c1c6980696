//! Stdout closed by its reader: every command that prints ends quietly
//! with 141 (the status of a SIGPIPE death) instead of panicking.

mod common;

use std::process::Stdio;

use common::*;

/// Runs `checkfu args` with stdout a pipe whose read end is already
/// closed, so that its first write fails with `BrokenPipe`. Both ends are
/// close-on-exec (the child gets the write end as its stdout all the
/// same): a process another test of this binary spawns meanwhile must not
/// inherit the read end and keep the pipe open, or the writes succeed
/// into the pipe's buffer and the command exits 0.
fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    drop(reader);
    let mut c = checkfu();
    c.args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped());
    c.output().expect("checkfu runs")
}

#[test]
fn a_closed_stdout_is_a_quiet_141() {
    let tmp = tempfile::tempdir().unwrap();
    let kit = tmp.path().join("kit");
    let kit = kit.to_str().unwrap();
    let commands: [&[&str]; 7] = [
        &["sandbox", "faults"],
        &["sandbox", "capabilities"],
        &["sandbox", "capabilities", "--json"],
        &["completions", "bash"],
        &["sandbox", "test", "--case", "stage-seal-execute"],
        &["sandbox", "schema", "--out", kit],
        &["sandbox", "run", "--image", "demo:1", "--", "echo", "hello"],
    ];
    for args in commands {
        let o = with_closed_stdout(args);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {}", describe(&o));
        assert_eq!(o.status.code(), Some(141), "{args:?}: {}", describe(&o));
        assert!(
            !err.contains("Broken pipe"),
            "{args:?}: a closed stdout is quiet: {}",
            describe(&o)
        );
    }
}

#[test]
fn faults_read_one_line_then_close() {
    let mut child = checkfu()
        .args(["sandbox", "faults"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("checkfu spawns");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).expect("one line");
    assert!(!first.is_empty());
    drop(out);
    let o = child.wait_with_output().expect("exit");
    assert!(!stderr(&o).contains("panicked"), "{}", describe(&o));
    assert!(matches!(o.status.code(), Some(0 | 141)), "{}", describe(&o));
}
