//! Setting up and reading back merge requests: opening one, pushing to it, approving,
//! merging or closing it, the states GitLab's mergeability checks read, and its notes.

use super::{
    AccessLevel, ApprovalRecord, DiffChange, GitlabDouble, MergeRequest, MergeRequestSpec,
    NoteRecord, Version,
};

impl GitlabDouble {
    /// Opens a merge request on `project`; its iid (1, 2, ...). The author is registered as
    /// a Developer of the project unless already a member; a fork's project is created.
    pub fn add_merge_request(&self, project: &str, spec: MergeRequestSpec) -> u64 {
        let mut world = self.world();
        world.user_id(&spec.author);
        let id = world.id();
        let version_id = world.id();
        let now = world.now();
        let source_project_id = match &spec.fork {
            Some(fork) => {
                let source = world.project_mut(fork);
                source
                    .branches
                    .insert(spec.source_branch.clone(), spec.head_sha.clone());
                source
                    .members
                    .entry(spec.author.clone())
                    .or_insert(AccessLevel::Owner);
                source.id
            }
            None => world.project_mut(project).id,
        };
        let target = world.project_mut(project);
        target
            .members
            .entry(spec.author.clone())
            .or_insert(AccessLevel::Developer);
        let base = match target.branches.get(&spec.target_branch) {
            Some(sha) => sha.clone(),
            None => {
                let base = format!("{:0>40}", format!("ba5e{id}"));
                target
                    .branches
                    .insert(spec.target_branch.clone(), base.clone());
                base
            }
        };
        if spec.fork.is_none() {
            target
                .branches
                .insert(spec.source_branch.clone(), spec.head_sha.clone());
        }
        let iid = target.merge_requests.keys().max().copied().unwrap_or(0) + 1;
        // Its first diff version, made as it opens.
        let version = Version {
            id: version_id,
            head_sha: spec.head_sha.clone(),
            start_sha: base.clone(),
            base_sha: base,
            created_at: now,
            real_size: spec.changes.len(),
        };
        target.merge_requests.insert(
            iid,
            MergeRequest {
                id,
                iid,
                versions: vec![version],
                spec,
                source_project_id,
                state: "opened".into(),
                approvals: Vec::new(),
                merge_commit_sha: None,
                diverged_commits: 0,
                checking: false,
                discussions_resolved: true,
                created_at: now,
                updated_at: now,
            },
        );
        iid
    }

    /// Pushes `sha` to merge request `iid`'s source branch, optionally with a new list of
    /// changed files: a new diff version, made now on the double's clock
    /// ([`GitlabDouble::advance_clock`]). Approvals are removed when the project resets them
    /// on push (the default); otherwise they stay, each with the time it was given.
    pub fn push(&self, project: &str, iid: u64, sha: &str, changes: Option<Vec<DiffChange>>) {
        let (version_id, now) = {
            let mut world = self.world();
            (world.id(), world.now())
        };
        let (fork, branch) = self.with_project(project, |p| {
            let target_head = p
                .branches
                .get(&p.merge_requests[&iid].spec.target_branch)
                .cloned();
            let reset = p.settings.reset_approvals_on_push;
            let mr = p
                .merge_requests
                .get_mut(&iid)
                .unwrap_or_else(|| panic!("no merge request {project}!{iid} in the double"));
            if let Some(changes) = changes {
                mr.spec.changes = changes;
            }
            let version = Version {
                id: version_id,
                head_sha: sha.to_string(),
                base_sha: mr.base_sha().to_string(),
                start_sha: target_head.unwrap_or_else(|| mr.start_sha().to_string()),
                created_at: now,
                real_size: mr.spec.changes.len(),
            };
            mr.versions.push(version);
            if reset {
                mr.approvals.clear();
            }
            mr.spec.head_sha = sha.to_string();
            mr.updated_at = now;
            if mr.spec.fork.is_none() {
                p.branches
                    .insert(mr.spec.source_branch.clone(), sha.to_string());
                return (None, String::new());
            }
            (mr.spec.fork.clone(), mr.spec.source_branch.clone())
        });
        if let Some(fork) = fork {
            self.world()
                .project_mut(&fork)
                .branches
                .insert(branch, sha.to_string());
        }
    }

