//! The store contract against the in-memory store.

use crate::contract;

use sortie_store::MemoryStore;

contract::contract_suite!(MemoryStore::new());
