//! The memory oracle's shell subset as data: the syntax tree a `sh -c`
//! script parses into and the background jobs it leaves running (data
//! only; the parser and the interpreter are in `probe`).
//!
//! Background jobs are kept with the tree they write into ([`crate::fs::Fs`]):
//! a job is the stack of [`Frame`]s the interpreter unwound through when the
//! job ran out of its step (one loop iteration), innermost first, plus the
//! working directory and environment it had there. Resuming runs the frames
//! from the innermost outwards, exactly as the interrupted command would
//! have gone on (decision 037, "oracle shell subset").

use std::collections::BTreeMap;

use crate::fs::Name;

/// A sequence of items run in order (`a; b & c`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct List(pub(crate) Vec<Item>);

/// One item of a [`List`]: an and-or chain, run in the background when it
/// ended with `&`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) and_or: AndOr,
    pub(crate) background: bool,
}

/// `first && second || third`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AndOr {
    pub(crate) first: Command,
    pub(crate) rest: Vec<(Connector, Command)>,
}

/// How a command of an [`AndOr`] joins the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connector {
    /// `&&`: runs when the status so far is 0.
    And,
    /// `||`: runs when the status so far is not 0.
    Or,
}

/// A command and the redirections applied to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) kind: CommandKind,
    pub(crate) redirects: Vec<Redirect>,
}

/// What a [`Command`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandKind {
    /// `NAME=value... word...`: assignments alone set variables; with words
    /// they hold for that command only.
    Simple {
        assignments: Vec<(String, Word)>,
        words: Vec<Word>,
    },
    /// `while LIST; do LIST; done`.
    While { condition: List, body: List },
}

/// `[fd]>word`, `[fd]>>word`, `[fd]<word` or `[fd]>&m` for descriptors 0 to 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub(crate) fd: u8,
    pub(crate) op: RedirectOp,
}

/// The operation of a [`Redirect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RedirectOp {
    /// `<word`: the file is the command's standard input.
    Read(Word),
    /// `>word`: created or truncated, then written.
    Write(Word),
    /// `>>word`: created when missing, appended to.
    Append(Word),
    /// `>&m`: a copy of descriptor `m` (1 or 2).
    Duplicate(u8),
}

/// A word before expansion: the concatenation of its parts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Word(pub(crate) Vec<Part>);

/// One part of a [`Word`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Text taken as is (quoted or not: the subset has no globbing).
    Literal(String),
    /// `$NAME`, `${NAME}` or `$?`; split into fields unless quoted.
    Parameter { name: String, quoted: bool },
    /// `$(LIST)`: its standard output less trailing newlines; split into
    /// fields unless quoted.
    Substitution { list: List, quoted: bool },
}

/// Where a redirected output stream goes while a job is suspended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dest {
    /// The enclosing standard output.
    Stdout,
    /// The enclosing standard error.
    Stderr,
    /// Appended to the file at this physical path (a resumed `>` appends:
    /// its truncation happened when the redirection was made).
    File(Name),
}

/// One level the interpreter unwound through when a job was suspended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A `while` loop: it goes on looping once the frames inside it finish.
    Loop { condition: List, body: List },
    /// The items of a list after the one suspended.
    Items(Vec<Item>),
    /// The rest of an and-or chain after the command suspended.
    Chain(Vec<(Connector, Command)>),
    /// Redirected standard output and error of the frames inside.
    Redirected { stdout: Dest, stderr: Dest },
    /// A subshell (`sh -c`, a background job): the working directory and
    /// environment of the level outside, restored when the frames inside
    /// finish.
    Scope {
        cwd: String,
        env: BTreeMap<String, String>,
    },
}

/// A background job that outlived its step: what it goes on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Job {
    /// Innermost first.
    pub(crate) frames: Vec<Frame>,
    /// The working directory where it stopped.
    pub(crate) cwd: String,
    /// The environment where it stopped.
    pub(crate) env: BTreeMap<String, String>,
}
