# End-to-end fixture for the dlami data source: the test points it at an
# in-process fake AWS endpoint (test/awsfake) and reads the values back
# through shell-local in packer build.

variable "aws_endpoint" {
  type        = string
  description = "URL of the fake AWS endpoint serving SSM and EC2."
}

variable "architecture" {
  type    = string
  default = "x86_64"
}

variable "instance_type" {
  type        = string
  default     = ""
  description = "The builder's instance type; the refused-types cases set one the image cannot run on."
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "timeout" {
  type        = string
  default     = "20s"
  description = "Per-call deadline; the throttled-ssm scenario shortens it."
}

data "dlami" "base" {
  architecture  = var.architecture
  instance_type = var.instance_type
  region        = var.region
  regions       = ["eu-west-1"]
  # The amazon plugin's access names, as pasted from an amazon-ebs block.
  ssm_endpoint        = var.aws_endpoint
  custom_endpoint_ec2 = var.aws_endpoint
  sts_endpoint        = var.aws_endpoint
  max_retries         = 1
  timeout             = var.timeout

  golden {
    name_prefix = "ml-golden-"
  }
}

locals {
  rebake_needed = data.dlami.base.rebake_needed
}

source "null" "e2e" {
  communicator = "none"
}

build {
  name    = "e2e"
  sources = ["source.null.e2e"]

  provisioner "shell-local" {
    inline = [
      "echo DLAMI_AMI_ID=${data.dlami.base.ami_id}",
      "echo DLAMI_BUILD=${data.dlami.base.build}",
      "echo DLAMI_ROOT_DEVICE=${data.dlami.base.root_device_name}",
      "echo DLAMI_EU_WEST_1=${data.dlami.base.amis["eu-west-1"]}",
      "echo DLAMI_REBAKE_NEEDED=${data.dlami.base.rebake_needed}",
    ]
  }
}

# The rebake probe a CI job runs with `packer build -only='rebake-probe.*'`:
# Packer 1.16's `packer console` never loads plugin binaries, so it cannot
# evaluate data.dlami.* (nor locals built from it); a null build can.
build {
  name    = "rebake-probe"
  sources = ["source.null.e2e"]

  provisioner "shell-local" {
    inline = ["echo REBAKE_NEEDED=${local.rebake_needed} GOLDEN=${data.dlami.base.golden_ami_id}"]
  }
}
