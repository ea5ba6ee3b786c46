//! sortie-policy's integration tests: compile, evaluate and the bounds through the public API.

mod common;
mod evaluate;
mod index;
mod stream;
mod vm;
