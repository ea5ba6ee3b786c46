# Environment B's code: it reads environment A's latest outputs.
terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

provider "sortie" {}

data "sortie_environment_outputs" "network" {
  path = "acme/network"
}

output "vpc_id" {
  value = data.sortie_environment_outputs.network.values["vpc_id"]
}

# Not a string in A: JSON here.
output "subnets" {
  value = jsondecode(data.sortie_environment_outputs.network.values["subnets"])
}

# A's sensitive outputs: their names only; the API never shows the values.
output "network_secrets" {
  value = data.sortie_environment_outputs.network.sensitive_names
}
