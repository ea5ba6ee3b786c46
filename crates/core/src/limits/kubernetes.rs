//! EKS cluster names and Kubernetes names, labels and annotations.

use super::*;

// ---------------------------------------------------------------------------------------
// EKS and Kubernetes
// ---------------------------------------------------------------------------------------

/// Longest EKS cluster name: 100 characters of `[0-9A-Za-z][A-Za-z0-9\-_]*`.
///
/// Source: <https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html>
/// (`name`, length 1–100, pattern `^[0-9A-Za-z][A-Za-z0-9\-_]*`).
pub const EKS_CLUSTER_NAME_MAX: usize = 100;

/// True for an EKS cluster name (see [`EKS_CLUSTER_NAME_MAX`]).
pub fn is_eks_cluster_name(s: &str) -> bool {
    (1..=EKS_CLUSTER_NAME_MAX).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(|c| is_word(c) || c == '-')
}

/// Longest Kubernetes DNS-1123 label: 63 characters.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names>
/// (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63). Namespaces are DNS labels
/// (<https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/>).
pub const DNS_LABEL_MAX: usize = 63;
/// Longest Kubernetes DNS-1123 subdomain: 253 characters, dot-separated DNS labels.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names>.
/// Service account names are DNS subdomains.
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// True for a DNS-1123 label (a namespace name).
pub fn is_dns_label(s: &str) -> bool {
    (1..=DNS_LABEL_MAX).contains(&s.len())
        && s.chars().all(|c| is_lower_alnum(c) || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// True for a DNS-1123 subdomain (a service account name, a label key prefix).
pub fn is_dns_subdomain(s: &str) -> bool {
    (1..=DNS_SUBDOMAIN_MAX).contains(&s.len())
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| is_lower_alnum(c) || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Longest name part of a Kubernetes label key (and of any qualified name): 63 characters
/// of `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
///
/// Source: <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set>.
pub const LABEL_NAME_MAX: usize = 63;
/// Longest Kubernetes label value: 63 characters, empty or the same pattern as a name
/// (source as [`LABEL_NAME_MAX`]).
pub const LABEL_VALUE_MAX: usize = 63;

fn is_label_name(s: &str) -> bool {
    (1..=LABEL_NAME_MAX).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// True for a Kubernetes qualified name: a label key, an annotation key, a toleration key
/// or a resource name. An optional DNS subdomain prefix (≤ 253) and `/`, then a name (≤ 63).
pub fn is_label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(s),
    }
}

/// True for a Kubernetes label value: empty, or a name of at most 63 characters.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

/// Largest total size of a pod's annotations, keys and values: 256 KiB.
///
/// Source: <https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go>
/// (`TotalAnnotationSizeLimitB = 256 * (1 << 10)`).
pub const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;
