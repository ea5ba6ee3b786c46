# The platform: a local runner (state in a local directory), the rule that picks it for
# everything under `acme`, and the two environments.
terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

# api_url and token from SORTIE_API_URL and SORTIE_TOKEN.
provider "sortie" {}

variable "state_directory" {
  description = "Where the local runner keeps Terraform state."
  type        = string
  default     = "/tmp/sortie-two-environments-state"
}

resource "sortie_runner" "local" {
  group        = "acme"
  name         = "local"
  tool_version = ">= 1.5"
  local {
    timeout_seconds = 600
  }
  state_local {
    directory = var.state_directory
  }
}

resource "sortie_runner_rule" "default" {
  scope     = "acme"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}

resource "sortie_environment" "network" {
  group      = "acme"
  name       = "network"
  env_type   = "production"
  labels     = { layer = "network" }
  depends_on = [sortie_runner_rule.default]
}

resource "sortie_environment" "app" {
  group      = "acme"
  name       = "app"
  env_type   = "production"
  labels     = { layer = "app" }
  depends_on = [sortie_runner_rule.default]
}
