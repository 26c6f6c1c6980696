//! The interpreter of the oracle's shell subset over a parsed [`List`]:
//! lists, and-or chains, `while` loops, redirections, subshells and
//! background jobs.
//!
//! Time is virtual and the oracle synchronous, so a background job is run
//! in steps: started with `&`, it runs at once until it finishes or has
//! completed one loop iteration; a job that has not finished is kept with
//! the instance's tree ([`Fs::jobs`](crate::fs::Fs)) as a [`Job`] and
//! advanced one more iteration each time a member observes the instance
//! ([`step_jobs`]). It ends when it finishes, blocks (a read of a FIFO),
//! signals, overflows its streams, or its instance is destroyed or
//! released; a snapshot carries no job. A loop in the foreground runs at
//! most [`FOREGROUND_ITERATIONS`] iterations and then counts as running
//! until the command's timeout.
//!
//! Redirected output is delivered when the redirected command returns (or
//! its job step ends), standard output before standard error.

use crate::fs::text;
use crate::script::{AndOr, Command, CommandKind, Connector, Dest, Frame, Item, Job, List};
use crate::script::{Redirect, RedirectOp};

use super::*;

/// Iterations a foreground `while` loop runs before it counts as endless
/// (running until the command's timeout).
pub(crate) const FOREGROUND_ITERATIONS: u64 = 100_000;

/// Most background jobs kept with one instance; another `&` then fails
/// as a `fork` would.
pub(crate) const MAX_JOBS: usize = 64;

/// Bound of a redirected or captured stream inside the shell, in bytes
/// (64 MiB): past it the command ends as on an output overflow.
const CAPTURE_BYTES: u64 = 64 * 1024 * 1024;

/// The answer of a script outside the subset.
pub(crate) const UNSUPPORTED: &str = "sh: syntax not supported by the memory oracle";

/// How a piece of script ended.
#[derive(Debug)]
pub(super) enum Flow {
    /// It ran to its end with this status.
    Normal(u8),
    /// `exit N`: ends the enclosing shell.
    Exit(u8),
    /// A background job ran out of its step: what it goes on with.
    Suspend(Job),
}

type Step = Result<Flow, Abort>;

/// A shell over one command's [`Exec`].
pub(super) struct Shell<'s, 'a> {
    pub(super) exec: &'s mut Exec<'a>,
    /// `$?`.
    pub(super) status: u8,
    /// Loop iterations left in this job step; `None` in the foreground.
    budget: Option<u32>,
    /// The status of the last command substitution of the current simple
    /// command.
    pub(super) substituted: Option<u8>,
}

impl<'s, 'a> Shell<'s, 'a> {
    /// A foreground shell.
    pub(super) fn new(exec: &'s mut Exec<'a>) -> Self {
        Shell {
            exec,
            status: 0,
            budget: None,
            substituted: None,
        }
    }

    /// Runs a script as `sh -c` does: its exit status.
    pub(super) fn script(&mut self, list: &List) -> Result<u8, Abort> {
        match self.run_list(list)? {
            Flow::Normal(code) | Flow::Exit(code) => Ok(code),
            // Only a job step has a budget to run out of.
            Flow::Suspend(_) => Ok(self.status),
        }
    }

    pub(super) fn run_list(&mut self, list: &List) -> Step {
        self.run_items(&list.0)
    }

    fn run_items(&mut self, items: &[Item]) -> Step {
        for (i, item) in items.iter().enumerate() {
            if item.background {
                self.spawn(&item.and_or)?;
                continue;
            }
            match self.run_and_or(&item.and_or)? {
                Flow::Normal(code) => self.status = code,
                Flow::Suspend(mut job) => {
                    if i + 1 < items.len() {
                        job.frames.push(Frame::Items(items[i + 1..].to_vec()));
                    }
                    return Ok(Flow::Suspend(job));
                }
                exit => return Ok(exit),
            }
        }
        Ok(Flow::Normal(self.status))
    }

