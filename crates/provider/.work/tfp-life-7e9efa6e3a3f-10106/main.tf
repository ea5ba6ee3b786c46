terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

provider "sortie" {}


resource "sortie_agent_pool" "pool" {
  group = "org7e9efa6e015d10106"
  name  = "pool2"
}

resource "sortie_runner" "local" {
  group       = "org7e9efa6e015d10106"
  name        = "local"
  description = "managed by terraform"
  local {
    timeout_seconds = 900
    env             = { A = "1" }
  }
  state_local {
    directory = "/tmp/sortie-tfp-state"
  }
}

resource "sortie_runner_rule" "default" {
  scope     = "org7e9efa6e015d10106"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}

resource "sortie_environment" "dev" {
  group    = "org7e9efa6e015d10106"
  name     = "dev"
  env_type = "dev"
  labels   = { team = "cards" }
  tags     = ["a", "b"]
  depends_on = [sortie_runner_rule.default]
}

data "sortie_environment" "dev" {
  path = sortie_environment.dev.id
}

output "runner_of_dev" {
  value = data.sortie_environment.dev.runner_id
}

