//! Word expansion and simple commands of the oracle's shell: parameters,
//! command substitution, field splitting, and the shell's own commands
//! (`exit`, `cd`, `:`, `trap`, nested `sh -c`, `setsid`).
//!
//! Fields are bytes: `$(printf 'bad-\377')` makes a name that is not
//! UTF-8, and redirections and `cd` take such names as they are. An
//! argument that is not UTF-8 handed to any other command is outside the
//! subset (the commands take text).

use crate::fs::{text, FsNode};
use crate::script::{Part, Word};

use super::shell::{Flow, Shell, UNSUPPORTED};
use super::*;

type Step = Result<Flow, Abort>;

/// Splits on the default field separators (space, tab, newline).
fn is_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n')
}

impl Shell<'_, '_> {
    /// The fields of `words`, or `None` when a substitution inside leaves
    /// the subset.
    pub(super) fn expand_words(&mut self, words: &[Word]) -> Result<Option<Vec<Vec<u8>>>, Abort> {
        let mut fields = Vec::new();
        for word in words {
            let mut current: Vec<u8> = Vec::new();
            let mut started = false;
            for part in &word.0 {
                let (value, quoted) = match part {
                    Part::Literal(s) => (s.as_bytes().to_vec(), true),
                    Part::Parameter { name, quoted } => (self.parameter(name), *quoted),
                    Part::Substitution { list, quoted } => match self.substitute(list)? {
                        Some(v) => (v, *quoted),
                        None => return Ok(None),
                    },
                };
                if quoted {
                    current.extend_from_slice(&value);
                    started = true;
                    continue;
                }
                for b in value {
                    if is_separator(b) {
                        if started {
                            fields.push(std::mem::take(&mut current));
                            started = false;
                        }
                    } else {
                        current.push(b);
                        started = true;
                    }
                }
            }
            if started {
                fields.push(current);
            }
        }
        Ok(Some(fields))
    }

