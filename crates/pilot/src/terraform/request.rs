//! What a job asks for (a tool, a version constraint) and the pure choice among the
//! binaries there are: the highest matching version.

use std::fmt;
use std::path::PathBuf;

use sortie_core::tool::{parse_constraint, ToolName, Version, VersionConstraint};

use crate::error::PilotError;

/// What a job asks for: a tool, a version constraint, both or neither.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRequest {
    /// The tool; any when `None`.
    pub tool: Option<ToolName>,
    /// The version constraint; any when `None`.
    pub version: Option<VersionConstraint>,
}

impl ToolRequest {
    /// The spec's `tool` and `version`; an unreadable version is the job's error.
    pub fn new(tool: Option<ToolName>, version: Option<&str>) -> Result<Self, PilotError> {
        let version = version
            .map(|text| {
                parse_constraint(text).map_err(|e| {
                    PilotError::Spec(format!(
                        "the job asks for version {:?}, which this runner cannot read: {e}",
                        text
                    ))
                })
            })
            .transpose()?;
        Ok(Self { tool, version })
    }

    /// Neither a tool nor a version: the pilot's default binary.
    pub fn is_any(&self) -> bool {
        self.tool.is_none() && self.version.is_none()
    }

    /// True when `tool` at `version` satisfies the request.
    pub fn accepts(&self, tool: ToolName, version: Version) -> bool {
        self.tool.is_none_or(|t| t == tool)
            && self.version.as_ref().is_none_or(|c| c.matches(version))
    }

    /// What was asked, for a reason: `terraform binary satisfies version "~> 1.5"`.
    fn describe(&self) -> String {
        let tool = match self.tool {
            Some(tool) => tool.as_str(),
            None => "terraform or opentofu",
        };
        match &self.version {
            Some(c) => format!("{tool} binary satisfies version {:?}", c.as_str()),
            None => format!("{tool} binary is available"),
        }
    }
}

/// An identified binary: the tool and the version it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Available {
    /// The file.
    pub path: PathBuf,
    /// Terraform or OpenTofu.
    pub tool: ToolName,
    /// Its version.
    pub version: Version,
}

impl fmt::Display for Available {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor, patch) = self.version;
        write!(f, "{} {major}.{minor}.{patch}", self.tool)
    }
}

/// The binary for a job that asks for neither a tool nor a version: the newest OpenTofu
/// when there is one (OpenTofu is preferred, as `tofu` always was), else the newest
/// Terraform; the first listed among equals. `None` when `available` is empty.
pub fn newest(available: &[Available]) -> Option<&Available> {
    let tool = if available.iter().any(|a| a.tool == ToolName::Opentofu) {
        ToolName::Opentofu
    } else {
        ToolName::Terraform
    };
    let mut best: Option<&Available> = None;
    for a in available.iter().filter(|a| a.tool == tool) {
        if best.is_none_or(|b| a.version > b.version) {
            best = Some(a);
        }
    }
    best
}

