//! Row names: every figure's name, the catalogue `--list` prints and the
//! `--check-doc` check of a document against it.

use std::process::ExitCode;

use crate::linux;

/// The providers the lifecycle figures (2 and 7) run against: a row-name
/// tag (`2`, `2p`, ...) and the label in the row name. Another provider's
/// rows are one entry here and one [`DockerBench`](crate::docker::DockerBench)-like subject in its
/// figure function.
pub(crate) const SUBJECTS: [(&str, &str); 2] =
    [("", "docker, no pool"), ("p", "docker, warm pool")];

/// The phases of one lifecycle, in order (figure 2 and 7 phase rows).
pub(crate) const PHASES: [&str; 4] = ["1 provision", "2 activate", "3 execute", "4 release"];

pub(crate) const FIG_1A: &str = "1a execute `true` (memory): validated vs direct";
pub(crate) const FIG_1B: &str = "1b readFile 1 KiB (memory): validated vs direct";
pub(crate) const FIG_1C: &str = "1c provision+activate+destroy (memory): validated vs direct";
pub(crate) const FIG_3: &str = "3 warm execute `true`";
pub(crate) const FIG_4: &str = "4 readFile of a 16 MiB file";
pub(crate) const FIG_5: &str =
    "5 durable round trip (release with snapshot, resume, read one file)";
pub(crate) const FIG_6: &str = "6 cleanup of 1,000 orphans vs of 100 (growth)";
pub(crate) const FIG_8A: &str =
    "8a execute `true` (memory): stdio wire vs in process, both validated";
pub(crate) const FIG_8A_DIFF: &str = "8a · wire overhead per execute (difference of medians)";
pub(crate) const FIG_8B: &str = "8b openProcess stdout 64 MiB (memory): stdio wire vs in process";
pub(crate) const FIG_9_MEMORY: &str = "9 idle pooled container: memory";
pub(crate) const FIG_9_PIDS: &str = "9 · idle pooled container: processes";
pub(crate) const FIG_10: &str =
    "10 provision+activate+release, allowlist (1 destination, rules loaded and read back)";

pub(crate) fn fig_2(tag: &str, label: &str) -> String {
    format!("2{tag} cold start ({label}): provision+activate+execute(`true`)+release")
}

pub(crate) fn fig_2_phase(tag: &str, phase: &str) -> String {
    format!("2{tag} · phase {phase}")
}

pub(crate) fn fig_7(tag: &str, label: &str) -> String {
    format!("7{tag} 16 concurrent lifecycles ({label})")
}

pub(crate) fn fig_7_phase(tag: &str, phase: &str) -> String {
    format!("7{tag} · phase {phase} (each of 16)")
}

/// Every row name a full run produces, in table order.
pub(crate) fn catalogue() -> Vec<String> {
    let mut names: Vec<String> = [FIG_1A, FIG_1B, FIG_1C].map(String::from).to_vec();
    for (tag, label) in SUBJECTS {
        names.push(fig_2(tag, label));
        names.extend(PHASES.iter().map(|p| fig_2_phase(tag, p)));
    }
    names.extend([FIG_3, FIG_4, FIG_5, FIG_6].map(String::from));
    for (tag, label) in SUBJECTS {
        names.push(fig_7(tag, label));
        names.extend(PHASES.iter().map(|p| fig_7_phase(tag, p)));
    }
    names.extend(
        [
            FIG_8A,
            FIG_8A_DIFF,
            FIG_8B,
            FIG_9_MEMORY,
            FIG_9_PIDS,
            FIG_10,
        ]
        .map(String::from),
    );
    names.extend(linux::rows());
    names
}

/// The figure names in the first cell of every row of every `| figure |`
/// table of a markdown document.
pub(crate) fn documented_figures(doc: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_table = false;
    for line in doc.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let first = line
            .trim_matches('|')
            .split('|')
            .next()
            .unwrap_or("")
            .trim();
        if first == "figure" {
            in_table = true;
            continue;
        }
        if in_table && !first.chars().all(|c| c == '-' || c == ':') {
            names.push(first.to_owned());
        }
    }
    names
}

/// `--check-doc`: every figure `path` names must be one the bench produces.
pub(crate) fn check_doc(path: &std::path::Path, known: &[String]) -> ExitCode {
    let doc = match std::fs::read_to_string(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("checkfu-bench: {}: {e}", path.display());
            return ExitCode::from(125);
        }
    };
    let named = documented_figures(&doc);
    let stale: Vec<&String> = named
        .iter()
        .filter(|n| !known.iter().any(|k| k == *n))
        .collect();
    if named.is_empty() {
        eprintln!(
            "checkfu-bench: {} has no `| figure |` table",
            path.display()
        );
        return ExitCode::from(1);
    }
    if stale.is_empty() {
        eprintln!(
            "checkfu-bench: all {} figures {} names are produced by this bench",
            named.len(),
            path.display()
        );
        ExitCode::SUCCESS
    } else {
        for n in &stale {
            eprintln!(
                "checkfu-bench: {} names a figure the bench no longer produces: {n}",
                path.display()
            );
        }
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_names_each_row_once() {
        let names = catalogue();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
    }

    #[test]
    fn documented_figures_are_the_first_cells_of_figure_tables_only() {
        let doc = "text\n\n| figure | ours |\n|---|---|\n| 1a x | 1 µs |\n| 2 · phase 1 provision | 2 ms |\n\n| other | y |\n|---|---|\n| not a figure | z |\n";
        assert_eq!(
            documented_figures(doc),
            vec!["1a x".to_string(), "2 · phase 1 provision".to_string()]
        );
    }

    #[test]
    fn a_stale_figure_fails_the_check_and_a_known_one_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("doc.md");
        let known = catalogue();
        std::fs::write(
            &path,
            format!("| figure | ours |\n|---|---|\n| {} | 1 µs |\n", known[0]),
        )
        .expect("write");
        assert_eq!(check_doc(&path, &known), ExitCode::SUCCESS);
        std::fs::write(
            &path,
            "| figure | ours |\n|---|---|\n| 2 cold start: gone | 1 µs |\n",
        )
        .expect("write");
        assert_eq!(check_doc(&path, &known), ExitCode::from(1));
    }
}
