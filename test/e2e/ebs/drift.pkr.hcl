# Drift under amazon-ebs (ebs_test.go): a careless layer lifts every hold and dist-upgrades,
# as test/e2e/scenarios/unhold-dist-upgrade does through the null builder. The bake must fail
# with the same verdict, register no AMI and leave nothing running. Differs from a user's
# template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type        = string
  description = "URL of test/cmd/dlami-fake-aws (fake endpoint)."
}

variable "report_dir" {
  type = string
}

data "dlami" "base" {
  region              = "us-east-1"
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "careless" {
  region                     = "us-east-1"
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p6-b200.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "careless-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "drift"
  sources = ["source.amazon-ebs.careless"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "careless-dist-upgrade"
      inline = [
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }

    layer {
      name   = "never-runs"
      inline = ["echo \"LAYER-$(echo AFTER)-DRIFT-RAN\""]
    }
  }
}
