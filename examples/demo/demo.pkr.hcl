# The simulated demo (run it with `make demo`, which calls ./run). This is the template you would
# bake a golden AMI with on real AWS: the dlami data source resolves the DLAMI, amazon-ebs
# launches a p6-b200.48xlarge from it, the dlami provisioner layers Slurm behind the kernel-hold
# guard, validates the host and runs the NCCL test, the AMI is tagged with the DLAMI it came
# from, and the dlami post-processor boots the registered AMI on a fresh instance and tags it
# dlami:verified when its first boot matches the bake. amazon-ebs launches one plain network
# interface, so the bake has no EFA device (EC2 attaches EFA only at launch): its EFA device
# checks warn "not judged here"; the post-processor's instance is launched with every EFA
# interface of its type (efa = "all": 8 on p6-b200.48xlarge, reached through a temporary
# Elastic IP) and proves the devices, their traffic and GPUDirect RDMA. The only difference: the lines marked
# "simulation only" point every AWS call at the local fake endpoint (test/cmd/dlami-fake-aws
# --simhost), whose EC2 instances are simulated DLAMI hosts (test/simhost) on this machine.
#
# Two-phase (`-var two_phase=true`, `DEMO_TWO_PHASE=1 make demo`): amazon-ebs bakes on a CPU
# instance (build_instance_type, c7i.8xlarge) started from the same DLAMI; the provisioner runs
# the guard and the layers there and defers the host suite and the NCCL test
# (defer_validation), and the post-processor runs them on the GPU instance it launches from
# the AMI (complete_validation), trying verify_instance_types in order when one has no
# capacity. GPU time is then spent on the verification only. See docs/provisioners/dlami.mdx,
# "Two-phase bakes".
#
# For real AWS: delete the lines marked "simulation only" and the aws_endpoint variable, use
# your AWS credentials (profile, SSO, instance role, OIDC in CI), then `packer init . && packer
# build .`. See examples/golden-slurm for a fuller template (subnet, ami_regions, enroot/pyxis).

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

variable "aws_endpoint" {
  type        = string
  description = "URL of the local fake AWS endpoint (simulation only: delete for real AWS)."
}

variable "report_dir" {
  type    = string
  default = "dlami-reports/demo"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "instance_type" {
  type    = string
  default = "p6-b200.48xlarge"
}

variable "two_phase" {
  type        = bool
  default     = false
  description = "Bake on build_instance_type (no GPU) and validate on the post-processor's GPU instance."
}

variable "build_instance_type" {
  type        = string
  default     = "c7i.8xlarge"
  description = "The build instance of a two-phase bake: a CPU instance type."
}

variable "nodes" {
  type        = number
  default     = 1
  description = "Instances the post-processor verifies the AMI on; 2 or more also runs the NCCL all-reduce across them."
}

variable "verify_instance_types" {
  type        = list(string)
  default     = []
  description = "GPU instance types the post-processor tries in order; default [instance_type]."
}

locals {
  family       = "golden-slurm-${replace(var.instance_type, ".", "-")}"
  verify_types = length(var.verify_instance_types) > 0 ? var.verify_instance_types : [var.instance_type]
}

data "dlami" "base" {
  region = var.region
  # The build whose kernel and driver the expect block below names: without the pin, the next
  # DLAMI AWS publishes would fail the bake.
  build = "20261002"

  custom_endpoint_ec2 = var.aws_endpoint # simulation only
  ssm_endpoint        = var.aws_endpoint # simulation only
  sts_endpoint        = var.aws_endpoint # simulation only
}

source "amazon-ebs" "golden" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # simulation only
  skip_credential_validation = true             # simulation only: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = var.two_phase ? var.build_instance_type : var.instance_type
  ssh_username  = "ubuntu"
  # P-instances take a while to pass status checks.
  ssh_timeout = "30m"
  # No data source output in the name: `packer validate` sees those as "<unknown>".
  ami_name = "${local.family}-${formatdate("YYYYMMDDhhmmss", timestamp())}"

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
  name    = "demo"
  sources = ["source.amazon-ebs.golden"]

  provisioner "shell-local" {
    inline = [
      "echo 'dlami data source: ${data.dlami.base.ami_id} = ${data.dlami.base.name} (build ${data.dlami.base.build}, owner ${data.dlami.base.owner_id}, root ${data.dlami.base.root_device_name})'",
    ]
  }

  provisioner "dlami" {
    report_dir = var.report_dir
    # Two-phase: the host suite and the NCCL test run in the post-processor instead.
    defer_validation = var.two_phase

    # Real Debian packages through real apt, on a host whose kernel and driver packages are
    # held and whose apt repository offers a newer kernel: the guard proves nothing moved.
    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "munge"]
      inline = [
        "slurmd -V",
        "dpkg-query -W -f='$${Package} $${Version}\\n' slurmd munge",
        "if nvidia-smi -L >/dev/null 2>&1; then echo 'build host: NVIDIA GPUs present'; else echo 'build host: no NVIDIA GPU'; fi",
      ]
    }

    expect {
      kernel        = "7.0.0-1014-aws"
      nvidia_driver = "595.91.07"
      efa_driver    = ">= 3.3.0"
      efa_installer = ">= 1.50.0"
      libfabric     = ">= 2.6.0"
      aws_ofi_nccl  = ">= 1.21.1"
      gpu_count     = 8
      gpu_model     = "B200"
      efa_count     = 8
    }
  }

  # The registered AMI's first boot, on a fresh instance: the AMI is tagged
  # dlami:verified = true when it boots as it was baked.
  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # simulation only
    sts_endpoint        = var.aws_endpoint # simulation only
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/first-boot"
    # The first that has capacity; the AMI is tagged dlami:verified_instance_type with it.
    instance_types = local.verify_types
    # Every EFA interface of the type, in the EC2 User Guide's layout (the default): the EFA
    # checks the bake could not judge are judged here.
    efa = "all"
    # Two-phase: run the host suite and the NCCL test the bake deferred, with its expect block.
    complete_validation = var.two_phase
    # With nodes = 2 (`DEMO_NODES=2`, make demo's default), both instances come from one
    # RunInstances in a temporary cluster placement group, each first boot is verified, then
    # the image's mpirun runs all_reduce_perf across them over EFA; the AMI is tagged
    # dlami:verified_nodes. See docs/post-processors/dlami.mdx, "Two nodes".
    nodes = var.nodes
  }

  # Keeps the AMI when the post-processor fails: otherwise Packer deregisters it, even when
  # its first boot could not be judged at all.
  post-processor "manifest" {
    output = "${var.report_dir}/packer-manifest.json"
  }
}
