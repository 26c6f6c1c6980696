//! The request bounds of execute (`validate:SandboxCommand`).

use super::*;

fn command_input(command: &SandboxCommand) -> Value {
    json!({"request": command, "max_duration_seconds": profile().max_duration_seconds})
}

pub(super) fn validate_command(v: &mut Vectors) {
    let ty = "SandboxCommand";
    let ok = |v: &mut Vectors, name: &str, description: &str, c: SandboxCommand| {
        v.ok_validate(name, description, ty, command_input(&c))
    };
    let bad = |v: &mut Vectors,
               name: &str,
               description: &str,
               c: SandboxCommand,
               field: &str,
               verdict| {
        v.bad_validate(
            name,
            description,
            ty,
            command_input(&c),
            "execute",
            field,
            verdict,
        )
    };
    ok(
        v,
        "validate-command-baseline",
        "A command inside every bound.",
        command(),
    );
    ok(
        v,
        "validate-command-arguments-at-bound",
        "Exactly 256 arguments.",
        SandboxCommand {
            arguments: vec!["x".into(); MAX_ARGUMENTS],
            ..command()
        },
    );
    ok(
        v,
        "validate-command-argument-at-bound",
        "One argument of exactly 65,536 bytes.",
        SandboxCommand {
            arguments: vec!["a".repeat(MAX_ARGUMENT_BYTES)],
            ..command()
        },
    );
    ok(
        v,
        "validate-command-timeout-at-max-duration",
        "timeout_seconds equal to the profile's max_duration_seconds.",
        SandboxCommand {
            timeout_seconds: 600,
            ..command()
        },
    );
    ok(
        v,
        "validate-command-output-limit-at-bound",
        "output_limit_bytes of exactly 16 MiB.",
        SandboxCommand {
            output_limit_bytes: MAX_OUTPUT_LIMIT_BYTES,
            ..command()
        },
    );
    bad(
        v,
        "validate-command-arguments-over-bound",
        "257 arguments.",
        SandboxCommand {
            arguments: vec!["x".into(); MAX_ARGUMENTS + 1],
            ..command()
        },
        "arguments",
        "rejects",
    );
    bad(
        v,
        "validate-command-argument-over-bound",
        "One argument of 65,537 bytes.",
        SandboxCommand {
            arguments: vec!["a".repeat(MAX_ARGUMENT_BYTES + 1)],
            ..command()
        },
        "arguments[0]",
        "rejects",
    );
    bad(
        v,
        "validate-command-argument-nul",
        "An argument containing NUL.",
        SandboxCommand {
            arguments: vec!["-c".into(), "a\0b".into()],
            ..command()
        },
        "arguments[1]",
        "rejects",
    );
    let env = |key: &str| {
        let mut c = command();
        c.environment.insert(key.into(), "1".into());
        c
    };
    bad(
        v,
        "validate-command-environment-key-leading-digit",
        "An environment key starting with a digit.",
        env("1A"),
        "environment[\"1A\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-environment-key-dash",
        "An environment key with a dash.",
        env("A-B"),
        "environment[\"A-B\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-environment-key-empty",
        "An empty environment key.",
        env(""),
        "environment[\"\"]",
        "rejects",
    );
    bad(
        v,
        "validate-command-timeout-zero",
        "timeout_seconds 0.",
        SandboxCommand {
            timeout_seconds: 0,
            ..command()
        },
        "timeout_seconds",
        "rejects",
    );
    bad(v, "validate-command-timeout-over-max-duration", "timeout_seconds one over the profile's max_duration_seconds (a runtime check the schema cannot see).", SandboxCommand { timeout_seconds: 601, ..command() }, "timeout_seconds", "accepts");
    bad(
        v,
        "validate-command-output-limit-over-bound",
        "output_limit_bytes one over 16 MiB.",
        SandboxCommand {
            output_limit_bytes: MAX_OUTPUT_LIMIT_BYTES + 1,
            ..command()
        },
        "output_limit_bytes",
        "rejects",
    );
    bad(
        v,
        "validate-command-working-directory-relative",
        "A relative working directory.",
        SandboxCommand {
            working_directory: "workspace".into(),
            ..command()
        },
        "working_directory",
        "accepts",
    );
    bad(
        v,
        "validate-command-working-directory-dot-dot",
        "A working directory with a .. component.",
        SandboxCommand {
            working_directory: "/workspace/../etc".into(),
            ..command()
        },
        "working_directory",
        "accepts",
    );
    bad(
        v,
        "validate-command-executable-empty",
        "An empty executable.",
        SandboxCommand {
            executable: String::new(),
            ..command()
        },
        "executable",
        "accepts",
    );

    let pty = "SandboxProcessRequest";
    let op = "open_process";
    v.ok_validate(
        "validate-process-baseline",
        "An openProcess request inside every bound.",
        pty,
        json!({"request": process_request()}),
    );
    v.ok_validate("validate-process-arguments-at-bound", "Exactly 256 arguments.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["x".into(); MAX_ARGUMENTS], ..process_request() }}));
    v.bad_validate("validate-process-arguments-over-bound", "257 arguments.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["x".into(); MAX_ARGUMENTS + 1], ..process_request() }}), op, "arguments", "rejects");
    v.bad_validate("validate-process-argument-nul", "An argument containing NUL.", pty, json!({"request": SandboxProcessRequest { arguments: vec!["\0".into()], ..process_request() }}), op, "arguments[0]", "rejects");
    let mut p = process_request();
    p.environment.insert("X=Y".into(), "1".into());
    v.bad_validate(
        "validate-process-environment-key-equals",
        "An environment key containing =.",
        pty,
        json!({"request": p}),
        op,
        "environment[\"X=Y\"]",
        "rejects",
    );
    v.bad_validate("validate-process-working-directory-trailing-slash", "A working directory with a trailing slash.", pty, json!({"request": SandboxProcessRequest { working_directory: "/workspace/".into(), ..process_request() }}), op, "working_directory", "accepts");
}
