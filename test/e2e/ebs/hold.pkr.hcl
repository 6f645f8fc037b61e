# An amazon-ebs bake that holds its instance (ebs_test.go): Packer is killed while a shell
# provisioner sleeps on the host, so nothing of Packer's cleanup runs; the fake's SIGTERM must
# still leave nothing mounted or running. Differs from a user's template only in the lines
# marked "fake endpoint".

variable "aws_endpoint" {
  type        = string
  description = "URL of test/cmd/dlami-fake-aws (fake endpoint)."
}

variable "sleep_seconds" {
  type    = number
  default = 600
}

data "dlami" "base" {
  region              = "us-east-1"
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "hold" {
  region                     = "us-east-1"
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p5.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "hold-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "hold"
  sources = ["source.amazon-ebs.hold"]

  provisioner "shell" {
    inline = ["echo HOST-REACHED $(cat /sys/devices/virtual/dmi/id/product_name)", "sleep ${var.sleep_seconds}"]
  }
}
