// Tests of the environment page's pull-request card, its pure parts (pages/env_vcs.js): the
// words for a binding, the form <-> JSON, the API's problems by input.
// `node --test crates/console/js-tests/`; the card itself is tested in Chromium by
// scripts/console_test.py (scripts/console_vcs.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  vcsWords, vcsForm, vcsBody, problemsByField, effectiveGlobs, repositoryHref, requirementWords, globEscape,
} from "../assets/pages/env_vcs.js";

const byKey = (rows) => Object.fromEntries(rows.map((r) => [r.key, r]));

test("vcs words: a binding with the defaults", () => {
  const w = byKey(vcsWords({ repository: "acme/infra" }));
  assert.equal(w.repository.text, "acme/infra");
  assert.equal(w.repository.href, "https://github.com/acme/infra");
  assert.equal(w.directory.text, "the repository root");
  assert.equal(w.branch.text, "main");
  assert.deepEqual(w.when_modified.globs, ["**"]);
  assert.equal(w.when_modified.byDefault, true);
  assert.equal(w.apply.text, "after merge");
  assert.equal(w.requirements.text, "nothing beyond a plan of the head commit and green checks");
  assert.deepEqual(vcsWords(null), []);
  assert.deepEqual(vcsWords(undefined), []);
});

test("vcs words: every setting said", () => {
  const w = byKey(vcsWords({
    repository: "acme/infra", directory: "envs/prod", branch: "release",
    apply: "before_merge", requirements: { approved: 1, mergeable: true, undiverged: true },
  }));
  assert.equal(w.directory.text, "envs/prod");
  assert.equal(w.branch.text, "release");
  assert.deepEqual(w.when_modified.globs, ["envs/prod/**"]);
  assert.match(w.when_modified.text, /envs\/prod\/\*\* \(the default/);
  assert.equal(w.apply.text, "with /sortie apply before merge");
  assert.equal(w.requirements.text, "1 approval by someone other than the author, mergeable, not behind its base branch");
  const given = byKey(vcsWords({ repository: "a/b", directory: "x", when_modified: ["x/**", "modules/**"], apply: "none" }));
  assert.deepEqual(given.when_modified.globs, ["x/**", "modules/**"]);
  assert.equal(given.when_modified.byDefault, false);
  assert.equal(given.apply.text, "never: plans only");
  assert.deepEqual(requirementWords({ approved: 3 }), ["3 approvals by people other than the author"]);
  assert.deepEqual(requirementWords({}), []);
});

test("vcs words: the default glob escapes the directory as the API does; control characters made visible", () => {
  assert.equal(globEscape("a[1]*?"), "a[[]1[]][*][?]");
  assert.deepEqual(effectiveGlobs({ directory: "env[prod]/" }).globs, ["env[[]prod[]]/**"]);
  const w = byKey(vcsWords({ repository: "a/b", directory: "x\x1b[31m" }));
  assert.ok(!w.directory.text.includes("\x1b"), w.directory.text);
  assert.ok(w.directory.text.includes("\u241b"), w.directory.text);
});

test("the repository link: GitHub's owner/name only, never another scheme or host", () => {
  assert.equal(repositoryHref("acme/infra.tf_x-y"), "https://github.com/acme/infra.tf_x-y");
  for (const bad of ["not a repo", "javascript:alert(1)", "acme/a/b", "-acme/x", "acme/..", "a/<img>", "", null, "//evil.example/x"]) {
    assert.equal(repositoryHref(bad), null, String(bad));
  }
  const hostile = byKey(vcsWords({ repository: "<img src=x onerror=alert(1)>" }));
  assert.equal(hostile.repository.href, null);
  assert.equal(hostile.repository.text, "<img src=x onerror=alert(1)>");
});

test("form -> JSON: trimmed, empty directory/branch/globs/approvals left out, globs one per line", () => {
  assert.deepEqual(vcsBody({
    repository: "  acme/infra ", directory: "  ", branch: "", when_modified: "",
    apply: "after_merge", approved: "", mergeable: false, undiverged: false,
  }), { provider: "github", repository: "acme/infra", apply: "after_merge" });
  assert.deepEqual(vcsBody({
    repository: "acme/infra", directory: " envs/prod ", branch: " release ",
    when_modified: "  envs/prod/**  \r\n\n modules/**\n   \n", apply: "before_merge",
    approved: " 2 ", mergeable: true, undiverged: true,
  }), {
    provider: "github", repository: "acme/infra", directory: "envs/prod", branch: "release",
    when_modified: ["envs/prod/**", "modules/**"], apply: "before_merge",
    requirements: { approved: 2, mergeable: true, undiverged: true },
  });
  // Not a whole number: sent as typed, for the API to name `vcs.requirements.approved`.
  assert.deepEqual(vcsBody({ repository: "a/b", approved: "1.5" }).requirements, { approved: "1.5" });
  assert.equal(vcsBody({ repository: "a/b" }).apply, "after_merge");
});

test("JSON -> form -> JSON keeps a binding", () => {
  const b = {
    provider: "github", repository: "acme/infra", directory: "envs/prod", branch: "release", when_modified: ["a/**", "b/*.tf"],
    apply: "none", requirements: { approved: 1, undiverged: true },
  };
  const f = vcsForm(b);
  assert.equal(f.when_modified, "a/**\nb/*.tf");
  assert.equal(f.approved, "1");
  assert.equal(f.mergeable, false);
  assert.deepEqual(vcsBody(f), b);
  assert.deepEqual(vcsForm(null), {
    provider: "github", repository: "", directory: "", branch: "main", when_modified: "", apply: "after_merge",
    approved: "", mergeable: false, undiverged: false,
  });
});

test("the API's problems go to the input they name; the rest to the banner", () => {
  const p = problemsByField([
    { field: "vcs.repository", problem: "must be `owner/name`, such as `acme/infrastructure`" },
    { field: "vcs.when_modified[2]", problem: "must not be empty" },
    { field: "vcs.requirements.approved", problem: "must be between 1 and 10 approvals" },
    { path: "vcs.branch", problem: "must not contain `..`" },
    { field: "vcs.provider", problem: "must be one of github" },
    { field: "vcs.requirements", problem: "must be an object" },
    { field: "If-Match", problem: "must be an ETag" },
  ]);
  assert.deepEqual(p.repository, ["must be `owner/name`, such as `acme/infrastructure`"]);
  assert.deepEqual(p.when_modified, ["must not be empty"]);
  assert.deepEqual(p.approved, ["must be between 1 and 10 approvals"]);
  assert.deepEqual(p.branch, ["must not contain `..`"]);
  assert.deepEqual(p.provider, ["must be one of github"]);
  assert.equal(p._.length, 2);
  assert.deepEqual(problemsByField(undefined), {});
});

test("a GitLab binding keeps its host through the form, says it, and links nowhere on GitHub", () => {
  const b = {
    provider: "gitlab", repository: "acme/platform/infra", directory: "web/dev", branch: "main",
    apply: "before_merge", requirements: { approved: 1 },
  };
  // Edited in the console and saved: still GitLab's (the API's default host is GitHub).
  assert.deepEqual(vcsBody(vcsForm(b)), b);
  const w = byKey(vcsWords(b));
  assert.equal(w.provider.text, "GitLab");
  assert.equal(w.repository.href, null, "a GitLab project is not a github.com link");
  const two = byKey(vcsWords({ provider: "gitlab", repository: "acme/infra" }));
  assert.equal(two.repository.href, null);
  const gh = byKey(vcsWords({ repository: "acme/infra" }));
  assert.equal(gh.provider.text, "GitHub");
  assert.equal(gh.repository.href, "https://github.com/acme/infra");
});
