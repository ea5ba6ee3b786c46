# Real resources with no provider download (Terraform >= 1.4's built-in terraform_data),
# to try a policy set on: drop a name from `buckets` and the plan deletes a resource.
variable "buckets" {
  type    = list(string)
  default = ["logs", "assets"]
}

variable "public" {
  type    = list(string)
  default = []
}

resource "terraform_data" "bucket" {
  for_each = toset(var.buckets)
  input    = { name = each.key, public = contains(var.public, each.key) }
}

output "buckets" {
  value = [for b in terraform_data.bucket : b.output.name]
}