    fn run_and_or(&mut self, and_or: &AndOr) -> Step {
        match self.run_command(&and_or.first)? {
            Flow::Normal(code) => self.run_chain(code, &and_or.rest),
            Flow::Suspend(mut job) => {
                if !and_or.rest.is_empty() {
                    job.frames.push(Frame::Chain(and_or.rest.clone()));
                }
                Ok(Flow::Suspend(job))
            }
            exit => Ok(exit),
        }
    }

    fn run_chain(&mut self, mut code: u8, rest: &[(Connector, Command)]) -> Step {
        for (i, (connector, command)) in rest.iter().enumerate() {
            self.status = code;
            let runs = match connector {
                Connector::And => code == 0,
                Connector::Or => code != 0,
            };
            if !runs {
                continue;
            }
            match self.run_command(command)? {
                Flow::Normal(c) => code = c,
                Flow::Suspend(mut job) => {
                    if i + 1 < rest.len() {
                        job.frames.push(Frame::Chain(rest[i + 1..].to_vec()));
                    }
                    return Ok(Flow::Suspend(job));
                }
                exit => return Ok(exit),
            }
        }
        self.status = code;
        Ok(Flow::Normal(code))
    }

    fn run_command(&mut self, command: &Command) -> Step {
        if command.redirects.is_empty() {
            return self.run_kind(&command.kind);
        }
        let (stdout, stderr, stdin) = match self.redirections(&command.redirects)? {
            Ok(routes) => routes,
            Err(message) => {
                self.exec.err(message)?;
                return Ok(Flow::Normal(2));
            }
        };
        let Some(stdin) = stdin else {
            return self.redirected(stdout, stderr, |sh| sh.run_kind(&command.kind));
        };
        // `<file` is this command's input; the shell's own is kept for
        // the commands after it.
        let saved_stdin = self.exec.stdin.replace(stdin);
        let flow = self.redirected(stdout, stderr, |sh| sh.run_kind(&command.kind));
        self.exec.stdin = saved_stdin;
        flow
    }

    /// Runs `inner` with its standard output and error going to `stdout`
    /// and `stderr`; a suspended job keeps them.
    fn redirected(
        &mut self,
        stdout: Dest,
        stderr: Dest,
        inner: impl FnOnce(&mut Self) -> Step,
    ) -> Step {
        let out = std::mem::replace(
            &mut self.exec.stdout,
            Sink::new(CAPTURE_BYTES, OutputStream::Stdout),
        );
        let err = std::mem::replace(
            &mut self.exec.stderr,
            Sink::new(CAPTURE_BYTES, OutputStream::Stderr),
        );
        let flow = inner(self);
        let got_out = std::mem::replace(&mut self.exec.stdout, out).buf;
        let got_err = std::mem::replace(&mut self.exec.stderr, err).buf;
        self.deliver(&stdout, &got_out)?;
        self.deliver(&stderr, &got_err)?;
        match flow? {
            Flow::Suspend(mut job) => {
                job.frames.push(Frame::Redirected { stdout, stderr });
                Ok(Flow::Suspend(job))
            }
            other => Ok(other),
        }
    }

    fn deliver(&mut self, dest: &Dest, bytes: &[u8]) -> Result<(), Abort> {
        if bytes.is_empty() {
            return Ok(());
        }
        match dest {
            Dest::Stdout => self.exec.stdout.write(bytes),
            Dest::Stderr => self.exec.stderr.write(bytes),
            Dest::File(physical) => match self.exec.fs.append(physical, bytes) {
                Ok(()) => Ok(()),
                Err(msg) => self.exec.err(format!("sh: write error: {msg}")),
            },
        }
    }

