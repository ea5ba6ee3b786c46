// Who may do what on a job, as the API decides it (crates/core: auth `can`, review
// `review_refusal`, policy gate `approval_overrides_policy`), so the page can explain a
// refusal before the viewer tries. The API stays the judge: this only hides buttons.

const ROLES = ["viewer", "deployer", "maintainer", "owner"];

/** Does a membership on `group` cover `target` (the group itself or a descendant)? */
export function groupContains(group, target) {
  const g = String(group ?? "").replace(/^\/+|\/+$/g, "");
  const t = String(target ?? "");
  return g === "" || t === g || t.startsWith(`${g}/`);
}

/** The viewer's highest role on `group` from whoami's memberships, or null. */
export function roleOn(whoami, group) {
  let best = -1;
  for (const m of whoami?.memberships ?? []) {
    if (groupContains(m.group, group)) best = Math.max(best, ROLES.indexOf(m.role));
  }
  return best >= 0 ? ROLES[best] : null;
}

const atLeast = (role, want) => role !== null && ROLES.indexOf(role) >= ROLES.indexOf(want);

/** The group of an environment path (`acme/team/web` -> `acme/team`). */
export function envGroup(path) {
  const p = String(path ?? "");
  const i = p.lastIndexOf("/");
  return i > 0 ? p.slice(0, i) : "";
}

/** True when a policy set at the review level denied the plan: approving needs `manage`. */
export function overridesPolicy(policy) {
  return (policy?.sets ?? []).some(
    (s) => s.enforcement === "review" && ((s.deny ?? []).length > 0 || !!s.error),
  );
}

/**
 * What the viewer may do with `job` (a JobView): `{approve, discard, cancel, why}` where
 * `why` lists, as sentences, why approving is refused. Four eyes is the job's own
 * `review.four_eyes`, the environment's setting taken at submit, which is what the API
 * enforces (a later change of the environment does not apply to the job).
 */
export function jobRights(job, whoami) {
  const group = envGroup(job.environment);
  const role = whoami ? roleOn(whoami, group) : null;
  const deploy = atLeast(role, "deployer");
  const manage = atLeast(role, "maintainer");
  const terminal = ["succeeded", "failed", "canceled", "timed_out", "discarded"].includes(job.state);
  const awaiting = job.state === "awaiting_approval";
  const fourEyes = !!job.review?.four_eyes;
  const own = !!whoami && job.requested_by === whoami.subject;
  const why = [];
  if (awaiting) {
    if (!deploy) {
      why.push(
        `Approving or discarding needs the deployer role on group ${group}; you have ${role ? `the ${role} role` : "no role"} there.`,
      );
    }
    if (fourEyes && own) {
      why.push(
        `This environment requires four eyes: you (${whoami.subject}) requested this job, so another person with the deployer role must approve it.`,
      );
    }
    if (deploy && overridesPolicy(job.policy) && !manage) {
      why.push(
        "A review-level policy set denied this plan: approving it overrides policy, which needs the maintainer role (manage).",
      );
    }
  }
  return {
    approve: awaiting && why.length === 0,
    discard: awaiting && deploy,
    cancel: !terminal && deploy,
    awaiting,
    why,
  };
}
