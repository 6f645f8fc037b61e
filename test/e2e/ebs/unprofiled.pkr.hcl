# A bake on a GPU type without a built-in profile (p7-future.48xlarge: the fake describes it
# with p6-b200.48xlarge's figures, --new-instance-type) through the real amazon-ebs builder (ebs_test.go, unprofiled-type): the provisioner reads EC2's description of
# the build instance's type (ec2:DescribeInstanceTypes; its ec2 block defaults to the builder's
# region) and judges the GPU count, memory, architecture and NVMe from it. With hide_gpu, a
# shell provisioner before the bake takes one of the eight GPUs off the simulated host (its
# knobs): "bus" from nvidia-smi and the PCI bus alike, and reboots so that the host boots with
# seven (nothing on the host says an eighth GPU should be there, only EC2 does); "driver" from
# nvidia-smi only (the PCI bus still has 8: the driver lost one).

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

variable "instance_type" {
  type    = string
  default = "p7-future.48xlarge"
}

variable "hide_gpu" {
  type    = string
  default = ""
}

locals {
  knobs = {
    ""       = "true"
    "driver" = "echo 7 >/etc/dlami-sim/gpu-count"
    "bus"    = "echo 7 >/etc/dlami-sim/gpu-count && echo 7 >/etc/dlami-sim/pci-gpu-count"
  }
}

data "dlami" "base" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "unprofiled" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "unprofiled-${formatdate("YYYYMMDDhhmmss", timestamp())}"
  # The verdict is the test; an image would only join the fleet the later subtests count.
  skip_create_ami = true
}

build {
  sources = ["source.amazon-ebs.unprofiled"]

  # The simulation's device model, not a user's step.
  provisioner "shell" {
    inline = ["sudo sh -c '${local.knobs[var.hide_gpu]}'"]
  }
  provisioner "shell" {
    expect_disconnect = true
    inline            = [var.hide_gpu == "bus" ? "sudo reboot" : "true"]
  }

  provisioner "dlami" {
    pause_before = var.hide_gpu == "bus" ? "10s" : "0s"
    report_dir   = var.report_dir
  }
}
