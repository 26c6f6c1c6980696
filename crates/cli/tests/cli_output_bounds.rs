//! Host bytes of an output copy, through `checkfu sandbox run --outputs`
//! on every provider with the same assertions (memory always, Docker when
//! a daemon answers, linux when the host gives root and cgroups): holes a
//! workload made without writing a byte stay holes on the host; a file of
//! data islands in holes is copied byte-exact and sparse; the copy's
//! ceiling (`CHECKFU_OUTPUT_MAX_BYTES`) names the files past it; a host
//! destination that is a directory is named as such.

mod common;

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use common::providers::{providers, Provider};
use common::*;

const MIB: u64 = 1 << 20;

/// The length of each hole file: 16 MiB less one byte, under the 16 MiB
/// bound of one file read, so it is read and copied.
const HOLE_LEN: u64 = 16 * MIB - 1;

/// The bytes the files under `dir` allocate (`st_blocks * 512`, summed),
/// and the regular files there with their lengths.
fn usage(dir: &Path) -> (u64, Vec<(String, u64)>) {
    let mut total = 0;
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).expect("the output folder") {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        total += m.blocks() * 512;
        if m.is_file() {
            files.push((e.file_name().to_string_lossy().into_owned(), m.len()));
        }
    }
    files.sort();
    (total, files)
}

/// `n` files `s1`..`sN` of [`HOLE_LEN`] bytes made without writing a
/// byte: the reviewer's `for` loop on a real shell, its statements
/// written out on the memory oracle (whose shell has no `for`).
fn holes_script(p: &Provider, n: u32) -> String {
    let one = |i: u32| {
        format!("dd if=/dev/zero of=/mnt/session/outputs/s{i} bs=1 count=0 seek={HOLE_LEN}")
    };
    match p {
        Provider::Memory => (1..=n).map(one).collect::<Vec<_>>().join("; "),
        _ => format!(
            "for i in $(seq {n}); do dd if=/dev/zero of=/mnt/session/outputs/s$i bs=1 count=0 seek={HOLE_LEN}; done"
        ),
    }
}

/// The run's stderr says the workload exited 0 before any copy verdict.
fn assert_status_reported(o: &std::process::Output, name: &str) {
    assert!(
        stderr(o).contains("the workload exited with status 0; the output copy is incomplete"),
        "{name}: {}",
        describe(o)
    );
}

#[test]
fn sixty_holes_under_the_file_bound_take_at_most_2_mib_of_host_bytes() {
    for p in providers("output_bounds_sixty_holes") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("spb");
        let name = p.name();
        // The reviewer's input: 60 files of 16 MiB of hole, --timeout 1.
        let script = holes_script(&p, 60);
        let o = output(p.run(&[
            "--timeout",
            "1",
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ]));
        // The copy may end at its deadline (at least 5 s after the
        // workload): then the workload's status comes first, exit 125.
        match code(&o) {
            0 => {}
            125 => assert_status_reported(&o, name),
            other => panic!("{name}: exit {other}: {}", describe(&o)),
        }
        let (host_bytes, files) = usage(&out);
        assert!(
            !files.is_empty(),
            "{name}: nothing copied: {}",
            describe(&o)
        );
        for (file, len) in &files {
            assert_eq!(*len, HOLE_LEN, "{name}: {file}");
        }
        assert!(
            host_bytes <= 2 * MIB,
            "{name}: {} files take {host_bytes} host bytes: {}",
            files.len(),
            describe(&o)
        );
        p.finish();
    }
}

#[test]
fn holes_and_data_islands_are_copied_byte_exact_and_sparse() {
    for p in providers("output_bounds_islands") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        // Ten holes (161 MB written densely before), and `f`: "head" at 0,
        // "middle" at 8 MiB + 3, "t" at its last byte, holes between.
        let island = "dd if=/tmp/i of=/mnt/session/outputs/f bs=1 conv=notrunc";
        let script = format!(
            "{}; cd /mnt/session/outputs && printf head > f; \
             printf middle > /tmp/i; {island} seek={}; \
             printf t > /tmp/i; {island} seek={}",
            holes_script(&p, 10),
            8 * MIB + 3,
            HOLE_LEN - 1,
        );
        let o = output(p.run(&[
            "--timeout",
            "60",
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ]));
        assert_eq!(code(&o), 0, "{name}: {}", describe(&o));
        let mut expected = vec![0u8; HOLE_LEN as usize];
        expected[..4].copy_from_slice(b"head");
        let mid = (8 * MIB + 3) as usize;
        expected[mid..mid + 6].copy_from_slice(b"middle");
        expected[HOLE_LEN as usize - 1] = b't';
        let got = std::fs::read(out.join("f")).unwrap();
        assert!(got == expected, "{name}: f is not byte-exact");
        let f_bytes = std::fs::metadata(out.join("f")).unwrap().blocks() * 512;
        assert!(f_bytes <= 256 * 1024, "{name}: f takes {f_bytes} bytes");
        let (host_bytes, files) = usage(&out);
        assert_eq!(files.len(), 11, "{name}: {files:?}");
        for (file, len) in &files {
            assert_eq!(*len, HOLE_LEN, "{name}: {file}");
        }
        assert!(
            host_bytes <= MIB,
            "{name}: {host_bytes} host bytes: {}",
            describe(&o)
        );
        p.finish();
    }
}

