# Golden on golden (ebs_test.go): a team image baked from the platform's golden AMI, found by
# the dlami data source's golden lookup (newest AMI of the family this account owns). The
# team's bake must take its own baseline, never the one the golden bake left in the image.
# Differs from a user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type        = string
  description = "URL of test/cmd/dlami-fake-aws (fake endpoint)."
}

variable "report_dir" {
  type = string
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "golden_family" {
  type    = string
  default = "golden-slurm-p6-b200-48xlarge"
}

data "dlami" "platform" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint

  golden {
    name_prefix = "${var.golden_family}-"
    tags        = { "dlami:family" = var.golden_family }
  }
}

source "amazon-ebs" "team" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.platform.golden_ami_id
  instance_type = "p6-b200.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "team-ml-${formatdate("YYYYMMDDhhmmss", timestamp())}"

  tags = {
    "team:base"        = data.dlami.platform.golden_ami_id
    "dlami:source_ami" = data.dlami.platform.golden_source_ami
  }
}

build {
  name    = "team"
  sources = ["source.amazon-ebs.team"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name         = "team-tools"
      apt_packages = ["jq"]
      inline       = ["jq --version", "test -x /usr/sbin/slurmd && echo GOLDEN-LAYER-PRESENT"]
    }
  }
}
