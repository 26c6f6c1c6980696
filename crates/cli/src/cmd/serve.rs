//! `checkfu sandbox serve`: serve a provider over the wire protocol
//! (`author-kit/PROTOCOL.md`) on stdio or a Unix socket, with its
//! conformance hooks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_memory::conformance::MemoryTarget;
use checkfu_sandbox_memory::Fault;
use checkfu_sandbox_wire::conformance::TargetHooks;
use checkfu_sandbox_wire::{serve_stdio, serve_unix, Served};

use super::ProviderArg;

/// Flags of `checkfu sandbox serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox serve                                  # the memory oracle on stdin/stdout
  checkfu sandbox serve --inject identity-session-id     # a faulty oracle, for the suite to catch
  checkfu sandbox serve --provider docker --socket /run/checkfu-docker.sock

Stdout carries protocol lines only; diagnostics go to stderr (RUST_LOG).

Exit status: 0 when the runner closed the connection (stdio); 1 when the runner broke the
protocol; 2 on usage errors; 125 when the provider or the socket could not be opened;
130/143 after SIGINT/SIGTERM.")]
pub struct ServeArgs {
    /// Provider to serve.
    #[arg(long, value_enum, default_value_t = ProviderArg::Memory)]
    pub provider: ProviderArg,
    /// Inject a memory-oracle fault (repeatable; see `checkfu sandbox faults`).
    #[arg(long = "inject", value_name = "FAULT")]
    pub inject: Vec<String>,
    /// Serve on a new Unix socket at PATH instead of stdio.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The static busybox the Docker fixture image is built from.
    #[arg(long, value_name = "PATH", default_value = checkfu_sandbox_docker::fixture::DEFAULT_BUSYBOX_PATH)]
    pub busybox: PathBuf,
}

/// Runs the command.
pub fn run(args: ServeArgs) -> ExitCode {
    let mut faults = Vec::new();
    for name in &args.inject {
        match Fault::from_name(name) {
            Some(f) => faults.push(f),
            None => {
                eprintln!("checkfu: --inject {name:?}: no such fault; `checkfu sandbox faults` lists them");
                return ExitCode::from(2);
            }
        }
    }
    if !faults.is_empty() && args.provider != ProviderArg::Memory {
        eprintln!("checkfu: --inject applies to the memory oracle only");
        return ExitCode::from(2);
    }
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let stop = super::stop_signal();
        tokio::pin!(stop);
        let (target, manual_clock) = match args.provider {
            ProviderArg::Memory => (
                Arc::new(MemoryTarget::with_faults(faults)) as Arc<dyn ConformanceTarget>,
                true,
            ),
            ProviderArg::Docker => match super::docker_target(&args.busybox).await {
                Ok(t) => (t, false),
                Err(message) => {
                    eprintln!("checkfu: docker: {message}");
                    return ExitCode::from(125);
                }
            },
            ProviderArg::Linux => match super::linux_target(&args.busybox).await {
                Ok(t) => (t, false),
                Err(message) => {
                    eprintln!("checkfu: linux: {message}");
                    return ExitCode::from(125);
                }
            },
        };
        let served = Served::new(target.provider())
            .with_hooks(Arc::new(TargetHooks::new(target.clone(), manual_clock)));
        // A path that exists already is refused by bind and is not ours to
        // remove afterwards.
        let socket_existed = args
            .socket
            .as_deref()
            .is_some_and(|p| std::fs::symlink_metadata(p).is_ok());
        let on = match &args.socket {
            Some(path) => format!("serve: --socket {}", path.display()),
            None => "serve".to_owned(),
        };
        let serving = async {
            match &args.socket {
                Some(path) => serve_unix(served, path).await,
                None => serve_stdio(served).await,
            }
        };
        let code = tokio::select! {
            r = serving => match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e @ checkfu_sandbox_wire::ServeError::Protocol(_)) => {
                    eprintln!("checkfu: {on}: {e}");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("checkfu: {on}: {e}");
                    ExitCode::from(125)
                }
            },
            s = &mut stop => match s {
                Ok(s) => ExitCode::from(s.code()),
                Err(e) => {
                    eprintln!("checkfu: serve: signal handlers: {e}");
                    ExitCode::from(125)
                }
            },
        };
        if let Some(path) = args.socket.as_deref().filter(|_| !socket_existed) {
            let _ = std::fs::remove_file(path);
        }
        super::close_target(&target).await;
        code
    })
}
