//! The scopes `checkfu sandbox cleanup --scope` takes: their shape (a
//! usage error otherwise) and whether a conformance scope's run is still
//! alive (then it is not swept: the run removes it itself).

/// Parses a `--scope` value: 1..=64 characters of `[a-z0-9._-]`, the
/// first a letter or a digit, as the Docker and Linux providers name
/// scopes (`checkfu_sandbox_hostfs::records::scope_ok`).
///
/// # Errors
/// A message naming the expected shape and the value given.
pub fn parse_scope(text: &str) -> Result<String, String> {
    if checkfu_sandbox_hostfs::records::scope_ok(text) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "expected 1..=64 characters of [a-z0-9._-], the first a letter or a digit, actual {text:?}"
        ))
    }
}

/// The process a conformance scope `conf-<pid>-<n>` belongs to (the
/// `checkfu sandbox test` that made it), when that process is alive: it
/// exists and is not a zombie. `None` for another scope or a dead run.
///
/// A pid reused by another process reads as alive; the scope is then
/// left until that process ends (the safe side: a live run is never
/// swept).
pub fn live_owner(scope: &str) -> Option<u32> {
    let rest = scope.strip_prefix("conf-")?;
    let (pid, n) = rest.split_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pid: u32 = pid.parse().ok().filter(|p| *p > 0)?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name's closing parenthesis.
    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    (state != 'Z' && state != 'X').then_some(pid)
}

/// The line a live conformance scope is skipped with.
pub fn skipped_line(scope: &str, pid: u32) -> String {
    format!(
        "checkfu: skipped conformance scope {scope}: its `checkfu sandbox test` (pid {pid}) is \
still running and removes the scope itself"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_shaped() {
        for ok in ["cli", "conf-1-0", "a.b_c-d", &"x".repeat(64)] {
            assert_eq!(parse_scope(ok).as_deref(), Ok(ok));
        }
        for bad in ["", "a b", "A", "x/y", &"x".repeat(65)] {
            let e = parse_scope(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn a_live_run_owns_its_scope_and_a_dead_one_does_not() {
        let me = std::process::id();
        assert_eq!(live_owner(&format!("conf-{me}-0")), Some(me));
        assert_eq!(live_owner(&format!("conf-{me}-x")), None);
        assert_eq!(live_owner("cli"), None);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // A zombie (exited, not yet reaped) is no live run.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while live_owner(&format!("conf-{pid}-0")).is_some() {
            assert!(std::time::Instant::now() < deadline, "true never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
        assert_eq!(live_owner(&format!("conf-{pid}-0")), None);
    }
}
