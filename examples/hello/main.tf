# The smallest Terraform configuration Sortie can run: no providers, no
# resources, nothing to download. It works unchanged on Terraform 0.11 and on
# current releases, which makes it the fixture for end-to-end tests.

variable "greeting" {
  description = "Who or what to greet."
  default     = "hello from sortie"
}

locals {
  message = "${var.greeting}!"
}

output "message" {
  value = "${local.message}"
}
