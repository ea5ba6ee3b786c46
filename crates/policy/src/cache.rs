//! Compiled sets by (group, name, version), bounded like the rule index cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use sortie_core::policy::PolicySet;

use crate::compile::{compile, CompileError, CompiledSet};

/// The most compiled sets kept; past it the cache starts afresh.
const MAX_SETS: usize = 2_000;

type Key = (String, String, String);

/// Compiled sets keyed by group, name and version (the set's ETag): a new version
/// compiles afresh, and at most `MAX_SETS` (2,000) are kept. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct SetCache {
    entries: Arc<Mutex<HashMap<Key, Arc<CompiledSet>>>>,
}

impl SetCache {
    /// The compiled form of `set` at `version` in `group`, compiled on a miss.
    pub fn get_or_compile(
        &self,
        group: &str,
        set: &PolicySet,
        version: &str,
    ) -> Result<Arc<CompiledSet>, CompileError> {
        let key = (group.to_string(), set.name.clone(), version.to_string());
        if let Some(hit) = self.lock().get(&key) {
            return Ok(hit.clone());
        }
        let compiled = Arc::new(compile(set)?);
        let mut entries = self.lock();
        if entries.len() >= MAX_SETS {
            entries.clear();
        }
        // An older version of the same set is dropped.
        entries.retain(|(g, n, _), _| !(g == group && *n == set.name));
        entries.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// How many compiled sets are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Arc<CompiledSet>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}
