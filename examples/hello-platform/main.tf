# The demo's platform, managed by the Sortie provider (scripts/demo.sh applies it): a local
# runner keeping state in (local) S3, the rule that picks it for `acme`, and the
# environment examples/hello runs in.
terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

# api_url and token from SORTIE_API_URL and SORTIE_TOKEN (what `sortie dev` prints).
provider "sortie" {}

variable "state_bucket" {
  description = "The S3 bucket for the environments' Terraform state."
  type        = string
}

variable "s3_endpoint" {
  description = "An S3 endpoint override (moto's, in the demo)."
  type        = string
}

resource "sortie_runner" "local" {
  group       = "acme"
  name        = "local"
  description = "local runner for the demo, state in (local) S3"
  local {
    timeout_seconds = 600
  }
  state_s3 {
    bucket     = var.state_bucket
    key_prefix = "sortie/"
    region     = "us-east-1"
    endpoint   = var.s3_endpoint
  }
}

resource "sortie_runner_rule" "default" {
  scope     = "acme"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}

resource "sortie_environment" "hello" {
  group      = "acme/demo"
  name       = "hello"
  env_type   = "development"
  depends_on = [sortie_runner_rule.default]
}
