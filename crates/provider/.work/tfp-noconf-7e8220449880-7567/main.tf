terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

provider "sortie" {}

data "sortie_runner" "r" {
  id = "acme/none"
}

