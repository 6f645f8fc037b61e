# Golden bake through the real amazon-ebs builder (ebs_test.go): docs/aws.md's "The whole
# template" (once the README's "Using it against real AWS") with a Slurm layer, ami_regions
# copies and the dlami post-processor. It
# differs from a user's only in the lines marked "fake endpoint"; credentials come from the
# environment (fake static keys), as a CI job's do. No ssh_host/ssh_port: amazon-ebs connects to the instance's IP on port 22.

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
  default = "p6-b200.48xlarge"
}

variable "ami_regions" {
  type    = list(string)
  default = ["us-west-2"]
}

locals {
  family = "golden-slurm-${replace(var.instance_type, ".", "-")}"
  tags = {
    "dlami:family"     = local.family
    "dlami:source_ami" = data.dlami.base.ami_id
    "dlami:build"      = data.dlami.base.build
  }
}

data "dlami" "base" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "golden" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"

  ami_name    = "${local.family}-${formatdate("YYYYMMDDhhmmss", timestamp())}"
  ami_regions = var.ami_regions

  launch_block_device_mappings {
    device_name           = data.dlami.base.root_device_name
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags          = local.tags
  snapshot_tags = local.tags
}

build {
  name    = "golden"
  sources = ["source.amazon-ebs.golden"]

  provisioner "dlami" {
    report_dir = var.report_dir
    # The last step of the bake: the build's key, host keys, machine id, cloud-init state,
    # logs and history leave the image (check image-hygiene).
    image_hygiene = true

    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "munge"]
      inline       = ["systemctl enable munge", "systemctl disable slurmd"]
    }

    expect {
      kernel        = "7.0.0-1014-aws"
      nvidia_driver = "595.91.07"
    }
  }

  # The registered AMI's first boot, on a fresh instance: tagged dlami:verified = true when healthy.
  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/verify"
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    price_lookup        = true # the fake serves the Price List API (AWS_ENDPOINT_URL_PRICING)
  }
}
