"""The world scripts/console_test.py works in, made through the public API of `sortie dev`:
memberships for alice (owner), bob (maintainer) and carol (deployer) on `acme`, a local runner and a rule,
an environment `acme/web/review` that requires approval with four eyes and carries hostile
labels, a quiet `acme/web/dev` beside it, and the Terraform configuration its jobs apply:
`terraform_data` resources whose `local-exec` provisioner prints `tick <epoch ms>` lines
slowly (so the console follows a running log) and then the hostile note, with an output.
"""

import os
import urllib.error

# Hostile data. No double quotes or backslashes inside the three markup strings, so they
# stay literal even where a page shows a value as JSON.
SCRIPT = "<script>window.__pwned=1</script>"
IMG = "<img src=x onerror=window.__pwned=1>"
JS_URL = "javascript:window.__pwned=1"
HOSTILE_TEXTS = [SCRIPT, IMG, JS_URL]
# ...and ANSI: an SGR colour, an OSC 8 hyperlink to a javascript: URL, cursor moves.
ANSI = ("\x1b[31mRED\x1b[0m \x1b]8;;javascript:window.__pwned=2\x1b\\link\x1b]8;;\x1b\\ "
        "\x1b[2K\x1b[1A\x1b[10Cmoved")
HOSTILE_NOTE = f"{SCRIPT} {IMG} {JS_URL} {ANSI}"
# Labels refuse control characters: the markup only.
HOSTILE_LABELS = {"note": SCRIPT, "img": IMG, "link": JS_URL}
# The value of the sensitive output `secret` (generation 1): never shown.
SECRET = "s3cr3t-1"

MAIN_TF = r'''
variable "note" {
  type    = string
  default = ""
}
variable "generation" {
  type    = number
  default = 1
}
variable "ticks" {
  type    = number
  default = 3
}

resource "terraform_data" "note" {
  input = var.note
}

# Replaced when `generation` changes; prints `tick <epoch ms>` lines half a second apart.
resource "terraform_data" "ticker" {
  triggers_replace = [var.generation]
  input            = { generation = var.generation }

  provisioner "local-exec" {
    command     = "i=0; while [ $i -lt ${var.ticks} ]; do echo \"tick $(date +%s%3N)\"; i=$((i+1)); sleep 0.5; done; printf '%s\\n' \"$NOTE\""
    environment = { NOTE = var.note }
  }
}

output "greeting" {
  value = "hello from the console test"
}
output "note" {
  value = var.note
}
output "secret" {
  value     = "s3cr3t-${var.generation}"
  sensitive = true
}
'''


# The roles of the runner `acme/cloud`'s identity block.
IDENTITY_ROLES = ("arn:aws:iam::123456789012:role/acme-read", "arn:aws:iam::123456789012:role/acme-write")


def apply_body(generation, ticks):
    return {"operation": "apply", "files": {"main.tf": MAIN_TF},
            "variables": {"note": HOSTILE_NOTE, "generation": generation, "ticks": ticks}}


def call(api, method, path, body=None):
    """`api.call`, with the API's error body in the failure."""
    try:
        return api.call(method, path, body)
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}") from None


def setup(admin, work):
    for subject, role in (("alice", "owner"), ("bob", "maintainer"), ("carol", "deployer")):
        call(admin, "POST", "/v1/groups/acme/-/memberships",
             {"role": role, "grantee": {"kind": "subject", "subject": subject}})
    call(admin, "POST", "/v1/groups/acme/-/runners/local", {
        "description": "local runner of the console test",
        "runner_configuration": {"type": "local", "timeout_seconds": 300},
        "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")}})
    call(admin, "POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"})
    # A runner whose jobs get their own cloud identity (no rule picks it): the group page
    # shows its roles.
    call(admin, "POST", "/v1/groups/acme/-/runners/cloud", {
        "runner_configuration": {"type": "local"},
        "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")},
        "identity": {"audience": "sts.amazonaws.com", "aws": {
            "plan_role_arn": IDENTITY_ROLES[0], "apply_role_arn": IDENTITY_ROLES[1]}}})
    call(admin, "POST", "/v1/groups/acme/web/-/environments", {
        "name": "review", "env_type": "staging", "labels": HOSTILE_LABELS,
        "approval": "required", "four_eyes": True})
    call(admin, "POST", "/v1/groups/acme/web/-/environments",
         {"name": "dev", "env_type": "development", "labels": {"team": "web"}})
