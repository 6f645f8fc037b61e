# A golden Slurm image with the node check (ebs_test.go, nodecheck_test.go): the README's
# golden template plus `node_check { }`, through the real amazon-ebs builder and the dlami
# post-processor, whose first-boot verification runs the image's node check too. Differs from a
# user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type = string
}

variable "report_dir" {
  type = string
}

variable "region" {
  type    = string
  default = "us-east-1"
}

data "dlami" "base" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "nodecheck" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p6-b200.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "nodecheck-slurm-${formatdate("YYYYMMDDhhmmss", timestamp())}"
  tags          = { "dlami:source_ami" = data.dlami.base.ami_id }
}

build {
  name    = "nodecheck"
  sources = ["source.amazon-ebs.nodecheck"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "munge"]
      inline       = ["systemctl enable munge slurmd"]
    }

    expect {
      kernel        = "7.0.0-1014-aws"
      nvidia_driver = "595.91.07"
    }

    node_check {
      action   = "block"
      before   = ["slurmd.service"]
      timeout  = "2m"
      textfile = "/var/lib/prometheus/node-exporter/dlami_node_check.prom"
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/verify"
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
  }
}