    /// Where standard output and error go and the standard input a `<`
    /// gives (`None`: the shell's own), after `redirects` from left to
    /// right; `Err` is the shell's message for a redirection that cannot
    /// be made.
    #[allow(clippy::type_complexity)] // one internal triple and a message
    fn redirections(
        &mut self,
        redirects: &[Redirect],
    ) -> Result<Result<(Dest, Dest, Option<Vec<u8>>), String>, Abort> {
        let mut fds = [Dest::Stdout, Dest::Stderr];
        let mut stdin = None;
        for r in redirects {
            let target = match &r.op {
                RedirectOp::Duplicate(m) => {
                    fds[usize::from(r.fd) - 1] = fds[usize::from(*m) - 1].clone();
                    continue;
                }
                RedirectOp::Read(w) | RedirectOp::Write(w) | RedirectOp::Append(w) => {
                    match self.expand_one(w)? {
                        Some(path) => path,
                        None => return Ok(Err(UNSUPPORTED.to_string())),
                    }
                }
            };
            let shown = text(&target);
            match &r.op {
                RedirectOp::Read(_) => match self.exec.read(&target) {
                    Ok(Readable::Bytes(b)) => stdin = Some(b),
                    Ok(Readable::Zero) | Ok(Readable::Blocks) => {
                        return Ok(Err(format!("sh: can't read {shown}: an endless input is not supported by the memory oracle")))
                    }
                    Err(msg) => return Ok(Err(format!("sh: can't open {shown}: {msg}"))),
                },
                op => {
                    let truncate = matches!(op, RedirectOp::Write(_));
                    match self.exec.open_output(&target, truncate) {
                        Ok(physical) => fds[usize::from(r.fd) - 1] = Dest::File(physical),
                        Err(msg) => return Ok(Err(format!("sh: can't create {shown}: {msg}"))),
                    }
                }
            }
        }
        let [stdout, stderr] = fds;
        Ok(Ok((stdout, stderr, stdin)))
    }

    fn run_kind(&mut self, kind: &CommandKind) -> Step {
        match kind {
            CommandKind::While { condition, body } => self.run_while(condition, body, false),
            CommandKind::Simple { assignments, words } => self.run_simple(assignments, words),
        }
    }

    /// Loops; `resumed` when an iteration was just finished by a job step.
    fn run_while(&mut self, condition: &List, body: &List, resumed: bool) -> Step {
        let mut last = 0u8;
        let mut iterations = 0u64;
        let mut finished_one = resumed;
        loop {
            if finished_one {
                match &mut self.budget {
                    Some(left) => {
                        *left = left.saturating_sub(1);
                        if *left == 0 {
                            return Ok(Flow::Suspend(Job {
                                frames: vec![Frame::Loop {
                                    condition: condition.clone(),
                                    body: body.clone(),
                                }],
                                cwd: self.exec.cwd.clone(),
                                env: self.exec.env.clone(),
                            }));
                        }
                    }
                    None => {
                        iterations += 1;
                        if iterations > FOREGROUND_ITERATIONS {
                            return Err(self.exec.block());
                        }
                    }
                }
            }
            finished_one = true;
            // A condition is never suspended inside: it runs whole.
            let budget = self.budget.take();
            let tested = self.run_list(condition);
            self.budget = budget;
            match tested? {
                Flow::Normal(0) | Flow::Suspend(_) => {}
                Flow::Normal(_) => {
                    self.status = last;
                    return Ok(Flow::Normal(last));
                }
                exit => return Ok(exit),
            }
            match self.run_list(body)? {
                Flow::Normal(code) => last = code,
                Flow::Suspend(mut job) => {
                    job.frames.push(Frame::Loop {
                        condition: condition.clone(),
                        body: body.clone(),
                    });
                    return Ok(Flow::Suspend(job));
                }
                exit => return Ok(exit),
            }
        }
    }

    /// Runs `inner` as a subshell: its working directory and environment
    /// changes stay inside, and `exit` ends only it.
    fn subshell(&mut self, inner: impl FnOnce(&mut Self) -> Step) -> Step {
        let cwd = self.exec.cwd.clone();
        let env = self.exec.env.clone();
        let flow = inner(self);
        self.exec.cwd = cwd.clone();
        self.exec.env = env.clone();
        match flow? {
            Flow::Exit(code) | Flow::Normal(code) => {
                self.status = code;
                Ok(Flow::Normal(code))
            }
            Flow::Suspend(mut job) => {
                job.frames.push(Frame::Scope { cwd, env });
                Ok(Flow::Suspend(job))
            }
        }
    }