/// The binary for `request` among `available`: the highest version of a matching tool (the
/// first listed among equals). The error lists what was asked and every version there is,
/// and ends with `(<searched> searched)`.
pub fn select<'a>(
    request: &ToolRequest,
    available: &'a [Available],
    searched: &str,
) -> Result<&'a Available, String> {
    let mut best: Option<&Available> = None;
    for a in available
        .iter()
        .filter(|a| request.accepts(a.tool, a.version))
    {
        if best.is_none_or(|b| a.version > b.version) {
            best = Some(a);
        }
    }
    best.ok_or_else(|| {
        let mut have: Vec<(ToolName, Version)> =
            available.iter().map(|a| (a.tool, a.version)).collect();
        have.sort();
        have.dedup();
        let have = if have.is_empty() {
            "none".to_string()
        } else {
            have.iter()
                .map(|(tool, (major, minor, patch))| format!("{tool} {major}.{minor}.{patch}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "no {}; this runner has {have} ({searched} searched)",
            request.describe()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn av(tool: ToolName, version: Version, path: &str) -> Available {
        Available {
            path: PathBuf::from(path),
            tool,
            version,
        }
    }

    const SEARCHED: &str = "SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH";

    #[test]
    fn selection_takes_the_highest_matching_version_of_the_tool() {
        use ToolName::{Opentofu, Terraform};
        let have = [
            av(Terraform, (0, 11, 11), "/t/terraform-0.11.11"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
            av(Terraform, (1, 5, 7), "/usr/bin/terraform"),
            av(Opentofu, (1, 8, 5), "/usr/bin/tofu"),
        ];
        let pick = |tool, version: Option<&str>| {
            let request = ToolRequest::new(tool, version).unwrap();
            select(&request, &have, SEARCHED).map(|a| a.path.display().to_string())
        };
        assert_eq!(pick(None, Some("~> 1.0")).unwrap(), "/usr/bin/tofu");
        assert_eq!(
            pick(Some(Terraform), Some("~> 1.0")).unwrap(),
            "/usr/bin/terraform"
        );
        assert_eq!(
            pick(Some(Terraform), Some("~> 1.0.0")).unwrap(),
            "/t/terraform-1.0.3"
        );
        assert_eq!(pick(None, Some("0.11.11")).unwrap(), "/t/terraform-0.11.11");
        assert_eq!(
            pick(Some(Terraform), Some(">= 0.12, < 1.5")).unwrap(),
            "/t/terraform-1.0.3"
        );
        assert_eq!(pick(Some(Terraform), None).unwrap(), "/usr/bin/terraform");
        assert_eq!(pick(Some(Opentofu), None).unwrap(), "/usr/bin/tofu");
    }

    #[test]
    fn among_equal_versions_the_first_candidate_wins() {
        use ToolName::Terraform;
        let have = [
            av(Terraform, (1, 0, 3), "/explicit/terraform"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
        ];
        let request = ToolRequest::new(None, Some("1.0.3")).unwrap();
        assert_eq!(
            select(&request, &have, SEARCHED).unwrap().path,
            PathBuf::from("/explicit/terraform")
        );
    }

    #[test]
    fn no_match_names_what_was_asked_and_every_version_there_is() {
        use ToolName::{Opentofu, Terraform};
        let have = [
            av(Terraform, (1, 0, 3), "/usr/bin/terraform"),
            av(Terraform, (0, 11, 11), "/t/terraform-0.11.11"),
            av(Terraform, (1, 0, 3), "/t/terraform-1.0.3"),
        ];
        let fail = |tool, version: Option<&str>| {
            let request = ToolRequest::new(tool, version).unwrap();
            select(&request, &have, SEARCHED).unwrap_err()
        };
        assert_eq!(
            fail(Some(Terraform), Some("~> 1.5")),
            "no terraform binary satisfies version \"~> 1.5\"; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        assert_eq!(
            fail(None, Some(">= 2.0")),
            "no terraform or opentofu binary satisfies version \">= 2.0\"; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        assert_eq!(
            fail(Some(Opentofu), None),
            "no opentofu binary is available; this runner has terraform 0.11.11, terraform 1.0.3 (SORTIE_TOOLS_DIR=/opt/sortie/tools and PATH searched)"
        );
        let request = ToolRequest::new(Some(Terraform), None).unwrap();
        assert_eq!(
            select(&request, &[], "PATH").unwrap_err(),
            "no terraform binary is available; this runner has none (PATH searched)"
        );
    }

    #[test]
    fn with_nothing_asked_the_newest_tofu_else_the_newest_terraform_runs() {
        use ToolName::{Opentofu, Terraform};
        // Local mode's PATH: 0.11.11 first, 1.0.3 by name, 1.11.4 last.
        let terraform = [
            av(Terraform, (0, 11, 11), "/repo/.tools/bin/terraform"),
            av(Terraform, (1, 0, 3), "/repo/.tools/bin/terraform-1.0.3"),
            av(Terraform, (1, 11, 4), "/usr/local/bin/terraform"),
            av(Terraform, (1, 11, 4), "/opt/terraform-1.11.4"),
        ];
        assert_eq!(
            newest(&terraform).unwrap().path,
            PathBuf::from("/usr/local/bin/terraform")
        );
        let mut both = terraform.to_vec();
        both.push(av(Opentofu, (1, 6, 0), "/usr/bin/tofu-1.6.0"));
        both.push(av(Opentofu, (1, 8, 5), "/usr/bin/tofu"));
        assert_eq!(newest(&both).unwrap().path, PathBuf::from("/usr/bin/tofu"));
        assert_eq!(newest(&[]), None);
    }

    proptest::proptest! {
        /// The default is never older than another binary of its tool, and it is OpenTofu
        /// whenever OpenTofu is there.
        #[test]
        fn the_default_is_the_newest_of_its_tool(
            have in proptest::collection::vec((proptest::bool::ANY, 0u32..3, 0u32..13, 0u32..12), 1..8)
        ) {
            let have: Vec<Available> = have
                .iter()
                .enumerate()
                .map(|(i, (tofu, a, b, c))| {
                    let tool = if *tofu { ToolName::Opentofu } else { ToolName::Terraform };
                    av(tool, (*a, *b, *c), &format!("/bin/{i}"))
                })
                .collect();
            let chosen = newest(&have).unwrap();
            let tofu_there = have.iter().any(|a| a.tool == ToolName::Opentofu);
            proptest::prop_assert_eq!(chosen.tool == ToolName::Opentofu, tofu_there);
            for a in have.iter().filter(|a| a.tool == chosen.tool) {
                proptest::prop_assert!(a.version <= chosen.version);
            }
            let first = have.iter().position(|a| a.tool == chosen.tool && a.version == chosen.version);
            proptest::prop_assert_eq!(first, have.iter().position(|a| std::ptr::eq(a, chosen)));
        }
    }

    #[test]
    fn an_unreadable_version_is_the_jobs_error() {
        let err = ToolRequest::new(None, Some("latest")).unwrap_err();
        assert!(matches!(err, PilotError::Spec(_)), "{err:?}");
        assert!(err.reason().contains("\"latest\""), "{err}");
        assert!(ToolRequest::new(None, None).unwrap().is_any());
        assert!(!ToolRequest::new(Some(ToolName::Terraform), None)
            .unwrap()
            .is_any());
    }
}
