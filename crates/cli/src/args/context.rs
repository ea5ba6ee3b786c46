//! `sortie context ...`: the named contexts (API URL and token source) of the config file.

use clap::Subcommand;

/// `context ...`.
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Make a context the current one.
    Use {
        /// The context's name.
        name: String,
    },
    /// Create or change a context.
    Set {
        /// The context's name.
        name: String,
        /// The API's base URL.
        #[arg(long)]
        api_url: Option<String>,
        /// A command whose standard output is the token (an OIDC helper).
        #[arg(long)]
        token_command: Option<String>,
        /// A token to store in the file (prefer `--token-command`).
        #[arg(long)]
        token: Option<String>,
    },
    /// List the contexts, marking the current one.
    List,
    /// Print the current context's name.
    Current,
}
