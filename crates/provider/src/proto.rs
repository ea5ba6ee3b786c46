//! The protocol's generated code (regenerate with `scripts/provider-proto.sh`).

#![allow(missing_docs, dead_code, clippy::all, clippy::pedantic)]

/// `tfplugin6`: the Terraform plugin protocol 6.6.
pub mod tfplugin6 {
    include!("proto/tfplugin6.rs");
}

/// `plugin`: go-plugin's controller.
pub mod plugin {
    include!("proto/plugin.rs");
}