#[test]
fn the_copy_ceiling_names_each_file_past_it_and_copies_those_that_fit() {
    for p in providers("output_bounds_ceiling") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        let name = p.name();
        // `big`: five islands in five 4 KiB blocks (20480 host bytes) in a
        // file of 1 MiB; `small.txt`: one block. The ceiling: 16384.
        let script = format!(
            "cd /mnt/session/outputs && printf x > /tmp/i; {}; echo ok > small.txt",
            (0..5)
                .map(|b| format!(
                    "dd if=/tmp/i of=big bs=1 conv=notrunc seek={}",
                    b * 4096 + 7
                ))
                .collect::<Vec<_>>()
                .join("; ")
                + &format!("; dd if=/dev/zero of=big bs=1 count=0 seek={MIB}")
        );
        let mut c = p.run(&[
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ]);
        let o = output(c.env("CHECKFU_OUTPUT_MAX_BYTES", "16384"));
        assert_eq!(code(&o), 125, "{name}: {}", describe(&o));
        assert_status_reported(&o, name);
        let err = stderr(&o);
        let named: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("/mnt/session/outputs/big not copied"))
            .collect();
        assert_eq!(named.len(), 1, "{name}: {err}");
        // What is left is the ceiling less what the files copied before
        // it (in listing order) allocate.
        let left: u64 = named[0]
            .split("it needs 20480 host bytes, ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {err}"));
        assert!(left <= 16384, "{name}: {err}");
        assert!(
            named[0].contains("left of the output copy's 16384 ")
                && named[0].contains("CHECKFU_OUTPUT_MAX_BYTES"),
            "{name}: {err}"
        );
        assert!(!out.join("big").exists(), "{name}: big is not copied");
        assert_eq!(
            std::fs::read(out.join("small.txt")).ok(),
            Some(b"ok\n".to_vec()),
            "{name}: {err}"
        );
        p.finish();
    }
}

#[test]
fn a_malformed_copy_ceiling_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = output(
        checkfu()
            .args([
                "sandbox",
                "run",
                "--image",
                "demo:1",
                "--outputs",
                out.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "echo ran",
            ])
            .env("CHECKFU_OUTPUT_MAX_BYTES", "1G"),
    );
    assert_one_line_failure(
        &o,
        2,
        &[
            "CHECKFU_OUTPUT_MAX_BYTES",
            "a decimal number of bytes",
            "\"1G\"",
        ],
    );
    assert_eq!(stdout(&o), "", "nothing ran: {}", describe(&o));
    assert!(!out.exists(), "no output folder: {}", describe(&o));
}

#[test]
fn a_directory_at_an_outputs_destination_is_named_as_the_reason() {
    for p in providers("output_bounds_directory") {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("o");
        std::fs::create_dir_all(out.join("good.txt")).unwrap();
        let name = p.name();
        let o = output(p.run(&[
            "--outputs",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "cd /mnt/session/outputs && echo good > good.txt && echo other > other.txt",
        ]));
        assert_eq!(code(&o), 125, "{name}: {}", describe(&o));
        assert_status_reported(&o, name);
        let err = stderr(&o);
        let named: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("/mnt/session/outputs/good.txt not copied"))
            .collect();
        assert_eq!(named.len(), 1, "{name}: {err}");
        assert!(
            named[0].ends_with("not copied: \"good.txt\" is a directory on the host"),
            "{name}: {err}"
        );
        assert!(out.join("good.txt").is_dir(), "{name}: left as it was");
        assert_eq!(
            std::fs::read(out.join("other.txt")).ok(),
            Some(b"other\n".to_vec()),
            "{name}: {err}"
        );
        p.finish();
    }
}
