terraform {
  required_providers {
    sortie = { source = "sortie/sortie" }
  }
}

provider "sortie" {}


