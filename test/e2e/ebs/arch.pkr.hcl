# Instance types the image cannot run, refused before anything launches (ebs_test.go,
# refused-types): the data source is given the builder's instance_type and reads it with
# ec2:DescribeInstanceTypes. An arm64 DLAMI on an x86_64 type and a fractional-GPU type (g6f)
# fail there, naming the settings to change.

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

variable "architecture" {
  type = string
}

variable "instance_type" {
  type = string
}

data "dlami" "base" {
  region              = var.region
  architecture        = var.architecture
  instance_type       = var.instance_type
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "refused" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "refused-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  sources = ["source.amazon-ebs.refused"]

  provisioner "dlami" {
    report_dir = var.report_dir
    layer {
      name   = "never"
      inline = ["echo LAYER-RAN"]
    }
    expect {
      architecture = data.dlami.base.architecture
    }
  }
}
