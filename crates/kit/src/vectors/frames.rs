//! openProcess frames (`frames:open_process`): the sequences a runner
//! receives from a served process, held to the wire protocol's stream
//! rules (`PROTOCOL.md`, "openProcess").

use super::*;

fn output(stream: &str, offset: u64, data: &[u8]) -> Value {
    json!({"method": "process/output", "params": {"process": "p-1", "stream": stream, "offset": offset, "data_base64": j(&Bytes(data.to_vec()))}})
}

fn ack(stream: &str, offset: u64) -> Value {
    json!({"method": "process/ack", "params": {"process": "p-1", "stream": stream, "offset": offset}})
}

fn eof(stream: &str, offset: u64) -> Value {
    json!({"method": "process/eof", "params": {"process": "p-1", "stream": stream, "offset": offset}})
}

fn exit(exit: Value) -> Value {
    json!({"method": "process/exit", "params": {"process": "p-1", "exit": exit}})
}

fn frames(window: u64, list: Vec<Value>) -> Value {
    json!({"replay_window_bytes": window, "frames": list})
}

pub(super) fn open_process_frames(v: &mut Vectors) {
    let check = crate::FRAMES_CHECK;
    let ok = |v: &mut Vectors, name: &str, description: &str, input: Value| {
        v.push(
            true,
            name,
            description,
            check.into(),
            input,
            json!({"outcome": "accepted"}),
            None,
        )
    };
    let bad = |v: &mut Vectors,
               name: &str,
               description: &str,
               input: Value,
               field: &str,
               expected: &str,
               actual: &str| {
        let mut error = json!({"_tag": "SandboxProtocolInvalid", "field": field, "actual": actual});
        if !expected.is_empty() {
            error["expected"] = json!(expected);
        }
        v.push(
            false,
            name,
            description,
            check.into(),
            input,
            json!({"outcome": "refused", "field": field, "error": error}),
            None,
        )
    };
    ok(
        v,
        "frames-open-process-session",
        "stdout and stderr each offset-numbered from 0 without gaps, acknowledged, ended at their totals, then one exit.",
        frames(
            8,
            vec![
                output("stdout", 0, b"hello "),
                output("stderr", 0, b"warn"),
                ack("stdout", 6),
                output("stdout", 6, b"world\n"),
                eof("stdout", 12),
                eof("stderr", 4),
                exit(json!({"exit_code": 0})),
            ],
        ),
    );
    ok(
        v,
        "frames-open-process-overlapping-resend",
        "A chunk resent after a reconnect overlaps bytes already received: only the new bytes count.",
        frames(
            16,
            vec![
                output("stdout", 0, b"abcd"),
                output("stdout", 2, b"cdef"),
                eof("stdout", 6),
                exit(json!({"signal": "SIGTERM"})),
            ],
        ),
    );
    bad(
        v,
        "frames-open-process-gap",
        "An output frame past the bytes received: a chunk was lost and the stream cannot be made whole.",
        frames(16, vec![output("stdout", 0, b"abcd"), output("stdout", 5, b"f")]),
        "process/output.offset",
        "at most 4 (no gap)",
        "5",
    );
    bad(
        v,
        "frames-open-process-over-replay-window",
        "More unacknowledged output than the declared replay window.",
        frames(
            8,
            vec![output("stdout", 0, b"abcdef"), output("stdout", 6, b"ghi")],
        ),
        "process/output.data_base64",
        "at most 8 unacknowledged bytes (the replay window)",
        "9 bytes",
    );
    ok(
        v,
        "frames-open-process-window-freed-by-ack",
        "The same bytes as the over-window vector, with an acknowledgement between: the window counts unacknowledged bytes only.",
        frames(
            8,
            vec![
                output("stdout", 0, b"abcdef"),
                ack("stdout", 6),
                output("stdout", 6, b"ghi"),
            ],
        ),
    );
    bad(
        v,
        "frames-open-process-eof-short",
        "eof claims fewer bytes than were delivered.",
        frames(16, vec![output("stdout", 0, b"abcd"), eof("stdout", 3)]),
        "process/eof.offset",
        "4",
        "3",
    );
    bad(
        v,
        "frames-open-process-eof-long",
        "eof claims bytes that never arrived: output was lost.",
        frames(16, vec![output("stdout", 0, b"abcd"), eof("stdout", 6)]),
        "process/eof.offset",
        "4",
        "6",
    );
    bad(
        v,
        "frames-open-process-streams-are-separate",
        "stderr bytes do not advance stdout: each stream is numbered on its own.",
        frames(
            16,
            vec![output("stderr", 0, b"abcd"), output("stdout", 4, b"e")],
        ),
        "process/output.offset",
        "at most 0 (no gap)",
        "4",
    );
    bad(
        v,
        "frames-open-process-exit-two-causes",
        "An exit with an exit code and a signal: it settles with exactly one.",
        frames(16, vec![exit(json!({"exit_code": 0, "signal": "SIGKILL"}))]),
        "process/exit.exit",
        "",
        "{\"exit_code\":0,\"signal\":\"SIGKILL\"}",
    );
    bad(
        v,
        "frames-open-process-unknown-stream",
        "Output on a stream that is not stdout or stderr.",
        frames(16, vec![output("stdlog", 0, b"a")]),
        "process/output.stream",
        "",
        "\"stdlog\"",
    );
    bad(
        v,
        "frames-open-process-unknown-member",
        "A frame with a member the protocol does not define.",
        frames(
            16,
            vec![
                json!({"method": "process/eof", "params": {"process": "p-1", "stream": "stdout", "offset": 0, "crc": 7}}),
            ],
        ),
        "process/eof.crc",
        "",
        "7",
    );
    bad(
        v,
        "frames-open-process-unknown-method",
        "A notification that is not one of the process frames.",
        frames(
            16,
            vec![json!({"method": "process/progress", "params": {"process": "p-1"}})],
        ),
        "method",
        "a process/* notification",
        "process/progress",
    );
}
