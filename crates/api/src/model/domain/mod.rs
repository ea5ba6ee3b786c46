//! OpenAPI schemas of the `sortie-core` domain types that API bodies embed.
//!
//! `sortie-core` has no HTTP types, so it does not derive `ToSchema`; these
//! types mirror its serde shapes field for field (names, tags, defaults and
//! skipped fields), and the view types in [`super`] point at them with
//! `#[schema(value_type = ...)]`. The API test suite validates every response
//! it receives against the document, so a mirror that drifts from core fails it.

mod records;
mod runner;

pub use records::*;
pub use runner::*;
