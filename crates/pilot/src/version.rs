//! Which Terraform or OpenTofu the pilot drives, from `<bin> version`.

use std::fmt;

use sortie_core::tool::{ToolName, ToolUsed, Version};

/// Terraform or OpenTofu.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// HashiCorp Terraform.
    Terraform,
    /// OpenTofu.
    OpenTofu,
}

/// A parsed `terraform version` / `tofu version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolVersion {
    /// Terraform or OpenTofu.
    pub flavor: Flavor,
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl ToolVersion {
    /// A Terraform version.
    pub const fn terraform(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            flavor: Flavor::Terraform,
            major,
            minor,
            patch,
        }
    }

    /// An OpenTofu version.
    pub const fn tofu(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            flavor: Flavor::OpenTofu,
            major,
            minor,
            patch,
        }
    }

    /// Parses the first `Terraform vX.Y.Z` or `OpenTofu vX.Y.Z` line of `version` output.
    pub fn parse(output: &str) -> Option<Self> {
        output.lines().find_map(|line| {
            let line = line.trim();
            let (flavor, rest) = if let Some(rest) = line.strip_prefix("Terraform v") {
                (Flavor::Terraform, rest)
            } else if let Some(rest) = line.strip_prefix("OpenTofu v") {
                (Flavor::OpenTofu, rest)
            } else {
                return None;
            };
            let mut parts = rest.split('.').map(|p| {
                let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<u32>().ok()
            });
            let major = parts.next()??;
            let minor = parts.next()??;
            let patch = parts.next().flatten().unwrap_or(0);
            Some(Self {
                flavor,
                major,
                minor,
                patch,
            })
        })
    }

    /// True when this version is `major.minor` or later.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// Terraform 0.11 or earlier: the pre-HCL2 command line and state format.
    pub fn is_legacy(&self) -> bool {
        self.flavor == Flavor::Terraform && !self.at_least(0, 12)
    }

    /// `show -json <plan>` exists (Terraform 0.12+, every OpenTofu).
    pub fn has_show_json(&self) -> bool {
        !self.is_legacy()
    }

    /// The S3 backend of Terraform 1.6+ and OpenTofu: `endpoints = {...}`, `use_path_style`.
    pub fn has_new_s3_backend(&self) -> bool {
        self.flavor == Flavor::OpenTofu || self.at_least(1, 6)
    }

    /// The S3 backend's `use_lockfile` (Terraform 1.10+, OpenTofu 1.10+).
    pub fn has_s3_lockfile(&self) -> bool {
        self.at_least(1, 10)
    }

    /// The `kubernetes` backend (Terraform 0.13+, every OpenTofu).
    pub fn has_kubernetes_backend(&self) -> bool {
        self.flavor == Flavor::OpenTofu || self.at_least(0, 13)
    }

    /// The tool as the job spec and the API name it: `terraform` or `opentofu`.
    pub fn tool_name(&self) -> ToolName {
        match self.flavor {
            Flavor::Terraform => ToolName::Terraform,
            Flavor::OpenTofu => ToolName::Opentofu,
        }
    }

    /// `(major, minor, patch)`.
    pub fn number(&self) -> Version {
        (self.major, self.minor, self.patch)
    }

    /// What the pilot reports to the API (`PUT /v1/jobs/{id}/tool`).
    pub fn used(&self) -> ToolUsed {
        ToolUsed {
            tool: self.tool_name(),
            version: format!("{}.{}.{}", self.major, self.minor, self.patch),
        }
    }

    /// The command name as users know it: `terraform` or `tofu`.
    pub fn tool(&self) -> &'static str {
        match self.flavor {
            Flavor::Terraform => "terraform",
            Flavor::OpenTofu => "tofu",
        }
    }
}

impl fmt::Display for ToolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.flavor {
            Flavor::Terraform => "Terraform",
            Flavor::OpenTofu => "OpenTofu",
        };
        write!(f, "{name} v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_terraform_and_opentofu_version_output() {
        let old = "Terraform v0.11.11\n\nYour version of Terraform is out of date! The latest version\nis 1.9.8.\n";
        assert_eq!(
            ToolVersion::parse(old),
            Some(ToolVersion::terraform(0, 11, 11))
        );
        let new = "Terraform v1.9.8\non linux_amd64\n";
        assert_eq!(
            ToolVersion::parse(new),
            Some(ToolVersion::terraform(1, 9, 8))
        );
        let tofu = "OpenTofu v1.8.5\non linux_arm64\n";
        assert_eq!(ToolVersion::parse(tofu), Some(ToolVersion::tofu(1, 8, 5)));
        let pre = "Terraform v1.10.0-rc1\non linux_amd64\n";
        assert_eq!(
            ToolVersion::parse(pre),
            Some(ToolVersion::terraform(1, 10, 0))
        );
        assert_eq!(ToolVersion::parse("bash: terraform: not found"), None);
    }

    #[test]
    fn capabilities_follow_the_version() {
        let v011 = ToolVersion::terraform(0, 11, 11);
        assert!(v011.is_legacy() && !v011.has_show_json() && !v011.has_kubernetes_backend());
        let v15 = ToolVersion::terraform(1, 5, 7);
        assert!(!v15.is_legacy() && v15.has_show_json() && !v15.has_new_s3_backend());
        assert!(ToolVersion::terraform(1, 6, 0).has_new_s3_backend());
        assert!(!ToolVersion::terraform(1, 9, 8).has_s3_lockfile());
        assert!(ToolVersion::terraform(1, 10, 0).has_s3_lockfile());
        let tofu = ToolVersion::tofu(1, 8, 5);
        assert!(
            tofu.has_new_s3_backend() && !tofu.has_s3_lockfile() && tofu.has_kubernetes_backend()
        );
        assert!(ToolVersion::tofu(1, 10, 1).has_s3_lockfile());
        assert_eq!(tofu.tool(), "tofu");
        assert_eq!(tofu.to_string(), "OpenTofu v1.8.5");
    }

    #[test]
    fn the_report_names_the_tool_as_the_api_does() {
        let used = ToolVersion::tofu(1, 8, 5).used();
        assert_eq!(used.tool, ToolName::Opentofu);
        assert_eq!(used.version, "1.8.5");
        assert_eq!(used.check(), Ok(()));
        let used = ToolVersion::terraform(1, 0, 3).used();
        assert_eq!(
            serde_json::to_value(&used).unwrap(),
            serde_json::json!({"tool": "terraform", "version": "1.0.3"})
        );
        assert_eq!(ToolVersion::terraform(0, 11, 11).number(), (0, 11, 11));
    }
}
