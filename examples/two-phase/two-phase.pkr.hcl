# Bake where capacity is, verify where it counts: a golden Slurm AMI for p5 baked in two
# phases. amazon-ebs bakes on a CPU instance (c7i.8xlarge, started from the same DLAMI: the same
# kernel, driver packages and holds, no GPU): the dlami provisioner guards the holds, runs the
# layers with a drift check after each, writes the bill of materials and defers the host suite
# and the NCCL test (defer_validation). The dlami post-processor then launches the registered
# AMI on the first p5 type that has capacity (or in your Capacity Block / ODCR), checks its
# first boot, runs the host suite and the NCCL test there (complete_validation), with every EFA
# interface of the type attached (the build instance has none: amazon-ebs cannot attach one),
# and tags it
# dlami:verified = true and dlami:verified_instance_type. GPU time is spent on that instance
# only; a build that drifts fails on the CPU instance and launches no GPU instance.
#
# packer init . && packer build .
#
# With a Capacity Block for ML (instance_types then takes one type, the block's):
#   packer build -var 'capacity_block={id = "cr-0123456789abcdef0", subnet_id = "subnet-0123456789abcdef0"}' .
# EC2 launches into a Capacity Block only in the block's Availability Zone, so subnet_id must be
# a subnet of that zone. And EC2 terminates the block's instances 30 minutes before the block's
# end time ("Amazon EC2 will terminate any instances that are still running 30 minutes before
# the end time of the Capacity Block", https://docs.aws.amazon.com/autoscaling/ec2/userguide/launch-template-capacity-blocks.html;
# the "Capacity Block Expiration Warning" event comes 40 minutes before the end,
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-monitor.html): the whole
# verification (SSH, up to ssh_timeout; settling, up to settle_timeout; the host suite, DCGM
# and the NCCL test, about 20 minutes on p5) must fit before that. Start the build so that the
# verification starts at least ssh_timeout + settle_timeout + 30 minutes before the termination
# begins, i.e. more than 2 hours before the block's end time with the timeouts below; a
# verification cut short by the termination fails as "could not judge" and leaves the AMI
# unverified.

packer {
  required_version = ">= 1.16.0"
  required_plugins {
    dlami = {
      source  = "github.com/dlami-bake/dlami"
      version = ">= 0.1.0"
    }
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.8.0"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "dlami_build" {
  type        = string
  description = "DLAMI build (YYYYMMDD) to bake on: the build whose kernel and driver the expect block names. Move them together, after reviewing the DLAMI release notes."
  default     = "20261002"
}

variable "build_instance_type" {
  type        = string
  default     = "c7i.8xlarge"
  description = "The build instance: a CPU type, no GPU capacity needed."
}

variable "verify_instance_types" {
  type        = list(string)
  default     = ["p5.48xlarge", "p5e.48xlarge"]
  description = "GPU types the post-processor tries in order for the validation."
}

variable "capacity_block" {
  type = object({
    id        = string # the Capacity Block's reservation, cr-...
    subnet_id = string # a subnet in the block's Availability Zone
  })
  default     = null
  description = "A Capacity Block for ML to validate in: its reservation id and a subnet in its Availability Zone; null for on-demand."
  validation {
    condition     = try(var.capacity_block == null, false) || (can(regex("^cr-[0-9a-f]+$", var.capacity_block.id)) && can(regex("^subnet-[0-9a-f]+$", var.capacity_block.subnet_id)))
    error_message = "The capacity_block needs id (the Capacity Block's reservation, cr-...) and subnet_id (subnet-..., in the block's Availability Zone: EC2 launches into a Capacity Block only in its zone)."
  }
}

variable "report_dir" {
  type    = string
  default = "dlami-reports/two-phase"
}

locals {
  family = "golden-slurm-p5"
}

data "dlami" "base" {
  region = var.region
  # Pinned: the expect block names this build's kernel and driver.
  build = var.dlami_build
}

source "amazon-ebs" "golden" {
  region        = var.region
  source_ami    = data.dlami.base.ami_id
  instance_type = var.build_instance_type
  ssh_username  = "ubuntu"
  ssh_timeout   = "15m"
  ami_name      = "${local.family}-${formatdate("YYYYMMDDhhmmss", timestamp())}"

  launch_block_device_mappings {
    device_name           = data.dlami.base.root_device_name
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags = {
    "dlami:family"     = local.family
    "dlami:source_ami" = data.dlami.base.ami_id
    "dlami:build"      = data.dlami.base.build
  }
}

build {
  name    = "two-phase"
  sources = ["source.amazon-ebs.golden"]

  provisioner "dlami" {
    report_dir = var.report_dir
    # Phase one: the guard and the layers here; the host suite and the NCCL test are deferred
    # to the post-processor (the report says result = deferred, never pass).
    defer_validation = true

    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "munge"]
      inline       = ["systemctl enable munge", "systemctl disable slurmd"]
    }

    # Judged in phase two, on the GPU instance (carried in the bill of materials).
    expect {
      kernel        = "7.0.0-1014-aws"
      nvidia_driver = "595.91.07"
      efa_installer = ">= 1.50.0"
      gpu_count     = 8
      efa_count     = 32
    }
  }

  # Phase two: the registered AMI's first boot on a GPU instance, then the deferred checks.
  post-processor "dlami" {
    region              = var.region
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/verify"
    complete_validation = true
    # Every EFA interface of the type (the default): 32 on p5.48xlarge and p5e.48xlarge in the
    # User Guide's P5 layout, as expect.efa_count says; the temporary security group then allows
    # all traffic to and from itself, and a temporary Elastic IP reaches the instance (EC2 gives
    # an instance with several network interfaces no public IP). Inside a VPC without a public
    # path, set ssh_interface = "private_ip" or ssh_bastion_host instead.
    efa = "all"
    # A Capacity Block holds one instance type in one zone: then only the first type is tried,
    # in a subnet of the block's zone, inside the block's window (see the top of this file).
    instance_types          = var.capacity_block == null ? var.verify_instance_types : [var.verify_instance_types[0]]
    capacity_reservation_id = var.capacity_block == null ? "" : var.capacity_block.id
    subnet_id               = var.capacity_block == null ? "" : var.capacity_block.subnet_id
    market_type             = var.capacity_block == null ? "" : "capacity-block"
    ssh_timeout             = "30m"
    settle_timeout          = "15m"
    on_failure              = "deregister"
  }

  # A sequence of its own: when the verification cannot judge the AMI (no GPU capacity, SSH),
  # the post-processor fails without touching it and Packer would deregister it; this keeps it,
  # registered without dlami:verified (see examples/README.md).
  post-processor "manifest" {
    output     = "${var.report_dir}/packer-manifest.json"
    strip_path = true
  }
}
