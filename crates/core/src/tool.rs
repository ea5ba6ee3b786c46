//! The tool a job runs (`terraform` or `opentofu`) and the version it asks for: an exact
//! version (`1.0.3`) or a Terraform-style constraint (`~> 1.0`, `>= 0.12, < 2.0`).
//!
//! A runner or an environment may set `tool` and `version`; the environment's win. The
//! runner picks the matching binary from its image, or fails at once naming the versions
//! it has.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Terraform or OpenTofu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToolName {
    /// HashiCorp Terraform (`terraform`).
    Terraform,
    /// OpenTofu (`tofu`).
    Opentofu,
}

impl ToolName {
    /// The wire name: `terraform` or `opentofu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Terraform => "terraform",
            Self::Opentofu => "opentofu",
        }
    }

    /// The binary's usual name: `terraform` or `tofu`.
    pub fn binary(self) -> &'static str {
        match self {
            Self::Terraform => "terraform",
            Self::Opentofu => "tofu",
        }
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest `version` accepted, in bytes.
pub const VERSION_CONSTRAINT_MAX: usize = 128;

/// A version, `major.minor.patch`.
pub type Version = (u32, u32, u32);

/// One comparison of a constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    /// `~>`: the rightmost given part may grow (`~> 1.2` is `>= 1.2, < 2.0`;
    /// `~> 1.2.3` is `>= 1.2.3, < 1.3.0`).
    Pessimistic,
}

/// One `<op> <version>` term; `parts` is how many parts were written (1 to 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Term {
    op: Op,
    version: Version,
    parts: u8,
}

/// A parsed version constraint: every term must hold (Terraform's syntax: terms separated by
/// commas, each `=`, `!=`, `>`, `>=`, `<`, `<=` or `~>` followed by a version; a bare
/// version means `=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionConstraint {
    terms: Vec<Term>,
    text: String,
}

