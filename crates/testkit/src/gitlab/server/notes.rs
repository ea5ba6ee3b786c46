//! Notes on merge requests: listing (newest first by default), creating and editing them,
//! with the body limit GitLab documents (rules::MAX_NOTE_CHARS).

use serde_json::Value;

use super::auth::{self, Need, Who};
use super::json::note_json;
use super::merge_requests::{find, mr_not_found};
use super::paging::paged;
use super::{Params, Reply};
use crate::gitlab::{push_bounded, rules, NoteRecord, World, MAX_HISTORY};

/// The note validation errors GitLab renders (Ruby's `errors.messages`), if any.
fn note_errors(body: &str) -> Option<&'static str> {
    if body.trim().is_empty() {
        Some("{:note=>[\"can't be blank\"]}")
    } else if body.chars().count() > rules::MAX_NOTE_CHARS {
        Some("{:note=>[\"is too long (maximum is 1000000 characters)\"]}")
    } else {
        None
    }
}

pub(crate) fn list(
    world: &World,
    who: &Who,
    id: &str,
    iid: &str,
    path: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    let (project, mr) = find(world, who, id, iid, Need::read())?;
    let sort = params.text("sort").unwrap_or_else(|| "desc".into());
    if sort != "asc" && sort != "desc" {
        return Err(Reply::error(400, "sort does not have a valid value"));
    }
    let mut notes: Vec<&NoteRecord> = project
        .notes
        .iter()
        .filter(|n| n.merge_request_iid == mr.iid)
        .collect();
    if sort == "desc" {
        notes.reverse();
    }
    let items: Vec<Value> = notes
        .into_iter()
        .map(|n| note_json(world, project, n))
        .collect();
    paged(&world.base_url, path, params, items)
}

pub(crate) fn create(
    world: &mut World,
    who: &Who,
    id: &str,
    iid: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    auth::check(who, Need::write())?;
    let body = params.required("body")?;
    let (project, mr) = find(world, who, id, iid, Need::write())?;
    let (project_id, iid) = (project.id, mr.iid);
    if let Some(errors) = note_errors(&body) {
        return Err(Reply::bad_request(&format!("Note {errors}")));
    }
    let note = NoteRecord {
        id: world.id(),
        merge_request_iid: iid,
        body,
        author: who.name().to_string(),
        history: Vec::new(),
    };
    let project = world.projects.get_mut(&project_id).expect("found");
    project.notes.push(note.clone());
    let project = &world.projects[&project_id];
    Ok(Reply::json(201, &note_json(world, project, &note)))
}

pub(crate) fn update(
    world: &mut World,
    who: &Who,
    id: &str,
    iid: &str,
    note_id: &str,
    params: &Params,
) -> Result<Reply, Reply> {
    auth::check(who, Need::write())?;
    let body = params.required("body")?;
    let (project, mr) = find(world, who, id, iid, Need::write())?;
    let (project_id, iid) = (project.id, mr.iid);
    let note_id: u64 = note_id
        .parse()
        .map_err(|_| Reply::error(400, "note_id is invalid"))?;
    let index = project
        .notes
        .iter()
        .position(|n| n.id == note_id && n.merge_request_iid == iid)
        .ok_or_else(mr_not_found)?;
    // Only a note's author may edit it (`authorize! :admin_note`).
    if project.notes[index].author != who.name() {
        return Err(Reply::message(403, "403 Forbidden"));
    }
    if let Some(errors) = note_errors(&body) {
        return Err(Reply::bad_request(&format!("Failed to save note {errors}")));
    }
    let project = world.projects.get_mut(&project_id).expect("found");
    let note = &mut project.notes[index];
    let before = std::mem::replace(&mut note.body, body);
    push_bounded(&mut note.history, before, MAX_HISTORY);
    let note = note.clone();
    let project = &world.projects[&project_id];
    Ok(Reply::json(200, &note_json(world, project, &note)))
}
