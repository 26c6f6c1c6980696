//! Environment, time, shell, network and signal applets of the probe
//! vocabulary: `env`, `sleep`, `sh -c` (the shell subset of [`super::shell`]),
//! `nc`, `kill`, `echo`.

use super::*;

impl Exec<'_> {
    pub(super) fn env(&mut self, args: &[String]) -> Result<u8, Abort> {
        let mut env = self.env.clone();
        let mut rest = args;
        if rest.first().is_some_and(|a| a == "-i") {
            env.clear();
            rest = &rest[1..];
        }
        while let Some(a) = rest.first() {
            match a.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    env.insert(k.to_string(), v.to_string());
                    rest = &rest[1..];
                }
                _ => break,
            }
        }
        if rest.is_empty() {
            let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            self.out(text.as_bytes())?;
            return Ok(0);
        }
        let saved = std::mem::replace(&mut self.env, env);
        let code = self.run(rest);
        self.env = saved;
        code
    }

    pub(super) fn sleep(&mut self, args: &[String]) -> Result<u8, Abort> {
        let Some(arg) = args.first() else {
            self.err("sleep: missing operand".into())?;
            return Ok(1);
        };
        let seconds = match arg.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => s,
            _ => {
                self.err(format!("sleep: invalid number '{arg}'"))?;
                return Ok(1);
            }
        };
        let millis = (seconds * 1000.0).round().min(u64::MAX as f64) as u64;
        self.elapsed_millis = self.elapsed_millis.saturating_add(millis);
        if self.elapsed_millis > self.timeout_millis {
            self.elapsed_millis = self.timeout_millis;
            return Err(Abort::TimedOut);
        }
        Ok(0)
    }

    pub(super) fn sh(&mut self, args: &[String]) -> Result<u8, Abort> {
        let script = match args.first().map(String::as_str) {
            Some("-c") => match args.get(1) {
                Some(s) => s.clone(),
                None => {
                    self.err("sh: -c requires an argument".into())?;
                    return Ok(2);
                }
            },
            Some(_) => {
                self.err(format!("sh: can't open '{}'", args[0]))?;
                return Ok(127);
            }
            None => String::from_utf8_lossy(&self.stdin.take().unwrap_or_default()).into_owned(),
        };
        let Some(list) = parse::parse(&script) else {
            self.err(shell::UNSUPPORTED.into())?;
            return Ok(2);
        };
        shell::Shell::new(self).script(&list)
    }

    pub(super) fn nc(&mut self, args: &[String]) -> Result<u8, Abort> {
        let mut ops = vec![];
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "-w" => i += 1,
                a if a.starts_with("-w") => {}
                a if a.starts_with('-') && a.len() > 1 => {}
                a => ops.push(a.to_string()),
            }
            i += 1;
        }
        let (Some(host), Some(port)) = (ops.first(), ops.get(1)) else {
            self.err("nc: usage: nc [-w SEC] HOST PORT".into())?;
            return Ok(1);
        };
        let Ok(port) = port.parse::<u16>() else {
            self.err(format!("nc: bad port '{port}'"))?;
            return Ok(1);
        };
        let loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
        let greeting = if loopback {
            match self.net.loopback.get(&port) {
                Some(g) => Ok(g.clone()),
                None => Err("Connection refused"),
            }
        } else {
            let listener = self.net.external.get(&(host.clone(), port));
            let allowed = match self.net.policy {
                NetworkPolicy::None => self.net.none_leaks,
                NetworkPolicy::Allowlist { destinations } => {
                    self.net.allowlist_ignored
                        || destinations
                            .iter()
                            .any(|d| d.host == *host && d.port == port)
                }
            };
            match (allowed, listener) {
                (false, _) => Err("Network is unreachable"),
                (true, None) => Err("Connection refused"),
                (true, Some(g)) => Ok(g.clone()),
            }
        };
        match greeting {
            Ok(g) => {
                self.stdin = None;
                self.out(&g)?;
                Ok(0)
            }
            Err(msg) => {
                self.err(format!("nc: can't connect to remote host ({host}): {msg}"))?;
                Ok(1)
            }
        }
    }

    /// `kill -SIG 0`: ends the command's whole process group (the only
    /// process the oracle has) by that signal. Other PIDs name no process.
    pub(super) fn kill(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (signal, pids) = match args.first() {
            Some(f) if f.starts_with('-') => match signal_number(f) {
                Some(n) => (n, &args[1..]),
                None => {
                    self.err(format!("kill: bad signal name '{f}'"))?;
                    return Ok(1);
                }
            },
            _ => (15, args),
        };
        if pids.is_empty() {
            self.err("kill: usage: kill [-SIG] PID...".into())?;
            return Ok(1);
        }
        if pids.iter().any(|p| p == "0") {
            return Err(Abort::Signalled(signal));
        }
        for p in pids {
            // Pid 1 is the instance's init, root's as on the Linux
            // provider: the workload may not signal it (decision 017).
            let why = if p == "1" {
                "Operation not permitted"
            } else {
                "No such process"
            };
            self.err(format!("kill: can't kill pid {p}: {why}"))?;
        }
        Ok(1)
    }

    pub(super) fn echo(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (newline, words) = match args.first().map(String::as_str) {
            Some("-n") => (false, &args[1..]),
            _ => (true, args),
        };
        let mut text = words.join(" ");
        if newline {
            text.push('\n');
        }
        self.out(text.as_bytes())?;
        Ok(0)
    }
}
