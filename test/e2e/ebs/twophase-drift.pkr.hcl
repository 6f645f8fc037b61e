# A two-phase bake whose first phase drifts (twophase_test.go): the demo's two-phase setup
# (build on a CPU instance, defer_validation; complete_validation on GPU instance types), with
# a careless layer that lifts the holds and dist-upgrades, as drift.pkr.hcl does. The bake must
# fail on the build instance, and no GPU instance may be launched. Differs from a user's
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

source "amazon-ebs" "build" {
  region                     = "us-east-1"
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "c7i.8xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "twophase-drift-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "twophase-drift"
  sources = ["source.amazon-ebs.build"]

  provisioner "dlami" {
    report_dir       = var.report_dir
    defer_validation = true

    layer {
      name = "careless-dist-upgrade"
      inline = [
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }
  }

  post-processor "dlami" {
    region              = "us-east-1"
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    report_dir          = "${var.report_dir}/verify"
    instance_types      = ["p5.48xlarge", "p6-b200.48xlarge"]
    complete_validation = true
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
  }
}