    /// One word expanded without field splitting (a redirection's target).
    pub(super) fn expand_one(&mut self, word: &Word) -> Result<Option<Vec<u8>>, Abort> {
        let mut out = Vec::new();
        for part in &word.0 {
            match part {
                Part::Literal(s) => out.extend_from_slice(s.as_bytes()),
                Part::Parameter { name, .. } => out.extend(self.parameter(name)),
                Part::Substitution { list, .. } => match self.substitute(list)? {
                    Some(v) => out.extend(v),
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(out))
    }

    fn parameter(&self, name: &str) -> Vec<u8> {
        if name == "?" {
            return self.status.to_string().into_bytes();
        }
        self.exec
            .env
            .get(name)
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default()
    }

    /// `$(list)`: run in a foreground subshell, its standard output less
    /// trailing newlines; its standard error goes where this shell's does.
    fn substitute(&mut self, list: &crate::script::List) -> Result<Option<Vec<u8>>, Abort> {
        let cwd = self.exec.cwd.clone();
        let env = self.exec.env.clone();
        let limit = self.exec.stdout.limit;
        let out = std::mem::replace(
            &mut self.exec.stdout,
            Sink::new(limit, OutputStream::Stdout),
        );
        let mut inner = Shell::new(self.exec);
        inner.status = self.status;
        let flow = inner.run_list(list);
        let code = match flow {
            Ok(Flow::Normal(c)) | Ok(Flow::Exit(c)) => c,
            Ok(Flow::Suspend(_)) => 0,
            Err(e) => {
                self.exec.stdout = out;
                return Err(e);
            }
        };
        let mut captured = std::mem::replace(&mut self.exec.stdout, out).buf;
        self.exec.cwd = cwd;
        self.exec.env = env;
        self.substituted = Some(code);
        while captured.last() == Some(&b'\n') {
            captured.pop();
        }
        Ok(Some(captured))
    }

    /// A simple command: assignments, then the shell's own commands or
    /// the probe vocabulary.
    pub(super) fn run_simple(&mut self, assignments: &[(String, Word)], words: &[Word]) -> Step {
        self.substituted = None;
        let mut values = Vec::with_capacity(assignments.len());
        for (name, word) in assignments {
            let Some(value) = self.expand_one(word)? else {
                return self.unsupported();
            };
            let Ok(value) = String::from_utf8(value) else {
                return self.unsupported();
            };
            values.push((name.clone(), value));
        }
        let Some(fields) = self.expand_words(words)? else {
            return self.unsupported();
        };
        if fields.is_empty() {
            // Assignments alone: the status of their last substitution.
            let code = self.substituted.unwrap_or(0);
            self.exec.env.extend(values);
            return Ok(Flow::Normal(code));
        }
        if values.is_empty() {
            return self.dispatch(fields);
        }
        let saved = self.exec.env.clone();
        self.exec.env.extend(values);
        let flow = self.dispatch(fields);
        self.exec.env = saved;
        flow
    }

    fn unsupported(&mut self) -> Step {
        self.exec.err(UNSUPPORTED.into())?;
        Ok(Flow::Normal(2))
    }

    /// Runs one command's fields.
    fn dispatch(&mut self, fields: Vec<Vec<u8>>) -> Step {
        match fields[0].as_slice() {
            b"cd" => return self.cd(fields.get(1).cloned()),
            b"exit" => {
                return match fields.get(1) {
                    None => Ok(Flow::Exit(self.status)),
                    Some(n) => match std::str::from_utf8(n)
                        .ok()
                        .and_then(|n| n.parse::<i64>().ok())
                    {
                        Some(v) => Ok(Flow::Exit(v.rem_euclid(256) as u8)),
                        None => {
                            self.exec
                                .err(format!("sh: exit: Illegal number: {}", text(n)))?;
                            Ok(Flow::Exit(2))
                        }
                    },
                }
            }
            _ => {}
        }
        let Ok(argv) = fields
            .into_iter()
            .map(String::from_utf8)
            .collect::<Result<Vec<String>, _>>()
        else {
            self.exec.err(format!(
                "{UNSUPPORTED} (an argument that is not UTF-8 reaches only redirections and cd)"
            ))?;
            return Ok(Flow::Normal(2));
        };
        self.command(&argv)
    }

    /// `argv` after expansion: `:`, `trap`, `sh -c` and `setsid` here,
    /// everything else through [`Exec::run`].
    fn command(&mut self, argv: &[String]) -> Step {
        let name = text(&basename(&argv[0]));
        match name.as_str() {
            ":" => Ok(Flow::Normal(0)),
            "trap" => {
                // `trap '' SIGNAL...` (ignore) is the one form interpreted:
                // nothing here delivers a signal, so it only matters to an
                // openProcess child (see `process::ignored_signals`).
                if argv.len() < 3 || !argv[1].is_empty() {
                    self.exec.err(
                        "sh: trap: only `trap '' SIGNAL...` is supported by the memory oracle"
                            .into(),
                    )?;
                    return Ok(Flow::Normal(2));
                }
                Ok(Flow::Normal(0))
            }
            "sh" if argv.get(1).is_some_and(|a| a == "-c") && argv.len() >= 3 => {
                self.nested(&argv[2])
            }
            "setsid" => {
                let rest: Vec<String> = argv[1..]
                    .iter()
                    .skip_while(|a| a.starts_with('-'))
                    .cloned()
                    .collect();
                if rest.is_empty() {
                    self.exec
                        .err("setsid: usage: setsid [-c] PROG ARGS".into())?;
                    return Ok(Flow::Normal(1));
                }
                self.command(&rest)
            }
            _ => Ok(Flow::Normal(self.exec.run(argv)?)),
        }
    }

    /// `cd [DIR]`: the working directory becomes DIR's physical path.
    fn cd(&mut self, dir: Option<Vec<u8>>) -> Step {
        let dir = dir.unwrap_or_else(|| {
            self.exec
                .env
                .get("HOME")
                .map(|h| h.as_bytes().to_vec())
                .unwrap_or_else(|| b"/".to_vec())
        });
        let shown = text(&dir);
        let message = match self.exec.fs.resolve(&self.exec.cwd, &dir, true) {
            Ok((physical, Some(FsNode::Directory))) => match String::from_utf8(physical) {
                Ok(cwd) => {
                    self.exec.cwd = cwd;
                    return Ok(Flow::Normal(0));
                }
                Err(_) => {
                    return self.unsupported();
                }
            },
            Ok((_, None)) => "No such file or directory",
            Ok((_, Some(_))) => "Not a directory",
            Err(e) => walk_message(e),
        };
        self.exec
            .err(format!("sh: cd: can't cd to {shown}: {message}"))?;
        Ok(Flow::Normal(2))
    }
}
