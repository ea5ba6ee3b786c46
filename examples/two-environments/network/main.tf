# Environment A's own code, run by Sortie: real resources with no provider download
# (Terraform >= 1.4's built-in terraform_data), and outputs, one of them sensitive.
variable "db_password" {
  type      = string
  sensitive = true
  default   = "pw-SECRET-network-7f3a"
}

resource "terraform_data" "vpc" {
  input = "vpc-0a1b2c3d"
}

resource "terraform_data" "db" {
  input = { password = var.db_password }
}

output "vpc_id" {
  value = terraform_data.vpc.output
}

output "subnets" {
  value = ["10.0.1.0/24", "10.0.2.0/24"]
}

output "db_password" {
  value     = terraform_data.db.output.password
  sensitive = true
}