/// Parses a constraint; the error says what is wrong, for the field's problem.
pub fn parse_constraint(text: &str) -> Result<VersionConstraint, String> {
    if text.len() > VERSION_CONSTRAINT_MAX {
        return Err(format!("must be at most {VERSION_CONSTRAINT_MAX} bytes"));
    }
    if text.trim().is_empty() {
        return Err("must not be empty".into());
    }
    let mut terms = Vec::new();
    for raw in text.split(',') {
        let term = raw.trim();
        let (op, rest) = [
            ("~>", Op::Pessimistic),
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("!=", Op::Ne),
            ("=", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .iter()
        .find_map(|(sym, op)| term.strip_prefix(sym).map(|r| (*op, r)))
        .unwrap_or((Op::Eq, term));
        let rest = rest.trim();
        let rest = rest.strip_prefix('v').unwrap_or(rest);
        let (version, parts) = parse_version_parts(rest).ok_or_else(|| {
            format!(
                "`{}` is not a version constraint: write an exact version such as `1.0.3`, or terms such as `~> 1.0` or `>= 0.12, < 2.0`",
                term.escape_debug()
            )
        })?;
        if op == Op::Pessimistic && parts < 2 {
            return Err(format!(
                "`{}`: `~>` needs at least major.minor, such as `~> 1.0`",
                term.escape_debug()
            ));
        }
        terms.push(Term { op, version, parts });
    }
    Ok(VersionConstraint {
        terms,
        text: text.trim().to_string(),
    })
}

/// `1`, `1.2` or `1.2.3` (no pre-release), with how many parts were written.
fn parse_version_parts(text: &str) -> Option<(Version, u8)> {
    if text.is_empty() {
        return None;
    }
    let mut out = [0u32; 3];
    let mut parts = 0u8;
    for (i, part) in text.split('.').enumerate() {
        if i >= 3 || part.is_empty() || part.len() > 9 || !part.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        out[i] = part.parse().ok()?;
        parts += 1;
    }
    Some(((out[0], out[1], out[2]), parts))
}

/// Parses an exact `major.minor.patch` (a leading `v` allowed).
pub fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    match parse_version_parts(text)? {
        (v, 3) => Some(v),
        _ => None,
    }
}

impl VersionConstraint {
    /// True when `version` satisfies every term.
    pub fn matches(&self, version: Version) -> bool {
        self.terms.iter().all(|t| match t.op {
            Op::Eq => version == t.version,
            Op::Ne => version != t.version,
            Op::Gt => version > t.version,
            Op::Ge => version >= t.version,
            Op::Lt => version < t.version,
            Op::Le => version <= t.version,
            Op::Pessimistic => {
                let (ma, mi, _) = t.version;
                let upper = if t.parts == 2 {
                    (ma + 1, 0, 0)
                } else {
                    (ma, mi + 1, 0)
                };
                version >= t.version && version < upper
            }
        })
    }

    /// The constraint as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The problem with a `tool`/`version` pair's `version`, for validation at the API.
pub fn version_problem(version: &str) -> Option<String> {
    parse_constraint(version).err()
}

/// What a runner reports it ran: the tool and its exact version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolUsed {
    /// `terraform` or `opentofu`.
    pub tool: ToolName,
    /// The exact version, `major.minor.patch`.
    pub version: String,
}

impl ToolUsed {
    /// Checks a runner's report: the version must be exact.
    pub fn check(&self) -> Result<(), String> {
        match parse_version(&self.version) {
            Some(_) => Ok(()),
            None => Err(format!(
                "`{}` is not an exact version (major.minor.patch)",
                self.version.escape_debug()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(c: &str, v: Version) -> bool {
        parse_constraint(c).unwrap().matches(v)
    }

    #[test]
    fn constraints_match_as_terraform_documents_them() {
        assert!(m("1.0.3", (1, 0, 3)));
        assert!(!m("1.0.3", (1, 0, 4)));
        assert!(m("= 1.0.3", (1, 0, 3)));
        assert!(m("~> 1.0", (1, 9, 0)));
        assert!(!m("~> 1.0", (2, 0, 0)));
        assert!(m("~> 1.0.3", (1, 0, 9)));
        assert!(!m("~> 1.0.3", (1, 1, 0)));
        assert!(!m("~> 1.0.3", (1, 0, 2)));
        assert!(m(">= 0.12, < 2.0", (1, 0, 3)));
        assert!(!m(">= 0.12, < 2.0", (0, 11, 11)));
        assert!(m("!= 1.0.3", (0, 11, 11)));
        assert!(m("< 0.12", (0, 11, 11)));
        assert!(m("v1.0.3", (1, 0, 3)));
    }

    #[test]
    fn bad_constraints_say_what_to_write() {
        for bad in [
            "",
            " ",
            "latest",
            "1.0.3-beta",
            "~> 1",
            ">= 1.0,",
            "1.2.3.4",
            "=> 1.0",
        ] {
            assert!(parse_constraint(bad).is_err(), "{bad:?}");
        }
        assert!(parse_constraint(&"1".repeat(200)).is_err());
    }

    #[test]
    fn spacing_and_a_leading_v_do_not_matter() {
        for (tight, spaced) in [
            ("~>1.0", "~> 1.0"),
            (">=0.12,<2.0", ">= 0.12, < 2.0"),
            ("=1.0.3", "= 1.0.3"),
            ("!=v1.0.3", "!= 1.0.3"),
        ] {
            for v in [(0, 11, 11), (0, 12, 0), (1, 0, 3), (1, 9, 9), (2, 0, 0)] {
                assert_eq!(m(tight, v), m(spaced, v), "{tight} vs {spaced} at {v:?}");
            }
        }
        assert_eq!(parse_constraint("  ~> 1.0 ").unwrap().as_str(), "~> 1.0");
    }

    #[test]
    fn pessimistic_constraints_below_1_stay_in_their_minor_or_major() {
        assert!(m("~> 0.12", (0, 15, 5)));
        assert!(!m("~> 0.12", (1, 0, 0)));
        assert!(!m("~> 0.12", (0, 11, 11)));
        assert!(m("~> 0.11.0", (0, 11, 11)));
        assert!(!m("~> 0.11.0", (0, 12, 0)));
        // A partial version in another operator means .0: `> 1.0` is `> 1.0.0`.
        assert!(m("> 1.0", (1, 0, 1)));
        assert!(!m("= 1.0", (1, 0, 3)));
    }

    #[test]
    fn exact_versions_parse_with_three_parts_only() {
        assert_eq!(parse_version("1.0.3"), Some((1, 0, 3)));
        assert_eq!(parse_version(" v0.11.11 "), Some((0, 11, 11)));
        for bad in ["1.0", "1", "1.0.3.4", "1.0.x", "", "v", "1.0.3-rc1"] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
        assert_eq!(version_problem("~> 1.0"), None);
        assert!(version_problem("latest").is_some());
    }

    #[test]
    fn tool_names_and_reports_on_the_wire() {
        assert_eq!(ToolName::Opentofu.as_str(), "opentofu");
        assert_eq!(ToolName::Opentofu.binary(), "tofu");
        assert_eq!(ToolName::Terraform.binary(), "terraform");
        assert_eq!(
            serde_json::to_value(ToolName::Opentofu).unwrap(),
            serde_json::json!("opentofu")
        );
        let used: ToolUsed =
            serde_json::from_str(r#"{"tool":"terraform","version":"1.0.3"}"#).unwrap();
        assert_eq!(used.check(), Ok(()));
        assert!(serde_json::from_str::<ToolUsed>(
            r#"{"tool":"terraform","version":"1.0.3","extra":1}"#
        )
        .is_err());
        assert!(serde_json::from_str::<ToolUsed>(r#"{"tool":"tofu","version":"1.0.3"}"#).is_err());
        let loose = ToolUsed {
            tool: ToolName::Terraform,
            version: "~> 1.0".into(),
        };
        assert!(loose.check().unwrap_err().contains("not an exact version"));
    }
}
