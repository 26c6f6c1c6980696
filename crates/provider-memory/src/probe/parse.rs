//! The parser of the oracle's shell subset: recursive descent over the
//! script's characters into a [`List`].
//!
//! The subset (decision 037, "oracle shell subset"): lists with `;`,
//! newlines, `&&`, `||` and `&`; `while LIST; do LIST; done`; simple
//! commands with leading `NAME=value` assignments; redirections `>`, `>>`,
//! `<`, `>|` and `>&1`/`>&2` on descriptors 0 to 2; single and double
//! quotes and backslash escapes; `$NAME`, `${NAME}`, `$?` and `$(LIST)`,
//! also inside double quotes; `#` comments. Everything else (pipes,
//! backquotes, `if`/`for`/`case`/`until`, `{ }`, `( )`, globbing, here
//! documents, positional parameters, `$((...))`) is refused: the parser
//! answers `None` and the shell reports `syntax not supported`.

use crate::script::{AndOr, Command, CommandKind, Connector, Item, List, Part, Redirect};
use crate::script::{RedirectOp, Word};

/// Parses a whole script, or `None` when it leaves the subset.
pub(crate) fn parse(script: &str) -> Option<List> {
    let mut p = Parser {
        chars: script.chars().collect(),
        pos: 0,
    };
    let list = p.list(&[], false)?;
    p.linebreaks();
    p.peek().is_none().then_some(list)
}

/// The leading commands of a script that are plain words only (no
/// expansion, no redirection, not in the background), as text; empty
/// when the script leaves the subset.
pub(crate) fn leading_simple_words(script: &str) -> Vec<Vec<String>> {
    let Some(list) = parse(script) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in list.0 {
        let plain = |w: &Word| match w.0.as_slice() {
            [Part::Literal(s)] => Some(s.clone()),
            [] => Some(String::new()),
            _ => None,
        };
        let words = match (&item.and_or.first.kind, item.background) {
            (CommandKind::Simple { assignments, words }, false)
                if assignments.is_empty()
                    && item.and_or.rest.is_empty()
                    && item.and_or.first.redirects.is_empty() =>
            {
                words.iter().map(plain).collect::<Option<Vec<String>>>()
            }
            _ => None,
        };
        match words {
            Some(w) => out.push(w),
            None => break,
        }
    }
    out
}

/// Words the subset does not interpret in command position.
const REFUSED_RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "case", "esac", "until", "in", "break", "continue",
    "function", "select", "return", "do", "done", "{", "}", "!",
];

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