    /// Records `username`'s approval of merge request `iid` at `sha`, now on the double's
    /// clock, as the approve endpoint would.
    ///
    /// # Panics
    ///
    /// When `sha` is not the merge request's head (GitLab answers 409) or `username` already
    /// approved (401).
    pub fn approve(&self, project: &str, iid: u64, username: &str, sha: &str) {
        let now = self.world().now();
        self.with_merge_request(project, iid, |mr, _| {
            assert_eq!(mr.head(), sha, "GitLab answers 409: {sha} is not the head");
            assert!(
                !mr.approvals.iter().any(|a| a.username == username),
                "GitLab answers 401: {username} already approved"
            );
            mr.approvals.push(ApprovalRecord {
                username: username.to_string(),
                sha: sha.to_string(),
                approved_at: now,
            });
        });
    }

    /// Sets how many commits the target branch has that merge request `iid` lacks.
    pub fn set_diverged_commits(&self, project: &str, iid: u64, count: u32) {
        self.with_merge_request(project, iid, |mr, _| mr.diverged_commits = count);
    }

    /// Sets whether merge request `iid`'s branches conflict.
    pub fn set_conflicts(&self, project: &str, iid: u64, conflicts: bool) {
        self.with_merge_request(project, iid, |mr, _| mr.spec.conflicts = conflicts);
    }

    /// Sets whether merge request `iid` is a draft.
    pub fn set_draft(&self, project: &str, iid: u64, draft: bool) {
        self.with_merge_request(project, iid, |mr, _| mr.spec.draft = draft);
    }

    /// Sets whether GitLab is still checking merge request `iid`'s mergeability.
    pub fn set_checking(&self, project: &str, iid: u64, checking: bool) {
        self.with_merge_request(project, iid, |mr, _| mr.checking = checking);
    }

    /// Sets whether all of merge request `iid`'s threads are resolved.
    pub fn set_discussions_resolved(&self, project: &str, iid: u64, resolved: bool) {
        self.with_merge_request(project, iid, |mr, _| mr.discussions_resolved = resolved);
    }

    /// Merges merge request `iid` as `merge_sha`, which becomes its target branch's head.
    pub fn merge(&self, project: &str, iid: u64, merge_sha: &str) {
        let branch = self.with_merge_request(project, iid, |mr, _| {
            mr.state = "merged".into();
            mr.merge_commit_sha = Some(merge_sha.to_string());
            mr.spec.target_branch.clone()
        });
        self.set_branch(project, &branch, merge_sha);
    }

    /// Closes merge request `iid` without merging it.
    pub fn close(&self, project: &str, iid: u64) {
        self.with_merge_request(project, iid, |mr, _| mr.state = "closed".into());
    }

    /// Reopens merge request `iid`.
    pub fn reopen(&self, project: &str, iid: u64) {
        self.with_merge_request(project, iid, |mr, _| mr.state = "opened".into());
    }

    /// Adds a note by `username` on merge request `iid` (a person writing in it); its id.
    pub fn add_user_note(&self, project: &str, iid: u64, username: &str, body: &str) -> u64 {
        let mut world = self.world();
        world.user_id(username);
        let id = world.id();
        let id_project = world
            .project_id(project)
            .unwrap_or_else(|| panic!("no project {project} in the double"));
        world
            .projects
            .get_mut(&id_project)
            .expect("found")
            .notes
            .push(NoteRecord {
                id,
                merge_request_iid: iid,
                body: body.to_string(),
                author: username.to_string(),
                history: Vec::new(),
            });
        id
    }

    /// Merge request `iid`'s head now.
    pub fn head_sha(&self, project: &str, iid: u64) -> String {
        self.with_merge_request(project, iid, |mr, _| mr.head().to_string())
    }

    /// Merge request `iid`'s `detailed_merge_status` now.
    pub fn detailed_merge_status(&self, project: &str, iid: u64) -> String {
        self.with_project(project, |p| {
            p.merge_requests[&iid].detailed_merge_status(p).to_string()
        })
    }

    /// Merge request `iid`'s approvals, oldest first.
    pub fn approvals(&self, project: &str, iid: u64) -> Vec<ApprovalRecord> {
        self.with_merge_request(project, iid, |mr, _| mr.approvals.clone())
    }

    /// The notes on merge request `iid`, oldest first, each with its edit history.
    pub fn notes(&self, project: &str, iid: u64) -> Vec<NoteRecord> {
        self.with_project(project, |p| {
            p.notes
                .iter()
                .filter(|n| n.merge_request_iid == iid)
                .cloned()
                .collect()
        })
    }
}
