//! The licence check: every crate the workspace resolves is under a licence compatible with
//! Apache-2.0.
//!
//! `cargo deny check licenses` does this too, but building it costs CI minutes on two cores;
//! `cargo metadata` already carries each package's SPDX expression, so the rule is read from
//! there. An expression is allowed when it can be satisfied with allowed licences only: `A OR B`
//! needs one side, `A AND B` both, `A WITH exception` the licence itself. The old `A/B` spelling
//! means `OR`. A package without an SPDX expression must be listed in [`REVIEWED`].
//!
//! `cargo metadata` lists every package of the lock file, optional dependencies no feature turns
//! on included (ratatui's termwiz backend and its WTFPL `terminfo`, say), so the check keeps only
//! the packages `cargo tree` reaches from the workspace with every workspace feature on, for
//! every target and every dependency kind: what some build of this workspace compiles.

use std::fmt;

use serde::Deserialize;

/// Licences compatible with distributing the whole under Apache-2.0.
pub const ALLOWED: &[&str] = &[
    "Apache-2.0",
    "MIT",
    "MIT-0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "Unlicense",
    "CC0-1.0",
    "BSL-1.0",
    "Unicode-3.0",
    "Unicode-DFS-2016",
    "MPL-2.0",
    "CDLA-Permissive-2.0",
    "OpenSSL",
];

/// Packages without an SPDX `license` field whose licence file was read by a person, by name.
pub const REVIEWED: &[&str] = &[];

/// The part of `cargo metadata --format-version 1` output the check reads.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    packages: Vec<Package>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    version: String,
    license: Option<String>,
}

/// A package whose licence is not allowed, or cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `name@version`.
    pub package: String,
    /// The licence expression, if any.
    pub license: Option<String>,
    /// Why it was refused.
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.license {
            Some(license) => write!(f, "{} ({license}): {}", self.package, self.reason),
            None => write!(f, "{}: {}", self.package, self.reason),
        }
    }
}

impl Metadata {
    /// Keeps only the packages named in `built` (`name vX.Y.Z`, as `cargo tree --format {p}`
    /// prints them).
    pub fn retain_built(&mut self, built: &std::collections::BTreeSet<String>) {
        self.packages
            .retain(|p| built.contains(&format!("{} v{}", p.name, p.version)));
    }
}

/// The packages some build of the workspace at `root` compiles, as `name vX.Y.Z`.
pub fn built_packages(
    cargo: &str,
    root: &std::path::Path,
) -> anyhow::Result<std::collections::BTreeSet<String>> {
    use anyhow::Context;
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--workspace",
            "--all-features",
            "--target",
            "all",
            "--edges",
            "normal,build,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(root)
        .output()
        .context("running cargo tree")?;
    if !out.status.success() {
        anyhow::bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect())
}

/// Every package of `metadata` whose licence is not allowed.
pub fn check(metadata: &Metadata) -> Vec<Refusal> {
    let mut refused = Vec::new();
    for package in &metadata.packages {
        let refuse = |reason: String| Refusal {
            package: format!("{}@{}", package.name, package.version),
            license: package.license.clone(),
            reason,
        };
        match &package.license {
            None if REVIEWED.contains(&package.name.as_str()) => {}
            None => refused.push(refuse(
                "no SPDX licence expression; read its licence file and add it to REVIEWED".into(),
            )),
            Some(expression) => match allowed(expression) {
                Ok(true) => {}
                Ok(false) => refused.push(refuse(format!(
                    "not satisfiable with the allowed licences ({})",
                    ALLOWED.join(", ")
                ))),
                Err(problem) => refused.push(refuse(format!("unreadable expression: {problem}"))),
            },
        }
    }
    refused
}

/// Whether the SPDX `expression` can be satisfied with [`ALLOWED`] licences only.
pub fn allowed(expression: &str) -> Result<bool, String> {
    let tokens = tokenize(expression);
    let mut parser = Parser { tokens, at: 0 };
    let value = parser.or_expression()?;
    match parser.tokens.get(parser.at) {
        None => Ok(value),
        Some(token) => Err(format!("unexpected {token:?}")),
    }
}

fn tokenize(expression: &str) -> Vec<String> {
    let spaced = expression
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    spaced.split_whitespace().map(str::to_owned).collect()
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Option<String> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn or_expression(&mut self) -> Result<bool, String> {
        let mut value = self.and_expression()?;
        while self.peek() == Some("OR") {
            self.at += 1;
            value |= self.and_expression()?;
        }
        Ok(value)
    }

    fn and_expression(&mut self) -> Result<bool, String> {
        let mut value = self.term()?;
        while self.peek() == Some("AND") {
            self.at += 1;
            value &= self.term()?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<bool, String> {
        let value = match self.next().as_deref() {
            Some("(") => {
                let value = self.or_expression()?;
                match self.next().as_deref() {
                    Some(")") => value,
                    other => return Err(format!("expected `)`, found {other:?}")),
                }
            }
            Some(op @ ("AND" | "OR" | "WITH" | ")")) => {
                return Err(format!("expected a licence, found `{op}`"));
            }
            Some(licence) => ALLOWED.contains(&licence.trim_end_matches('+')),
            None => return Err("expected a licence, found the end".into()),
        };
        if self.peek() == Some("WITH") {
            self.at += 1;
            // An exception only grants more; the licence itself decides.
            self.next()
                .ok_or_else(|| "expected an exception after WITH".to_owned())?;
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests;