    /// `and_or &`: runs it now as a job with a step of one iteration and
    /// keeps it when it has not finished.
    fn spawn(&mut self, and_or: &AndOr) -> Result<(), Abort> {
        if self.exec.fs.jobs.len() >= MAX_JOBS {
            self.exec
                .err("sh: can't fork: Resource temporarily unavailable".into())?;
            self.status = 2;
            return Ok(());
        }
        let budget = self.budget.replace(1);
        let elapsed = self.exec.elapsed_millis;
        let flow = self.subshell(|sh| sh.run_and_or(and_or));
        // The job's own time, blocking and signals are not the caller's.
        self.exec.elapsed_millis = elapsed;
        self.budget = budget;
        self.status = 0;
        match flow {
            Ok(Flow::Suspend(job)) => self.exec.fs.jobs.push(job),
            Ok(_) | Err(Abort::TimedOut) | Err(Abort::Signalled(_)) => {}
            Err(overflow @ Abort::Overflow(_)) => return Err(overflow),
        }
        Ok(())
    }

    /// Goes on with a suspended job's frames (innermost first).
    fn resume(&mut self, mut frames: Vec<Frame>) -> Step {
        let Some(outer) = frames.pop() else {
            return Ok(Flow::Normal(self.status));
        };
        let inner_pending = !frames.is_empty();
        let suspended = |mut job: Job, frame: Frame| {
            job.frames.push(frame);
            Ok(Flow::Suspend(job))
        };
        match outer {
            Frame::Loop { condition, body } => match self.resume(frames)? {
                Flow::Suspend(job) => suspended(job, Frame::Loop { condition, body }),
                Flow::Exit(code) => Ok(Flow::Exit(code)),
                Flow::Normal(_) => self.run_while(&condition, &body, inner_pending),
            },
            Frame::Items(rest) => match self.resume(frames)? {
                Flow::Suspend(job) => suspended(job, Frame::Items(rest)),
                Flow::Exit(code) => Ok(Flow::Exit(code)),
                Flow::Normal(code) => {
                    self.status = code;
                    self.run_items(&rest)
                }
            },
            Frame::Chain(rest) => match self.resume(frames)? {
                Flow::Suspend(job) => suspended(job, Frame::Chain(rest)),
                Flow::Exit(code) => Ok(Flow::Exit(code)),
                Flow::Normal(code) => self.run_chain(code, &rest),
            },
            Frame::Redirected { stdout, stderr } => {
                self.redirected(stdout, stderr, |sh| sh.resume(frames))
            }
            Frame::Scope { cwd, env } => {
                let flow = self.resume(frames);
                self.exec.cwd = cwd.clone();
                self.exec.env = env.clone();
                match flow? {
                    Flow::Exit(code) | Flow::Normal(code) => Ok(Flow::Normal(code)),
                    Flow::Suspend(job) => suspended(job, Frame::Scope { cwd, env }),
                }
            }
        }
    }

    /// `sh -c SCRIPT` inside the shell: a subshell sharing this shell's
    /// job step.
    pub(super) fn nested(&mut self, script: &str) -> Step {
        let Some(list) = parse::parse(script) else {
            self.exec.err(UNSUPPORTED.into())?;
            return Ok(Flow::Normal(2));
        };
        self.subshell(|sh| sh.run_list(&list))
    }
}

/// Advances every job one step (one loop iteration) on `exec`, whose
/// tree's own job list must be empty; returns the jobs still running
/// first, then any they started (left in the tree's list by `exec`).
pub(crate) fn step_jobs(exec: &mut Exec<'_>, jobs: Vec<Job>) -> Vec<Job> {
    let mut kept = Vec::new();
    for job in jobs {
        exec.cwd = job.cwd;
        exec.env = job.env;
        exec.stdin = None;
        let mut sh = Shell {
            exec,
            status: 0,
            budget: Some(1),
            substituted: None,
        };
        if let Ok(Flow::Suspend(next)) = sh.resume(job.frames) {
            kept.push(next);
        }
        exec.stdout.buf.clear();
        exec.stderr.buf.clear();
    }
    kept.append(&mut exec.fs.jobs);
    kept
}