fn delimits(c: Option<char>) -> bool {
    matches!(
        c,
        None | Some(' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')')
    )
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Skips blanks, escaped newlines and a comment up to (not over) its
    /// newline.
    fn blanks(&mut self) {
        loop {
            match (self.peek(), self.peek_at(1)) {
                (Some(' ' | '\t'), _) => self.pos += 1,
                (Some('\\'), Some('\n')) => self.pos += 2,
                (Some('#'), _) => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn linebreaks(&mut self) {
        loop {
            self.blanks();
            if self.peek() == Some('\n') {
                self.pos += 1;
            } else {
                return;
            }
        }
    }

    /// True when the bare word at the cursor is one of `words`, followed
    /// by a delimiter (nothing is consumed).
    fn reserved(&self, words: &[&str]) -> bool {
        let rest: String = self.chars[self.pos..]
            .iter()
            .take_while(|c| !delimits(Some(**c)))
            .collect();
        let next = self.chars.get(self.pos + rest.chars().count()).copied();
        delimits(next) && words.contains(&rest.as_str())
    }

    fn expect_reserved(&mut self, word: &str) -> Option<()> {
        self.linebreaks();
        if !self.reserved(&[word]) {
            return None;
        }
        self.pos += word.chars().count();
        Some(())
    }

    /// Items up to the end, a `)` (inside `$(`) or one of `stops` in
    /// command position.
    fn list(&mut self, stops: &[&str], in_parens: bool) -> Option<List> {
        let mut items = Vec::new();
        loop {
            self.linebreaks();
            match self.peek() {
                None => break,
                Some(')') if in_parens => break,
                _ => {}
            }
            if self.reserved(stops) {
                break;
            }
            let and_or = self.and_or()?;
            self.blanks();
            let (background, separated) = match (self.peek(), self.peek_at(1)) {
                (Some('&'), next) if next != Some('&') => (true, true),
                (Some(';'), next) if next != Some(';') => (false, true),
                (Some('\n'), _) => (false, true),
                _ => (false, false),
            };
            if separated {
                self.pos += 1;
            }
            items.push(Item { and_or, background });
            if !separated {
                self.linebreaks();
                let ends = self.peek().is_none()
                    || (in_parens && self.peek() == Some(')'))
                    || self.reserved(stops);
                if !ends {
                    return None;
                }
                break;
            }
        }
        Some(List(items))
    }

    fn and_or(&mut self) -> Option<AndOr> {
        let first = self.command()?;
        let mut rest = Vec::new();
        loop {
            self.blanks();
            let connector = match (self.peek(), self.peek_at(1)) {
                (Some('&'), Some('&')) => Connector::And,
                (Some('|'), Some('|')) => Connector::Or,
                (Some('|'), _) => return None,
                _ => break,
            };
            self.pos += 2;
            self.linebreaks();
            rest.push((connector, self.command()?));
        }
        Some(AndOr { first, rest })
    }

    fn command(&mut self) -> Option<Command> {
        self.blanks();
        if self.reserved(&["while"]) {
            self.pos += "while".len();
            let condition = self.list(&["do"], false)?;
            self.expect_reserved("do")?;
            let body = self.list(&["done"], false)?;
            self.expect_reserved("done")?;
            let mut redirects = Vec::new();
            loop {
                self.blanks();
                match self.redirect()? {
                    Some(r) => redirects.push(r),
                    None if delimits(self.peek()) && self.peek() != Some('(') => break,
                    None => return None,
                }
            }
            return Some(Command {
                kind: CommandKind::While { condition, body },
                redirects,
            });
        }
        if self.reserved(REFUSED_RESERVED) {
            return None;
        }
        let (mut assignments, mut words, mut redirects) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            self.blanks();
            match self.peek() {
                None | Some(';' | '&' | '|' | '\n' | ')') => break,
                Some('(') => return None,
                _ => {}
            }
            if let Some(r) = self.redirect()? {
                redirects.push(r);
                continue;
            }
            let (word, assignment) = self.word()?;
            match assignment {
                Some(name) if words.is_empty() => {
                    let mut value = word;
                    if let Some(Part::Literal(s)) = value.0.first_mut() {
                        s.drain(..=name.len());
                        if s.is_empty() {
                            value.0.remove(0);
                        }
                    }
                    assignments.push((name, value));
                }
                _ => words.push(word),
            }
        }
        if assignments.is_empty() && words.is_empty() && redirects.is_empty() {
            return None;
        }
        Some(Command {
            kind: CommandKind::Simple { assignments, words },
            redirects,
        })
    }

    /// A redirection at the cursor: `Some(None)` when there is none,
    /// `None` when it leaves the subset.
    fn redirect(&mut self) -> Option<Option<Redirect>> {
        let start = self.pos;
        let digits: String = self.chars[self.pos..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        self.pos += digits.len();
        let op = self.peek();
        if !matches!(op, Some('<' | '>')) {
            self.pos = start;
            return Some(None);
        }
        self.pos += 1;
        let fd = match digits.as_str() {
            "" if op == Some('<') => 0,
            "" => 1,
            d => d.parse::<u8>().ok().filter(|n| *n <= 2)?,
        };
        let kind = match (op, self.peek()) {
            (Some('>'), Some('>')) => {
                self.pos += 1;
                'a'
            }
            (Some('>'), Some('|')) => {
                self.pos += 1;
                'w'
            }
            (Some('>'), Some('&')) => {
                self.pos += 1;
                let target = match self.bump()? {
                    '1' => 1,
                    '2' => 2,
                    _ => return None,
                };
                if !delimits(self.peek()) || fd == 0 {
                    return None;
                }
                return Some(Some(Redirect {
                    fd,
                    op: RedirectOp::Duplicate(target),
                }));
            }
            (Some('>'), _) => 'w',
            (_, Some('<' | '>' | '&')) => return None,
            _ => 'r',
        };
        if (kind == 'r') != (fd == 0) {
            return None;
        }
        self.blanks();
        let (target, _) = self.word()?;
        let op = match kind {
            'a' => RedirectOp::Append(target),
            'w' => RedirectOp::Write(target),
            _ => RedirectOp::Read(target),
        };
        Some(Some(Redirect { fd, op }))
    }

    /// One word, and the name it assigns when it is `NAME=...` with the
    /// name unquoted.
    fn word(&mut self) -> Option<(Word, Option<String>)> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut seen = false;
        let mut plain_prefix = true;
        let mut assignment = None;
        loop {
            let c = self.peek();
            if delimits(c) {
                break;
            }
            seen = true;
            match c? {
                '\'' => {
                    plain_prefix = false;
                    self.pos += 1;
                    loop {
                        match self.bump()? {
                            '\'' => break,
                            x => lit.push(x),
                        }
                    }
                }
                '"' => {
                    plain_prefix = false;
                    self.pos += 1;
                    self.double_quoted(&mut parts, &mut lit)?;
                }
                '\\' => {
                    plain_prefix = false;
                    self.pos += 1;
                    match self.bump()? {
                        '\n' => {}
                        x => lit.push(x),
                    }
                }
                '$' => {
                    plain_prefix = false;
                    self.dollar(&mut parts, &mut lit, false)?;
                }
                '`' | '*' | '?' => return None,
                '~' if lit.is_empty() && parts.is_empty() => return None,
                '=' if plain_prefix && assignment.is_none() && is_name(&lit) => {
                    assignment = Some(lit.clone());
                    plain_prefix = false;
                    self.pos += 1;
                    lit.push('=');
                }
                x => {
                    self.pos += 1;
                    lit.push(x);
                }
            }
        }
        if !seen {
            return None;
        }
        parts.push(Part::Literal(lit));
        // Adjacent texts are one; an empty text stays only as the whole of
        // an empty quoted word (`""` is a field, unlike nothing).
        let mut merged: Vec<Part> = Vec::with_capacity(parts.len());
        for part in parts {
            match (merged.last_mut(), part) {
                (Some(Part::Literal(a)), Part::Literal(b)) => a.push_str(&b),
                (_, part) => merged.push(part),
            }
        }
        if merged.len() > 1 {
            merged.retain(|p| !matches!(p, Part::Literal(s) if s.is_empty()));
        }
        Some((Word(merged), assignment))
    }

    /// The inside of `"..."` after its opening quote, through the closing
    /// one.
    fn double_quoted(&mut self, parts: &mut Vec<Part>, lit: &mut String) -> Option<()> {
        loop {
            match self.peek()? {
                '"' => {
                    self.pos += 1;
                    return Some(());
                }
                '\\' => {
                    self.pos += 1;
                    match self.bump()? {
                        '\n' => {}
                        x @ ('$' | '`' | '"' | '\\') => lit.push(x),
                        x => {
                            lit.push('\\');
                            lit.push(x);
                        }
                    }
                }
                '$' => self.dollar(parts, lit, true)?,
                '`' => return None,
                x => {
                    self.pos += 1;
                    lit.push(x);
                }
            }
        }
    }

    /// `$...` at the cursor.
    fn dollar(&mut self, parts: &mut Vec<Part>, lit: &mut String, quoted: bool) -> Option<()> {
        self.pos += 1;
        let flush = |parts: &mut Vec<Part>, lit: &mut String| {
            if !lit.is_empty() {
                parts.push(Part::Literal(std::mem::take(lit)));
            }
        };
        match self.peek() {
            Some('(') => {
                if self.peek_at(1) == Some('(') {
                    return None;
                }
                self.pos += 1;
                let list = self.list(&[], true)?;
                if self.bump()? != ')' {
                    return None;
                }
                flush(parts, lit);
                parts.push(Part::Substitution { list, quoted });
            }
            Some('{') => {
                self.pos += 1;
                let name: String = self.chars[self.pos..]
                    .iter()
                    .take_while(|c| **c != '}')
                    .collect();
                if !(is_name(&name) || name == "?") {
                    return None;
                }
                self.pos += name.chars().count();
                if self.bump()? != '}' {
                    return None;
                }
                flush(parts, lit);
                parts.push(Part::Parameter { name, quoted });
            }
            Some('?') => {
                self.pos += 1;
                flush(parts, lit);
                parts.push(Part::Parameter {
                    name: "?".into(),
                    quoted,
                });
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let name: String = self.chars[self.pos..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                self.pos += name.len();
                flush(parts, lit);
                parts.push(Part::Parameter { name, quoted });
            }
            // `$1`, `$@`, `$$`, `$!`, ...: outside the subset.
            Some(c) if c.is_ascii_digit() || "@*#$!-".contains(c) => return None,
            // A `$` that starts nothing is itself.
            _ => lit.push('$'),
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Word {
        Word(vec![Part::Literal(s.into())])
    }

    fn simple(words: &[&str]) -> CommandKind {
        CommandKind::Simple {
            assignments: vec![],
            words: words.iter().map(|w| lit(w)).collect(),
        }
    }

    #[test]
    fn lists_chains_and_background_items_parse() {
        let list = parse("a 1; b && c || d & e\n").unwrap();
        assert_eq!(list.0.len(), 3);
        assert_eq!(list.0[0].and_or.first.kind, simple(&["a", "1"]));
        assert!(!list.0[0].background);
        let second = &list.0[1];
        assert!(second.background);
        assert_eq!(second.and_or.rest.len(), 2);
        assert_eq!(second.and_or.rest[0].0, Connector::And);
        assert_eq!(second.and_or.rest[1].0, Connector::Or);
        assert_eq!(list.0[2].and_or.first.kind, simple(&["e"]));
    }

    #[test]
    fn quotes_substitutions_and_parameters_parse() {
        let list = parse(r#"echo bad > "$(printf "bad-\377")" 'a b' "x\"y" $HOME"#).unwrap();
        let cmd = &list.0[0].and_or.first;
        let CommandKind::Simple { words, .. } = &cmd.kind else {
            panic!("{cmd:?}")
        };
        assert_eq!(words[1], lit("bad"));
        assert_eq!(words[2], lit("a b"));
        assert_eq!(words[3], lit("x\"y"));
        assert_eq!(
            words[4],
            Word(vec![Part::Parameter {
                name: "HOME".into(),
                quoted: false
            }])
        );
        let RedirectOp::Write(target) = &cmd.redirects[0].op else {
            panic!("{cmd:?}")
        };
        let Part::Substitution { list, quoted } = &target.0[0] else {
            panic!("{target:?}")
        };
        assert!(quoted);
        assert_eq!(
            list.0[0].and_or.first.kind,
            simple(&["printf", "bad-\\377"])
        );
    }

    #[test]
    fn while_loops_redirections_and_assignments_parse() {
        let list =
            parse("X=1 Y=\"$X\"; while :; do echo x >> log.txt; done </dev/null >/dev/null 2>&1 &")
                .unwrap();
        let CommandKind::Simple { assignments, words } = &list.0[0].and_or.first.kind else {
            panic!()
        };
        assert!(words.is_empty());
        assert_eq!(assignments[0], ("X".into(), lit("1")));
        assert_eq!(assignments[1].0, "Y");
        let item = &list.0[1];
        assert!(item.background);
        let CommandKind::While { condition, body } = &item.and_or.first.kind else {
            panic!()
        };
        assert_eq!(condition.0[0].and_or.first.kind, simple(&[":"]));
        assert_eq!(
            body.0[0].and_or.first.redirects,
            vec![Redirect {
                fd: 1,
                op: RedirectOp::Append(lit("log.txt"))
            }]
        );
        let fds: Vec<(u8, &RedirectOp)> = item
            .and_or
            .first
            .redirects
            .iter()
            .map(|r| (r.fd, &r.op))
            .collect();
        assert_eq!(fds[0], (0, &RedirectOp::Read(lit("/dev/null"))));
        assert_eq!(fds[2], (2, &RedirectOp::Duplicate(1)));
    }

    #[test]
    fn comments_and_reserved_words_as_arguments_parse() {
        let list = parse("echo \"#!/bin/sh\" done # a comment\nexit 3").unwrap();
        assert_eq!(
            list.0[0].and_or.first.kind,
            simple(&["echo", "#!/bin/sh", "done"])
        );
        assert_eq!(list.0[1].and_or.first.kind, simple(&["exit", "3"]));
        assert_eq!(parse("").unwrap(), List(vec![]));
    }

    #[test]
    fn syntax_outside_the_subset_is_refused() {
        for script in [
            "cat x | wc",
            "echo `id`",
            "if true; then :; fi",
            "for i in 1; do :; done",
            "echo *",
            "(cd /)",
            "{ echo; }",
            "echo $1",
            "echo $((1+2))",
            "cat <<EOF",
            "echo 'open",
            "echo \"open",
            "while :; do :",
            "a ;; b",
            "echo hi 3> f",
            "echo $(",
            "echo )",
        ] {
            assert_eq!(parse(script), None, "{script}");
        }
    }

    #[test]
    fn leading_simple_words_stop_at_the_first_other_command() {
        assert_eq!(
            leading_simple_words("trap '' TERM INT; sleep 5; echo $X; true"),
            vec![
                vec![
                    "trap".to_string(),
                    String::new(),
                    "TERM".into(),
                    "INT".into()
                ],
                vec!["sleep".to_string(), "5".into()],
            ]
        );
        assert!(leading_simple_words("a | b").is_empty());
    }
}
